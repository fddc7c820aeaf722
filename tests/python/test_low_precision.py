"""f16 and bf16: storage, Convert and data movement on every backend (conftest.py runs each
test once per backend), against NumPy's float16 and a NumPy bit-manipulation reference for
bf16; the build-time error of arithmetic on them; gradients through Convert against finite
differences; the element-type names; serialization, checkpoints and collectives."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import ngraph as ng
import numpy as np
import pytest
from ngraph.impl import Type
from ngraph.utils import bfloat16
from ngraph.utils.types import get_dtype, get_element_type

RUNTIME = ng.runtime("CPU")  # replaced per backend by conftest.py

needs_ml_dtypes = pytest.mark.skipif(bfloat16 is None, reason="ml_dtypes is not installed")


def run(result, *params_and_values):
    params, values = params_and_values[::2], params_and_values[1::2]
    return RUNTIME.computation(result, *params)(*values)[0]


def bf16_reference_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even, in NumPy integer arithmetic; NaN keeps
    its sign and top payload bits, with the quiet bit set where those are all zero."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    top = (u >> 16).astype(np.uint16)
    nan_bits = np.where(top & 0x7F, top, top | 0x40).astype(np.uint16)
    return np.where(np.isnan(x), nan_bits, rounded)


def interesting_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random float32 bit patterns (all magnitudes, subnormals, inf, NaN) and values near
    f16's limits and rounding ties."""
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 1e5, 2.0**-24, 2.0**-25,
                        3 * 2.0**-25, 1 + 2.0**-11, 1 + 3 * 2.0**-11, np.inf, -np.inf, np.nan,
                        1e-40, 3.0e38, 0.1, 1 / 3],
                       np.float32)
    ties = (rng.integers(0, 2**16, size=n).astype(np.uint32) << 16) | 0x8000  # bf16 ties
    return np.concatenate([bits.view(np.float32), special, ties.view(np.float32)])


# ------------------------------------------------------------------------------ names


def test_element_type_names_and_dtypes():
    assert Type.f16 == "f16" and Type.bf16 == "bf16"
    assert Type.f16.size == 2 and Type.bf16.bitwidth == 16
    assert Type.f16.is_real() and Type.bf16.is_real() and not Type.bf16.is_integral()
    assert get_element_type(np.float16) == Type.f16
    assert get_dtype(Type.f16) == np.float16
    assert get_element_type("bf16") == Type.bf16 if bfloat16 is not None else True
    p = ng.parameter([2], np.float16)
    assert p.element_type == "f16" and p.dtype == np.float16
    assert ng.parameter([2], "f16").element_type == "f16"
    assert ng.parameter([2], "bf16").element_type == "bf16"
    assert ng.parameter([2], "bf16").get_element_type() == Type.bf16


@needs_ml_dtypes
def test_bf16_dtype_is_ml_dtypes():
    assert Type.bf16.to_dtype() == np.dtype(bfloat16)
    assert get_element_type(bfloat16) == Type.bf16
    assert ng.parameter([2], bfloat16).dtype == np.dtype(bfloat16)


# ------------------------------------------------------------------------------ convert


def test_f16_every_bit_pattern_converts_to_f32_as_numpy(backend):
    bits = np.arange(2**16, dtype=np.uint16)
    h = bits.view(np.float16)
    p = ng.parameter([2**16], np.float16)
    got = run(ng.convert(p, np.float32), p, h)
    want = h.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    # ... and back, bit for bit (NaN: a NaN; oneDNN quiets signalling NaNs).
    back = run(ng.convert(ng.convert(p, np.float32), np.float16), p, h)
    np.testing.assert_array_equal(back.view(np.uint16)[~nan], bits[~nan])
    assert np.isnan(back[nan]).all()


