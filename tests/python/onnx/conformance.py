"""onnx's backend test cases run through ngraph.onnx.backend: the cases, what each needs,
the exclusions (each with its reason) and the comparison of outputs, shared by the test suite
(test_backend.py) and the table in docs/onnx.md (tools/onnx_conformance.py).

A case runs when every op of its model is one the importer supports and it is not excluded;
it must then pass. Cases of ops the importer does not support are counted as such.
"""

from __future__ import annotations

import glob
import os
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import onnx
from ngraph.onnx import backend, supported_ops
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

KINDS = ("node", "simple", "real", "pytorch-converted", "pytorch-operator")

# Cases of supported ops that ngraph does not pass, by pattern (re.search on the case name),
# with the reason. docs/onnx.md prints them.
EXCLUDED: list[tuple[str, str]] = [
    (r"FLOAT8|FLOAT4|INT4|UINT4|float8|float4|_int4|_uint4|INT2|UINT2|_int2|_uint2|e4m3|e5m2|"
     r"e8m0|f8|fp8|4bit|2bit|FLOAT8E|test_cast_e",
     "8-, 4- and 2-bit element types: ngraph has none"),
    (r"STRING|_string|test_strnorm", "string tensors: ngraph has no string element type"),
    (r"test_training_dropout(_default)?(_mask)?$|test_dropout_random",
     "training-mode Dropout: ngraph's masks come from Philox (seed, rank, step), not NumPy's "
     "generator; tests/python/onnx/test_import.py checks the masks' rate and scaling"),
    (r"_bf16_expanded|_fp16_expanded|_bfloat16_expanded|_float16_expanded|"
     r"test_attention_.*_bf16$",
     "f16/bf16 arithmetic: ngraph computes f16/bf16 ops in f32 and rounds the result once; "
     "onnx's reference rounds after every step (and bf16's ulp, 2^-8, is above the cases' "
     "rtol of 1e-3)"),
    (r"test_resize_.*antialias|test_resize_tf_crop_and_resize",
     "Resize with antialias or tf_crop_and_resize: not supported (clear error)"),
    (r"reduction_(mul|max|min)|test_scatternd_(multiply|max|min)",
     "ScatterElements/ScatterND reductions mul, max, min: not supported (clear error)"),
    (r"test_einsum_batch_diagonal|test_einsum_.*ellipsis",
     "Einsum with ellipses or diagonals: not supported (clear error)"),
    (r"^test_shufflenet$",
     "its expected output comes from onnx's ReferenceEvaluator, whose BatchNormalization-9 "
     "mixes the batch's statistics into inference when momentum has its default (0.9): node "
     "n1 gives 13.6 there, 15.07 by the spec's formula, which ngraph gives"),
    (r"test_identity_sequence|test_identity_opt|test_split_to_sequence|_seq_|sequence_",
     "sequence or optional graph inputs and outputs: ngraph's inputs and outputs are tensors"),
]


@dataclass
class Case:
    name: str
    kind: str
    model: onnx.ModelProto | None
    model_path: str | None
    data: list | None  # [(inputs, outputs)] when known
    rtol: float
    atol: float

    def load(self) -> onnx.ModelProto:
        if self.model is None:
            self.model = onnx.load(self.model_path)
        return self.model


def _light_path(url: str) -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(onnx.__file__)))
    return os.path.join(root, url)


@lru_cache(maxsize=1)
def all_cases() -> list[Case]:
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in KINDS:
            for c in load_model_tests(kind=kind):
                if c.model is not None:
                    out.append(Case(c.name, kind, c.model, None, c.data_sets, c.rtol, c.atol))
                elif c.model_dir is not None:
                    out.append(Case(c.name, kind, None, os.path.join(c.model_dir, "model.onnx"),
                                    None, c.rtol, c.atol))
                elif c.url and c.url.startswith("onnx/backend/test/data/light/"):
                    out.append(Case(c.name, kind, None, _light_path(c.url), None, c.rtol,
                                    c.atol))
                else:  # a model to download: not at run time
                    out.append(Case(c.name, kind, None, None, None, c.rtol, c.atol))
    return out


def op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type if (n.domain or "ai.onnx") == "ai.onnx" else f"{n.domain}.{n.op_type}"
            for n in model.graph.node}


def classify(case: Case) -> tuple[str, str]:
    """("run", ""), ("unsupported", the ops), ("excluded", the reason) or ("unavailable",
    why)."""
    if case.model is None and case.model_path is None:
        return "unavailable", "the model is downloaded from the internet"
    missing = sorted(op_types(case.load()) - set(supported_ops()))
    if missing:
        return "unsupported", ", ".join(missing)
    for pattern, reason in EXCLUDED:
        if re.search(pattern, case.name):
            return "excluded", reason
    return "run", ""


def _read_tensor(path: str) -> np.ndarray:
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def data_sets(case: Case) -> list:
    if case.data is not None:
        return case.data
    model = case.load()
    if case.kind == "real":  # a light model: its recorded output for onnx's dummy input
        inits = {i.name for i in model.graph.initializer}
        inputs = []
        for vi in model.graph.input:
            if vi.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                          for d in vi.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        prefix = os.path.splitext(case.model_path)[0]
        outputs = [_read_tensor(f"{prefix}_output_{i}.pb") for i in range(len(model.graph.output))]
        return [(inputs, outputs)]
    sets = []
    folder = os.path.dirname(case.model_path)
    for d in sorted(glob.glob(os.path.join(folder, "test_data_set*"))):
        ins = [_read_tensor(p) for p in sorted(glob.glob(os.path.join(d, "input_*.pb")),
                                                 key=_index)]
        outs = [_read_tensor(p) for p in sorted(glob.glob(os.path.join(d, "output_*.pb")),
                                                  key=_index)]
        sets.append((ins, outs))
    return sets


def _array(value):
    """onnx's data sets hold some tensors as TensorProtos."""
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def _index(path: str) -> int:
    return int(re.search(r"_(\d+)\.pb$", path).group(1))


def run_case(case: Case, device: str = "CPU") -> None:
    """Runs the case on `device`; raises AssertionError (or the import's error) when an output
    differs from onnx's in shape, dtype or value (onnx's rtol/atol)."""
    rep = backend.prepare(case.load(), device)
    for inputs, expected in data_sets(case):
        inputs, expected = [_array(v) for v in inputs], [_array(v) for v in expected]
        got = rep.run(inputs)
        assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            e = np.asarray(e)
            assert g.shape == e.shape, f"output {i}: shape {g.shape}, expected {e.shape}"
            assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype}, expected {e.dtype}"
            if e.dtype.name == "bfloat16":  # ml_dtypes' bf16: compared as f32 (NaN too)
                g, e = g.astype(np.float32), e.astype(np.float32)
            if e.dtype.kind in "fc":
                np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol,
                                           err_msg=f"output {i}")
            else:
                np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
