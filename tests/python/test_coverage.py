"""Every op of the C++ core has a Python op function, and test_ops.py exercises it.

OP_FUNCTIONS is the explicit map from core op name to the Python function that builds it.
Adding an op to the core without adding it here (with a Python wrapper and a test in
test_ops.py) fails test_every_core_op_has_a_python_function.
"""

import pathlib
import re

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph

# Graph leaves and roots that every computation has: no op function of their own.
STRUCTURAL_OPS = {"Parameter", "Constant", "Result"}

# Core op name -> name of the Python function (in the ngraph namespace) that builds it.
OP_FUNCTIONS = {
    "Abs": "absolute",
    "Add": "add",
    "ArgMax": "argmax",
    "ArgMin": "argmin",
    "Assign": "variable",  # built by runtime.computation(..., updates=[(variable, value)])
    "Broadcast": "broadcast",
    "Ceiling": "ceiling",
    "Concat": "concat",
    "Convert": "convert",
    "Cos": "cos",
    "Divide": "divide",
    "Convolution": "convolution",
    "ConvolutionBackpropData": "convolution_backprop_data",
    "ConvolutionBackpropFilters": "convolution_backprop_filters",
    "Dot": "dot",
    "Equal": "equal",
    "Exp": "exp",
    "Floor": "floor",
    "Greater": "greater",
    "GreaterEq": "greater_eq",
    "Less": "less",
    "LessEq": "less_eq",
    "Log": "log",
    "LogicalAnd": "logical_and",
    "LogicalNot": "logical_not",
    "LogicalOr": "logical_or",
    "MatMul": "matmul",
    "Max": "max",
    "Maximum": "maximum",
    "Min": "min",
    "Minimum": "minimum",
    "Multiply": "multiply",
    "Negative": "negative",
    "NotEqual": "not_equal",
    "OneHot": "one_hot",
    "Pad": "pad",
    "Power": "power",
    "Product": "prod",
    "Relu": "relu",
    "Reshape": "reshape",
    "Reverse": "reverse",
    "Select": "select",
    "Sigmoid": "sigmoid",
    "Erf": "erf",
    "Gelu": "gelu",
    "Sign": "sign",
    "Sin": "sin",
    "Slice": "slice",
    "Softmax": "softmax",
    "Sqrt": "sqrt",
    "Subtract": "subtract",
    "Sum": "sum",
    "Tanh": "tanh",
    "Tan": "tan",
    "Asin": "asin",
    "Acos": "acos",
    "Atan": "atan",
    "Sinh": "sinh",
    "Cosh": "cosh",
    "TopK": "topk",
    "Variable": "variable",
    "StopGradient": "stop_gradient",
    "Gather": "gather",
    "EmbeddingLookup": "embedding_lookup",
    "ScatterAdd": "scatter_add",
    "LayerNorm": "layer_norm",
    "LayerNormBackprop": "layer_norm",  # built by the gradient of LayerNorm
    "Dropout": "dropout",
    "ReplaceSlice": "replace_slice",
    "Split": "split",
    "Tile": "tile",
    "GetOutputElement": "get_output_element",
    "BatchNormTraining": "batch_norm",  # without mean and variance
    "BatchNormInference": "batch_norm",  # with mean and variance
    "BatchNormTrainingBackprop": "gradients",  # built by the gradient of BatchNormTraining
    "MaxPool": "max_pool",
    "AvgPool": "avg_pool",
    "LRN": "lrn",
    # Gradient ops: built by ng.gradients of the function's op.
    "MaxPoolBackprop": "max_pool",
    "AvgPoolBackprop": "avg_pool",
    "LRNBackprop": "lrn",
    # Collectives: exercised with one rank in test_distributed_local.py and under mpirun in
    # distributed/mpi_test_*.py.
    "AllReduce": "allreduce",
    "BroadcastDistributed": "broadcast_distributed",
    "AllGather": "allgather",
    "ReduceScatter": "reduce_scatter",
    "Send": "send",
    "Recv": "recv",
}

# Where each op function must be exercised: test_ops.py, or for collectives the distributed
# suites.
COLLECTIVES = {"AllReduce", "BroadcastDistributed", "AllGather", "ReduceScatter", "Send", "Recv"}
TEST_OPS = pathlib.Path(__file__).with_name("test_ops.py")
# Ops exercised in a test file of their own instead of test_ops.py.
OWN_TEST_FILES = {
    **{op: "compat/test_compat_ops.py" for op in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
                                                  "TopK")},
    "GetOutputElement": "test_batch_norm.py",
    "LayerNormBackprop": "test_gradients.py",
    "BatchNormTraining": "test_batch_norm.py",
    "BatchNormInference": "test_batch_norm.py",
    "BatchNormTrainingBackprop": "test_batch_norm.py",
}