def test_f16_from_f32_and_f64_rounds_as_numpy(backend):
    x = interesting_floats(np.random.default_rng(1), 20000)
    for dtype in (np.float32, np.float64):
        with np.errstate(invalid="ignore"):  # signalling NaNs among the random bit patterns
            src = x.astype(dtype)
        p = ng.parameter([x.size], dtype)
        got = run(ng.convert(p, np.float16), p, src)
        with np.errstate(over="ignore"):  # values beyond 65504: inf, as ngraph's
            want = src.astype(np.float16)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_bf16_from_f32_rounds_as_the_bit_reference(backend):
    x = interesting_floats(np.random.default_rng(2), 20000)
    p = ng.parameter([x.size], np.float32)
    # Through f32 on the way out (exact): works with or without ml_dtypes.
    got = run(ng.convert(ng.convert(p, "bf16"), np.float32), p, x).view(np.uint32)
    assert not np.any(got & 0xFFFF)
    np.testing.assert_array_equal((got >> 16).astype(np.uint16), bf16_reference_bits(x))


@needs_ml_dtypes
def test_bf16_results_and_parameters_are_ml_dtypes_arrays(backend):
    x = interesting_floats(np.random.default_rng(3), 5000)
    p = ng.parameter([x.size], np.float32)
    got = run(ng.convert(p, bfloat16), p, x)
    assert got.dtype == np.dtype(bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), bf16_reference_bits(x))
    finite = np.isfinite(x)
    np.testing.assert_array_equal(got[finite], x[finite].astype(bfloat16))
    q = ng.parameter([x.size], bfloat16)
    back = run(ng.convert(q, np.float32), q, got)
    np.testing.assert_array_equal(back.view(np.uint32) >> 16, got.view(np.uint16))


@pytest.mark.parametrize("other", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                   np.uint16, np.uint32, np.uint64, np.float32, np.float64])
def test_convert_between_f16_bf16_and_every_type(backend, other):
    values = np.array([0, 1, 2, 3, 7, 100, 120, 0, 1, 64], dtype=np.float64)
    src = values.astype(other)
    p = ng.parameter([values.size], other)
    for low in ("f16", "bf16"):
        to_low = ng.convert(p, low)
        back = run(ng.convert(to_low, other), p, src)
        assert back.dtype == np.dtype(other)
        np.testing.assert_array_equal(back, src)  # every value is exact in both types
        as_f32 = run(ng.convert(to_low, np.float32), p, src)
        np.testing.assert_array_equal(as_f32, src.astype(np.float32))
    f16 = run(ng.convert(p, np.float16), p, src)
    np.testing.assert_array_equal(f16, src.astype(np.float16))
    # f16 <-> bf16 directly.
    between = run(ng.convert(ng.convert(ng.convert(p, "f16"), "bf16"), np.float16), p, src)
    np.testing.assert_array_equal(between, src.astype(np.float16))


def test_convert_from_f16_to_integers_truncates_and_to_bool_is_nonzero(backend):
    h = np.array([-7.75, -0.5, 0.0, 0.25, 3.5, 1000.0, -0.0], np.float16)
    p = ng.parameter([h.size], np.float16)
    np.testing.assert_array_equal(run(ng.convert(p, np.int32), p, h), h.astype(np.int32))
    np.testing.assert_array_equal(run(ng.convert(p, np.bool_), p, h), h.astype(np.bool_))


# ------------------------------------------------------------------------ data movement


