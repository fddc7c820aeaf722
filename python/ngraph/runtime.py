"""Compiling graphs and running them on NumPy arrays (nGraph's ``ng.runtime``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ngraph import _ngraph
from ngraph._ngraph import Function, Node, Variable
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.utils import as_node, bfloat16


def _host_result(node: Node) -> Node:
    """`node`, or for a bf16 result where NumPy has no bfloat16 (ml_dtypes not installed) the
    same values as float32 (exact: every bf16 value is a float32 value)."""
    # A node of several outputs is not a result: Function's own check says so, naming it.
    if bfloat16 is None and node.get_output_size() == 1 and node.element_type == "bf16":
        return _ngraph.make_node("Convert", [node], {"destination_type": "f32"}, "")
    return node


PRECISIONS = ("f32", "bf16")


def _precision(precision: str | None) -> str:
    """The precision to compile in: `precision`, or NGRAPH_PRECISION when None."""
    if precision is None:
        from ngraph import settings
        value = settings.raw("NGRAPH_PRECISION") or "f32"
        if value not in PRECISIONS:
            raise UserInputError(f"NGRAPH_PRECISION must be one of {', '.join(PRECISIONS)}, "
                                 f"got {value!r}")
        return value
    if not isinstance(precision, str):
        raise NgraphTypeError(f"Runtime.computation: precision must be a str ("
                              f"{', '.join(PRECISIONS)}), got {type(precision).__name__}")
    if precision not in PRECISIONS:
        raise UserInputError(f"Runtime.computation: precision must be one of "
                             f"{', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def cpu_features() -> dict[str, bool | str]:
    """What this CPU has and which bf16 path runs: the CPUID flags avx2, fma, f16c, avx512f,
    avx512dq, avx512bw, avx512vl, avx512_core (those four), avx512_bf16, avx512_fp16, amx_tile
    and amx_bf16 (bools); "onednn_isa", the instruction set oneDNN runs with (capped by
    ONEDNN_MAX_CPU_ISA), e.g. "avx512_core_bf16"; and "bf16_path": "native" where oneDNN runs
    bf16 instructions (AVX512-BF16 or AMX), else "f32" (a computation in bf16 runs the f32
    kernels); and "loops", which of ngraph's own loops run: the "avx512" or "avx2" twins, a
    portable build's own ("baseline"), or a build compiled for its machine ("native",
    NGRAPH_NATIVE_ARCH). NGRAPH_CPU_ISA caps the twins: avx2 with ONEDNN_MAX_CPU_ISA=AVX2
    runs, in a portable build on an AVX-512 CPU, the code an AVX2 CPU runs."""
    return dict(_ngraph.cpu_features())


def runtime(backend_name: str = "CPU") -> Runtime:
    """A runtime on the named backend: "CPU" (the compiler) or "INTERPRETER" (the reference
    executor, one plain kernel per op: slow, for checking results). Another name raises
    ValueError listing the registered backends."""
    return Runtime(backend_name)


def backends() -> list[str]:
    """The names ng.runtime accepts."""
    return list(_ngraph.Backend.get_registered_devices())


class Runtime:
    """Compiles graphs into computations on one backend."""

    def __init__(self, backend_name: str = "CPU") -> None:
        self.backend_name = backend_name
        self.backend = _ngraph.Backend.create(backend_name)

        self.config: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<Runtime: Backend='{self.backend_name}'>"

    #: The keys of set_config and what they do.
    CONFIG_KEYS = {
        "NUM_THREADS": "threads of each rank's kernels (ng.set_num_threads), a positive int",
    }

    def set_config(self, config: dict[str, str]) -> None:
        """Backend settings as nGraph's ``Runtime.set_config``: a dict of str to str. The
        keys are in ``Runtime.CONFIG_KEYS``; others raise UserInputError naming them. The
        settings are kept in ``runtime.config``."""
        if not isinstance(config, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in config.items()
        ):
            raise NgraphTypeError(f"Runtime.set_config takes a dict of str to str, got {config!r}")
        unknown = sorted(set(config) - set(self.CONFIG_KEYS))
        if unknown:
            raise UserInputError(f"Runtime.set_config: unknown key(s) {', '.join(unknown)} "
                                 f"(known: {', '.join(self.CONFIG_KEYS)})")
        if "NUM_THREADS" in config:
            value = config["NUM_THREADS"]
            if not value.isdigit() or int(value) < 1:
                raise UserInputError(f"Runtime.set_config: NUM_THREADS must be a positive "
                                     f"integer, got {value!r}")
            _ngraph.set_num_threads(int(value))
        self.config.update(config)

    def computation(self, node_or_function: Node | Sequence[Node] | Function,
                    *inputs: Node, updates: Sequence[tuple[Node, Any]] | None = None,
                    precision: str | None = None) -> Computation:
        """Compiles the graph that computes `node_or_function` (a node, a list of nodes or a
        Function) from the parameters `inputs` (in call order). `updates` lists
        (variable, new value) pairs applied at the end of every call, in place; all reads
        in a call see the values from before it.

        `precision`: "f32" (as built) or "bf16", mixed precision: convolutions and matrix
        products read their operands in bf16 and accumulate in f32; everything else, the
        variables and their update stay f32 (docs/training.md). On a CPU without bf16
        instructions (``ng.cpu_features()["bf16_path"] == "f32"``) bf16 runs the f32 kernels
        and says so once on stderr. None: the setting NGRAPH_PRECISION (default f32)."""
        return Computation(self, node_or_function, *inputs, updates=updates,
                           precision=precision)


class Computation(_ngraph.ComputationBase):
    """A compiled graph. Call it with one array per parameter: it returns a list of ndarrays,
    one per result (as nGraph's), also when built from a single node.

    Arrays of the parameter's dtype and shape, C-contiguous, are used in place by a call path
    written in C++; other values are converted first when that is safe."""

    def __init__(self, runtime: Runtime, node_or_function: Any, *parameters: Node,
                 updates: Sequence[tuple[Node, Any]] | None = None,
                 precision: str | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        self.precision = _precision(precision)
        if isinstance(node_or_function, Function):
            if updates:
                raise NgraphTypeError("Runtime.computation: updates need nodes, not a Function")
            # nGraph's code passes the function's own parameters too: allowed when they are
            # exactly those, in order.
            own = node_or_function.get_parameters()
            if parameters and (len(parameters) != len(own) or not all(
                    isinstance(p, Node) and p.same_node(q) for p, q in zip(parameters, own))):
                raise NgraphTypeError("Runtime.computation: the parameters given with a "
                                      "Function must be its own, in order (or none)")
            self.function = node_or_function
            self._single = False
            self._layout = [True] * len(node_or_function.get_results())
        else:
            self._single = isinstance(node_or_function, Node)
            given = [node_or_function] if self._single else list(node_or_function)
            for i, r in enumerate(given):
                if not isinstance(r, Node):
                    raise NgraphTypeError(f"Runtime.computation: result {i} is a "
                                    f"{type(r).__name__}, not a Node")
            for i, p in enumerate(parameters):
                if not isinstance(p, Node) or p.get_type_name() != "Parameter":
                    raise NgraphTypeError(f"Runtime.computation: argument {i + 1} must be a "
                                    f"Parameter node, got {p!r}")
            # Nodes without a value (ng.send) run as sinks; their place in the output is None.
            self._layout = [r.get_output_size() > 0 for r in given]
            results = [_host_result(r) for r, has_value in zip(given, self._layout) if has_value]
            sinks = [r for r, has_value in zip(given, self._layout) if not has_value]
            name = given[0].name if self._single else ""
            pairs = []
            for i, pair in enumerate(updates or []):
                try:
                    var, value = pair
                except (TypeError, ValueError):
                    raise NgraphTypeError(f"updates[{i}] must be a (variable, value) pair, "
                                    f"got {pair!r}") from None
                if not isinstance(var, Variable):
                    raise NgraphTypeError(f"updates[{i}]: {var!r} is not a variable "
                                    "(make it with ng.variable)")
                pairs.append((var, as_node(value, var.dtype)))
            if pairs or sinks:
                self.function = _ngraph.make_function(results, list(parameters), pairs, sinks,
                                                      name)
            else:
                self.function = Function(results, list(parameters), name)
        self.parameters = self.function.get_parameters()
        self.results = self.function.get_results()
        self._dtypes = [p.dtype for p in self.parameters]
        self._shapes = [tuple(p.shape) for p in self.parameters]
        self.executable = runtime.backend.compile(self.function, self.precision)
        self._bind(self.executable, self._layout, False)

    @property
    def rng_step(self) -> int:
        """The step the random ops (``ng.dropout``) of the next call draw with: the number of
        calls so far, unless set. Masks are a function of (seed, rank, step): a run resumed from
        a checkpoint sets the step it saved to draw the masks the uninterrupted run would have."""
        return self.executable.rng_step

    @rng_step.setter
    def rng_step(self, step: int) -> None:
        if int(step) < 0:
            raise UserInputError(f"rng_step must be >= 0, got {step}")
        self.executable.rng_step = int(step)

    def serialize(self, indent: int = 0) -> str:
        """JSON text of the compiled function (nGraph's ``Computation.serialize``): its ops,
        its variable updates and the variables' current values. ``ng.deserialize`` reads it
        back into a Function that ``runtime.computation`` compiles."""
        from ngraph.serializer import serialize  # noqa: PLC0415

        return serialize(self, indent)

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.element_type}{p.shape}" for p in self.parameters)
        return f"<Computation: {self.function.name or 'unnamed'}({params})>"

    def _convert(self, i: int, value: Any) -> np.ndarray:
        p, dtype, shape = self.parameters[i], self._dtypes[i], self._shapes[i]
        if not isinstance(value, np.ndarray):
            # Lists and scalars get their natural dtype first, so that they pass the same
            # check as arrays ([1.5] into an int32 parameter is refused, not truncated).
            try:
                value = np.asarray(value)
            except (TypeError, ValueError, OverflowError) as e:
                raise NgraphTypeError(f"argument {i} ({p.name}) expects {dtype} with shape "
                                f"{shape}: {e}") from None
        if value.dtype != dtype:
            if not np.can_cast(value.dtype, dtype, casting="same_kind"):
                raise NgraphTypeError(
                    f"argument {i} ({p.name}) expects {dtype} with shape {shape}, "
                    f"got {value.dtype} (cannot convert {value.dtype} to {dtype} safely)"
                )
            value = value.astype(dtype)
        if value.shape != shape:
            raise UserInputError(f"argument {i} ({p.name}) expects shape {shape} ({dtype}), "
                             f"got shape {value.shape}")
        # The kernels read the buffer in place: C order and aligned for the dtype (a view at an
        # odd byte offset is C-contiguous but unaligned).
        if not (value.flags.c_contiguous and value.flags.aligned):
            value = np.require(value, dtype, ["C_CONTIGUOUS", "ALIGNED"])
        return value

    # __call__ is ComputationBase's (C++); it comes here when an argument needs converting.
    def _call_slow(self, *input_values: Any) -> list[np.ndarray]:
        if len(input_values) != len(self.parameters):
            names = ", ".join(p.name for p in self.parameters) or "none"
            raise NgraphTypeError(f"computation expects {len(self.parameters)} arguments "
                            f"({names}), got {len(input_values)}")
        arrays = [self._convert(i, v) for i, v in enumerate(input_values)]
        return self._run_converted(*arrays)