def test_every_core_op_has_a_python_function():
    core_ops = set(_ngraph.op_names()) - STRUCTURAL_OPS
    missing = sorted(core_ops - set(OP_FUNCTIONS))
    assert not missing, f"core ops without a Python op function in OP_FUNCTIONS: {missing}"
    stale = sorted(set(OP_FUNCTIONS) - core_ops)
    assert not stale, f"OP_FUNCTIONS names ops the core does not have: {stale}"
    assert STRUCTURAL_OPS <= set(_ngraph.op_names())


# Ops whose values the executables provide themselves (no kernel on any backend).
EXECUTABLE_VALUES = STRUCTURAL_OPS | {"Variable", "Assign"}


def test_every_core_op_has_an_interpreter_kernel():
    """INTERPRETER, the reference executor, runs every op: adding an op to the core without
    its reference kernel (cpp/interpreter) fails here."""
    kernels = set(_ngraph.interpreter_kernel_names())
    missing = sorted(set(_ngraph.op_names()) - EXECUTABLE_VALUES - kernels)
    assert not missing, f"core ops without an INTERPRETER kernel: {missing}"
    stale = sorted(kernels - set(_ngraph.op_names()))
    assert not stale, f"INTERPRETER kernels for ops the core does not have: {stale}"


def test_interpreter_runs_every_element_type():
    """The INTERPRETER's type list covers every element type the package accepts."""
    from ngraph.utils import SUPPORTED_DTYPES

    names = set(_ngraph.interpreter_element_types())
    assert names == {"boolean", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
                     "u64"}
    # ... and the storage-only f16 and bf16 (Convert and data movement; test_low_precision).
    storage = [d for d in SUPPORTED_DTYPES if np.dtype(d).name in ("float16", "bfloat16")]
    assert len(names) + len(storage) == len(SUPPORTED_DTYPES)


def test_both_backends_are_registered_and_unknown_names_list_them():
    assert {"CPU", "INTERPRETER"} <= set(ng.backends())
    with pytest.raises(ValueError, match=r"unknown backend 'CPU2' \(registered: .*INTERPRETER"):
        ng.runtime("CPU2")


@pytest.mark.parametrize("op", sorted(OP_FUNCTIONS))
def test_python_function_exists_and_is_exported(op):
    name = OP_FUNCTIONS[op]
    fn = getattr(ng, name, None)
    assert callable(fn), f"ng.{name} (for {op}) is missing"
    assert name in ng.__all__


@pytest.mark.parametrize("op", sorted(OP_FUNCTIONS))
def test_python_function_is_exercised_by_test_ops(op):
    here = pathlib.Path(__file__).parent
    if op in COLLECTIVES:
        files = sorted((here / "distributed").glob("mpi_test_*.py"))
        files.append(here / "test_distributed_local.py")
    elif op in OWN_TEST_FILES:
        files = [here / OWN_TEST_FILES[op]]
    else:
        files = [TEST_OPS]
    source = "".join(f.read_text() for f in files if f.exists())
    name = OP_FUNCTIONS[op]
    assert re.search(rf"\bng\.{name}\b", source), (
        f"{', '.join(f.name for f in files)} never use ng.{name} ({op})")


def _p(shape, dtype=np.float32):
    return ng.parameter(shape, dtype=dtype)


def _gradient_node(fn, shape):
    x = _p(shape)
    return ng.gradients(fn(x), x)