def test_f16_parameters_constants_and_data_movement_match_numpy(backend):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4)).astype(np.float16)
    p = ng.parameter([2, 3, 4], np.float16)
    cv = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    c = ng.constant(cv)
    cases = [
        (ng.reshape(p, [4, 3, 2], [2, 1, 0]), x.transpose(2, 1, 0)),
        (ng.reshape(p, [6, 4]), x.reshape(6, 4)),
        (ng.slice(p, [0, 1, 0], [2, 3, 4], [1, 1, 2]), x[:, 1:3, ::2]),
        (ng.concat([p, c], 1), np.concatenate([x, cv], 1)),
        (ng.reverse(p, [0, 2]), x[::-1, :, ::-1]),
        (ng.broadcast(p, [5, 2, 3, 4], broadcast_axes={0}), np.broadcast_to(x, (5, 2, 3, 4))),
        (ng.pad(p, ng.constant(np.float16(9)), [0, 1, 0], [0, 0, 2]),
         np.pad(x, [(0, 0), (1, 0), (0, 2)], constant_values=9)),
        (ng.select(ng.constant(x > 0), p, c), np.where(x > 0, x, cv)),
    ]
    for node, want in cases:
        got = run(node, p, x)
        assert got.dtype == np.float16, node
        np.testing.assert_array_equal(got, want, err_msg=node.get_type_name())


@needs_ml_dtypes
def test_bf16_data_movement_matches_numpy(backend):
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(bfloat16)
    p = ng.parameter([3, 4], bfloat16)
    got = run(ng.reshape(ng.reverse(p, [1]), [4, 3], [1, 0]), p, x)
    np.testing.assert_array_equal(got.view(np.uint16), x[:, ::-1].T.copy().view(np.uint16))


def test_f16_variables_hold_and_update(backend):
    v = ng.variable(np.array([1.5, -2.0], np.float16))
    assert v.element_type == "f16"
    step = RUNTIME.computation([ng.convert(v, np.float32)], updates=[(v, ng.reverse(v, [0]))])
    np.testing.assert_array_equal(step()[0], [1.5, -2.0])
    np.testing.assert_array_equal(v.get_value(), np.array([-2.0, 1.5], np.float16))


# -------------------------------------------------------------------- the storage rule


@pytest.mark.parametrize("low", ["f16", "bf16"])
def test_arithmetic_on_f16_and_bf16_is_refused_when_built(low):
    p = ng.parameter([2, 2], low, name="h")
    cases = [(lambda: p + p, "Add"), (lambda: ng.sum(p, [0]), "Sum"),
             (lambda: ng.relu(p), "Relu"), (lambda: ng.exp(p), "Exp"), (lambda: p < p, "Less")]
    if low == "f16":  # products take bf16 operands (mixed precision, an f32 result)
        cases.append((lambda: ng.dot(p, p), "Dot"))
    else:
        assert ng.dot(p, p).element_type == "f32"
    for build, op in cases:
        with pytest.raises(TypeError) as e:
            build()
        msg = str(e.value)
        assert msg.startswith(f"[{op}] element type {low} is storage-only"), msg
        assert "ng.convert(x, np.float32)" in msg
    # The fix works: compute in f32, store the result in the low type.
    q = ng.convert(ng.convert(p, np.float32) * 2, low)
    assert q.element_type == low


def test_collectives_refuse_f16():
    p = ng.parameter([4], np.float16)
    with pytest.raises(TypeError, match=r"\[AllReduce\] element type f16 is storage-only"):
        ng.allreduce(p)


# ------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("low", ["f16", "bf16"])
def test_gradient_through_convert_matches_finite_differences(backend, low):
    # Values and steps exact in f16 and bf16 (multiples of 1/8 below 16), so the graph is
    # linear in x and central differences in f32 are exact.
    rng = np.random.default_rng(6)
    x0 = (rng.integers(-32, 32, size=6) / 8).astype(np.float32)
    w = (rng.integers(-8, 8, size=6) / 4).astype(np.float32)
    x = ng.parameter([6], np.float32)
    loss = ng.sum(ng.convert(ng.convert(x, low), np.float32) * ng.constant(w), [0])
    (grad,) = ng.gradients(loss, [x])
    comp = RUNTIME.computation([loss, grad], x)
    got = comp(x0)[1]
    h = np.float32(0.125)
    fd = np.array([(comp(x0 + h * e)[0] - comp(x0 - h * e)[0]) / (2 * h)
                   for e in np.eye(6, dtype=np.float32)])
    np.testing.assert_array_equal(got, fd)
    np.testing.assert_array_equal(got, w)