# One small graph per op, built through its Python function: the node it returns is of that
# op, so OP_FUNCTIONS maps each name to the function that really builds it.
BUILDERS = {
    "Abs": lambda: ng.absolute(_p([2])),
    "Add": lambda: ng.add(_p([2]), _p([2])),
    "ArgMax": lambda: ng.argmax(_p([2, 3]), 1),
    "ArgMin": lambda: ng.argmin(_p([2, 3]), 1),
    "Broadcast": lambda: ng.broadcast(_p([3]), [2, 3], {0}),
    "Ceiling": lambda: ng.ceiling(_p([2])),
    "Concat": lambda: ng.concat([_p([2]), _p([3])], 0),
    "Convert": lambda: ng.convert(_p([2]), np.int32),
    "Cos": lambda: ng.cos(_p([2])),
    "Divide": lambda: ng.divide(_p([2]), _p([2])),
    "Convolution": lambda: ng.convolution(_p([1, 2, 5, 5]), _p([3, 2, 3, 3])),
    "ConvolutionBackpropData": lambda: ng.convolution_backprop_data(
        [1, 2, 5, 5], _p([3, 2, 3, 3]), _p([1, 3, 3, 3])),
    "ConvolutionBackpropFilters": lambda: ng.convolution_backprop_filters(
        _p([1, 2, 5, 5]), [3, 2, 3, 3], _p([1, 3, 3, 3])),
    "Dot": lambda: ng.dot(_p([2, 3]), _p([3])),
    "Equal": lambda: ng.equal(_p([2]), _p([2])),
    "Exp": lambda: ng.exp(_p([2])),
    "Floor": lambda: ng.floor(_p([2])),
    "Greater": lambda: ng.greater(_p([2]), _p([2])),
    "GreaterEq": lambda: ng.greater_eq(_p([2]), _p([2])),
    "Less": lambda: ng.less(_p([2]), _p([2])),
    "LessEq": lambda: ng.less_eq(_p([2]), _p([2])),
    "Log": lambda: ng.log(_p([2])),
    "LogicalAnd": lambda: ng.logical_and(_p([2], bool), _p([2], bool)),
    "LogicalNot": lambda: ng.logical_not(_p([2], bool)),
    "LogicalOr": lambda: ng.logical_or(_p([2], bool), _p([2], bool)),
    "MatMul": lambda: ng.matmul(_p([2, 3]), _p([3, 4])),
    "Max": lambda: ng.max(_p([2, 3]), 1),
    "Maximum": lambda: ng.maximum(_p([2]), _p([2])),
    "Min": lambda: ng.min(_p([2, 3]), 1),
    "Minimum": lambda: ng.minimum(_p([2]), _p([2])),
    "Multiply": lambda: ng.multiply(_p([2]), _p([2])),
    "Negative": lambda: ng.negative(_p([2])),
    "NotEqual": lambda: ng.not_equal(_p([2]), _p([2])),
    "OneHot": lambda: ng.one_hot(_p([3], np.int32), [3, 4], 1),
    "Pad": lambda: ng.pad(_p([2]), 0, [1], [1]),
    "Power": lambda: ng.power(_p([2]), _p([2])),
    "Product": lambda: ng.prod(_p([2, 3]), 1),
    "Relu": lambda: ng.relu(_p([2])),
    "Reshape": lambda: ng.reshape(_p([2, 3]), [3, 2], [1, 0]),
    "Reverse": lambda: ng.reverse(_p([2]), 0),
    "Select": lambda: ng.select(_p([2], bool), _p([2]), _p([2])),
    "Sigmoid": lambda: ng.sigmoid(_p([2])),
    "Erf": lambda: ng.erf(_p([2])),
    "Gelu": lambda: ng.gelu(_p([2])),
    "Sign": lambda: ng.sign(_p([2])),
    "Sin": lambda: ng.sin(_p([2])),
    "Slice": lambda: ng.slice(_p([4]), [1], [3]),
    "Softmax": lambda: ng.softmax(_p([2, 3]), 1),
    "Sqrt": lambda: ng.sqrt(_p([2])),
    "Subtract": lambda: ng.subtract(_p([2]), _p([2])),
    "Sum": lambda: ng.sum(_p([2, 3]), 1),
    "Tanh": lambda: ng.tanh(_p([2])),
    "Tan": lambda: ng.tan(_p([2])),
    "Asin": lambda: ng.asin(_p([2])),
    "Acos": lambda: ng.acos(_p([2])),
    "Atan": lambda: ng.atan(_p([2])),
    "Sinh": lambda: ng.sinh(_p([2])),
    "Cosh": lambda: ng.cosh(_p([2])),
    "TopK": lambda: ng.topk(_p([2, 3]), 2),
    "Variable": lambda: ng.variable(np.zeros(2, np.float32)),
    "StopGradient": lambda: ng.stop_gradient(_p([2])),
    "Gather": lambda: ng.gather(_p([3, 2]), [0, 2]),
    "EmbeddingLookup": lambda: ng.embedding_lookup([0, 2], _p([3, 2])),
    "ScatterAdd": lambda: ng.scatter_add(_p([3, 2]), [0, 0], _p([2, 2])),
    "LayerNorm": lambda: ng.layer_norm(_p([2, 3])),
    "LayerNormBackprop": lambda: _gradient_node(lambda x: ng.layer_norm(x)[0] * 2.0, [2, 3]),
    "Dropout": lambda: ng.dropout(_p([2, 3]), 0.5).inputs()[0],
    "ReplaceSlice": lambda: ng.replace_slice(_p([4]), _p([2]), [1], [3]),
    "Split": lambda: ng.split(_p([4]), 0, 2)[0].inputs()[0],
    "Tile": lambda: ng.tile(_p([2]), [3]),
    "GetOutputElement": lambda: ng.get_output_element(_batch_norm(), 1),
    "BatchNormTraining": lambda: _batch_norm(),
    "BatchNormInference": lambda: ng.batch_norm(1e-5, _p([3]), _p([3]), _p([2, 3]), _p([3]),
                                                _p([3])),
    "BatchNormTrainingBackprop": lambda: _batch_norm_backprop(),
    "MaxPool": lambda: ng.max_pool(_p([1, 2, 4, 4]), [2, 2]),
    "AvgPool": lambda: ng.avg_pool(_p([1, 2, 4]), [2]),
    "LRN": lambda: ng.lrn(_p([1, 3, 2])),
    "MaxPoolBackprop": lambda: _gradient_node(lambda x: ng.max_pool(x, [2, 2]), [1, 2, 4, 4]),
    "AvgPoolBackprop": lambda: _gradient_node(lambda x: ng.avg_pool(x, [2]), [1, 2, 4]),
    "LRNBackprop": lambda: _gradient_node(ng.lrn, [1, 3, 2]),
    # With one rank (no launcher) every collective builds on the local communicator; Send and
    # Recv need a peer, so they are built on a two-rank run only.
    "AllReduce": lambda: ng.allreduce(_p([2])),
    "BroadcastDistributed": lambda: ng.broadcast_distributed(_p([2])),
    "AllGather": lambda: ng.allgather(_p([2])),
    "ReduceScatter": lambda: ng.reduce_scatter(_p([2])),
}


def _batch_norm():
    return ng.batch_norm(1e-5, _p([3]), _p([3]), _p([2, 3]))


def _batch_norm_backprop():
    x = _p([2, 3])
    (dx,) = ng.gradients(ng.sum(ng.batch_norm(1e-5, _p([3]), _p([3]), x)[0] * 2.0), [x])
    return dx.inputs()[0]  # dx is output 0 of the backprop node


def _assign_node():
    v = ng.variable(np.zeros(2, np.float32))
    p = _p([2])
    comp = ng.runtime(backend_name="CPU").computation(p, p, updates=[(v, v + p)])
    return next(n for n in comp.function.get_ordered_ops() if n.get_type_name() == "Assign")


BUILDERS["Assign"] = _assign_node


@pytest.mark.parametrize("op", sorted(OP_FUNCTIONS))
def test_python_function_builds_its_op(op):
    if op in ("Send", "Recv") and ng.distributed.size() == 1:
        pytest.skip("Send/Recv need a peer rank (built in distributed/mpi_test_*.py)")
    assert op in BUILDERS, f"add a builder for {op}"
    node = BUILDERS[op]()
    assert node.get_type_name() == op


# --------------------------------------------------------------- kernels for every type
# For every element type, each op below is built on parameters of that type; where the op's
# type rule admits the type, the CPU backend must compile and run it (a missing kernel for a
# type fails here, naming the op and the type). Values are compared with NumPy elsewhere
# (compat/test_compat_types.py); this only proves a kernel exists.
TYPED_BUILDERS = {
    "Negative": lambda p: ng.negative(p), "Abs": lambda p: ng.absolute(p),
    "Sign": lambda p: ng.sign(p), "Floor": lambda p: ng.floor(p),
    "Ceiling": lambda p: ng.ceiling(p), "Relu": lambda p: ng.relu(p),
    "Exp": lambda p: ng.exp(p), "Log": lambda p: ng.log(p), "Sqrt": lambda p: ng.sqrt(p),
    "Sin": lambda p: ng.sin(p), "Cos": lambda p: ng.cos(p), "Tan": lambda p: ng.tan(p),
    "Asin": lambda p: ng.asin(p), "Acos": lambda p: ng.acos(p), "Atan": lambda p: ng.atan(p),
    "Sinh": lambda p: ng.sinh(p), "Cosh": lambda p: ng.cosh(p), "Tanh": lambda p: ng.tanh(p),
    "Sigmoid": lambda p: ng.sigmoid(p), "Erf": lambda p: ng.erf(p), "Gelu": lambda p: ng.gelu(p),
    "LogicalNot": lambda p: ng.logical_not(p),
    "Add": lambda p: p + p, "Subtract": lambda p: p - p, "Multiply": lambda p: p * p,
    "Divide": lambda p: ng.divide(p, ng.maximum(p, ng.constant(1, p.dtype))),
    "Power": lambda p: ng.power(p, p), "Maximum": lambda p: ng.maximum(p, p),
    "Minimum": lambda p: ng.minimum(p, p), "Equal": lambda p: ng.equal(p, p),
    "NotEqual": lambda p: ng.not_equal(p, p), "Greater": lambda p: ng.greater(p, p),
    "GreaterEq": lambda p: ng.greater_eq(p, p), "Less": lambda p: ng.less(p, p),
    "LessEq": lambda p: ng.less_eq(p, p), "LogicalAnd": lambda p: ng.logical_and(p, p),
    "LogicalOr": lambda p: ng.logical_or(p, p),
    "Select": lambda p: ng.select(ng.constant([True, False, True]), p, p),
    "Convert": lambda p: ng.convert(p, np.float64),
    "ConvertTo": lambda p: ng.convert(ng.convert(p, np.float64), p.dtype),
    "Sum": lambda p: ng.sum(p), "Product": lambda p: ng.prod(p), "Max": lambda p: ng.max(p),
    "Min": lambda p: ng.min(p), "ArgMax": lambda p: ng.argmax(p), "ArgMin": lambda p: ng.argmin(p),
    "TopK": lambda p: ng.topk(p, 2)[1], "Softmax": lambda p: ng.softmax(p, 0),
    "Dot": lambda p: ng.dot(p, p), "MatMul": lambda p: ng.matmul(ng.reshape(p, [1, 3]), p),
    "Broadcast": lambda p: ng.broadcast(p, [2, 3], {0}), "Reshape": lambda p: ng.reshape(p, [3, 1]),
    "Slice": lambda p: ng.slice(p, [1], [3]), "Concat": lambda p: ng.concat([p, p], 0),
    "Pad": lambda p: ng.pad(p, ng.constant(0, p.dtype), [1], [2]),
    "Reverse": lambda p: ng.reverse(p, 0), "OneHot": lambda p: ng.one_hot(
        ng.convert(ng.constant([0, 1, 2]), p.dtype), [3, 3], 1),
    "StopGradient": lambda p: ng.stop_gradient(p),
    "Gather": lambda p: ng.gather(p, [2, 0]),
    "EmbeddingLookup": lambda p: ng.embedding_lookup([1, 1], ng.reshape(p, [3, 1])),
    "ScatterAdd": lambda p: ng.scatter_add(p, [0, 0, 2], p),
    "LayerNorm": lambda p: ng.layer_norm(p)[0],
    "LayerNormBackprop": lambda p: ng.gradients(ng.sum(ng.layer_norm(p)[0] * p), p),
    "Dropout": lambda p: ng.dropout(p, 0.5, seed=0),
    "ReplaceSlice": lambda p: ng.replace_slice(p, ng.slice(p, [0], [1]), [2], [3]),
    "Split": lambda p: ng.split(p, 0, [1, 2])[1],
    "Tile": lambda p: ng.tile(p, [2]),
}
ALL_DTYPES = [np.bool_, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.float16] + (
    [ng.utils.bfloat16] if ng.utils.bfloat16 is not None else [])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(TYPED_BUILDERS))