def test_gradient_with_respect_to_an_f16_parameter(backend):
    x0 = np.array([0.5, -1.25, 3.0], np.float16)
    w = np.array([2.0, -0.5, 1.0], np.float32)
    x = ng.parameter([3], np.float16)
    loss = ng.sum(ng.convert(x, np.float32) * ng.constant(w), [0])
    (grad,) = ng.gradients(loss, [x])
    assert grad.element_type == "f16"
    comp = RUNTIME.computation([loss, grad], x)
    got = comp(x0)[1]
    h = np.float16(0.25)
    fd = np.array([(comp(x0 + h * e)[0] - comp(x0 - h * e)[0]) / (2 * np.float32(h))
                   for e in np.eye(3, dtype=np.float16)])
    np.testing.assert_array_equal(got.astype(np.float32), fd)


# ------------------------------------------------------- serialization and checkpoints


def test_serialize_round_trip_keeps_f16_and_bf16(backend):
    p = ng.parameter([3], np.float16, name="p")
    c = ng.convert(ng.constant(np.array([0.1, -2.5, 1e-7], np.float32)), "bf16")
    out = ng.convert(ng.concat([ng.convert(p, "bf16"), c], 0), np.float32)
    text = ng.serialize(RUNTIME.computation(out, p))
    assert '"float16"' in text
    g = ng.deserialize(text)
    x = np.array([1.0, -0.333, 65504], np.float16)
    want = RUNTIME.computation(out, p)(x)[0]
    np.testing.assert_array_equal(RUNTIME.computation(g)(x)[0], want)
    assert g.get_parameters()[0].element_type == "f16"


def test_checkpoint_keeps_f16(tmp_path):
    v = ng.variable(np.array([0.1, 65504, -np.inf], np.float16), name="v")
    ng.save(tmp_path / "c.ckpt", [v])
    v.set_value(np.zeros(3, np.float16))
    ng.load(tmp_path / "c.ckpt", [v], allow_nonfinite=True)
    np.testing.assert_array_equal(v.get_value(), np.array([0.1, 65504, -np.inf], np.float16))


@needs_ml_dtypes
def test_checkpoint_keeps_bf16(tmp_path):
    x = np.array([0.1, 3e38, -7], np.float32).astype(bfloat16)
    v = ng.variable(x, name="w")
    ng.save(tmp_path / "c.ckpt", [v])
    v.set_value(np.zeros(3, bfloat16))
    ng.load(tmp_path / "c.ckpt", [v])
    assert v.get_value().dtype == np.dtype(bfloat16)
    np.testing.assert_array_equal(v.get_value().view(np.uint16), x.view(np.uint16))


# ----------------------------------------------------------------- without ml_dtypes


def test_bf16_without_ml_dtypes_results_come_back_as_float32():
    code = textwrap.dedent("""
        import sys
        sys.modules["ml_dtypes"] = None  # as if not installed
        import numpy as np, ngraph as ng
        from ngraph.utils import bfloat16
        assert bfloat16 is None
        p = ng.parameter([3], np.float32)
        b = ng.convert(p, "bf16")
        for name in ("CPU", "INTERPRETER"):
            out = ng.runtime(name).computation(b, p)(np.array([1.0, 0.1, -3e38], np.float32))[0]
            assert out.dtype == np.float32, out.dtype
            assert list(out.view(np.uint32) >> 16) == [0x3F80, 0x3DCD, 0xFF62], out
        q = ng.parameter([3], "bf16")
        try:
            ng.runtime().computation(ng.convert(q, np.float32), q)
        except TypeError as e:
            assert "ml_dtypes" in str(e) and "bf16" in str(e), e
        else:
            raise AssertionError("a bf16 parameter without ml_dtypes was accepted")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