def test_every_admitted_element_type_has_a_kernel(op, dtype):
    p = ng.parameter([3], dtype)
    try:
        node = TYPED_BUILDERS[op](p)
    except ng.NgraphTypeError as e:  # the op's type rule refuses this type: nothing to run
        assert "type" in str(e), e
        return
    (out,) = ng.runtime().computation(node, p)(np.ones(3, dtype))
    assert out.dtype == node.dtype


# Ops whose kernels are type-checked elsewhere (float-only by their type rule, built by other
# ops, or collectives and graph leaves).
NOT_TYPED = {
    "Parameter", "Constant", "Result", "Variable", "Assign", "GetOutputElement",
    "Convolution", "ConvolutionBackpropData", "ConvolutionBackpropFilters", "MaxPool",
    "AvgPool", "MaxPoolBackprop", "AvgPoolBackprop", "LRN", "LRNBackprop", "BatchNormTraining",
    "BatchNormInference", "BatchNormTrainingBackprop", *COLLECTIVES,
}


def test_every_op_is_in_the_kernel_type_test():
    ops = set(_ngraph.op_names()) - NOT_TYPED
    missing = sorted(ops - set(TYPED_BUILDERS))
    assert not missing, f"add these ops to TYPED_BUILDERS (or NOT_TYPED): {missing}"


def test_every_element_type_is_in_the_kernel_type_test():
    names = {np.dtype(d).name for d in ALL_DTYPES}
    assert names == {np.dtype(d).name for d in ng.utils.SUPPORTED_DTYPES}
