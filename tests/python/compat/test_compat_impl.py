"""nGraph's low-level API (``ngraph.impl``), used as nGraph's own tests used it: value classes,
op classes constructed positionally, functions run through a backend with tensors, and
``ng.runtime()`` computations returning lists."""

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph
from ngraph.impl import (
    AxisSet,
    AxisVector,
    Coordinate,
    CoordinateDiff,
    Function,
    Node,
    NodeVector,
    ParameterVector,
    Shape,
    Strides,
    Type,
    util,
)
from ngraph.impl import op as impl_op
from ngraph.impl.op import (
    LRN,
    Abs,
    Add,
    And,
    ArgMax,
    AvgPool,
    BatchMatMul,
    BatchMatMulTranspose,
    BatchNormInference,
    BatchNormTraining,
    Broadcast,
    Concat,
    Constant,
    Convert,
    Convolution,
    ConvolutionBackpropData,
    ConvolutionBackpropFilters,
    Divide,
    Dot,
    GetOutputElement,
    MatMul,
    Max,
    MaxPool,
    Multiply,
    Not,
    OneHot,
    Or,
    Pad,
    Parameter,
    ReplaceSlice,
    Reshape,
    Reverse,
    Select,
    Slice,
    Softmax,
    Subtract,
    Sum,
    TopK,
)
from ngraph.impl.runtime import Backend, Executable, Tensor


def get_runtime():
    return ng.runtime(backend_name="CPU")


def run_function(function, *arrays):
    """Compiles `function` on the backend and calls it with tensors, as pyngraph's tests."""
    backend = Backend.create("CPU")
    inputs = []
    for a in arrays:
        t = backend.create_tensor(Type.from_dtype(a.dtype), Shape(a.shape))
        t.write(util.numpy_to_c(np.ascontiguousarray(a)), a.nbytes)
        inputs.append(t)
    outputs = [backend.create_tensor(Type.from_dtype(r.dtype), Shape(r.shape))
               for r in function.get_results()]
    executable = backend.compile(function)
    assert isinstance(executable, Executable)
    assert executable.call(outputs, inputs)
    results = []
    for t in outputs:
        out = np.zeros(t.get_shape(), t.get_element_type().to_dtype())
        t.read(util.numpy_to_c(out), t.get_size_in_bytes())
        results.append(out)
    return results


# ---------------------------------------------------------------------- value classes


def test_type():
    assert Type.f32 == Type("f32") and Type.f32 != Type.f64
    assert Type.f32.get_type_name() == "f32" and repr(Type.u8) == "<Type: 'u8'>"
    assert [Type.i8.bitwidth, Type.u16.bitwidth, Type.f64.bitwidth, Type.boolean.bitwidth] == \
        [8, 16, 64, 8]
    assert Type.f32.is_real() and not Type.i32.is_real() and Type.u64.is_integral()
    assert Type.i16.is_signed() and not Type.u32.is_signed()
    assert Type.from_dtype(np.uint32) == Type.u32 and Type.boolean.to_dtype() == np.bool_
    with pytest.raises(ng.NgraphTypeError, match="unknown element type 'f8'"):
        Type("f8")


def test_vectors():
    assert Shape([2, 3]) == [2, 3] and repr(Shape([2, 3])) == "<Shape: {2, 3}>"
    assert Strides([1, 2]) == [1, 2] and Coordinate([0, 1]) == [0, 1]
    assert AxisVector([1, 0]) == [1, 0] and CoordinateDiff([-1, 2]) == [-1, 2]
    assert AxisSet({2, 0}) == [0, 2] and AxisSet([1]) == [1]
    assert Shape(np.array([4, 5])) == [4, 5]
    with pytest.raises(ng.UserInputError, match="Shape takes non-negative"):
        Shape([-1])
    with pytest.raises(ng.NgraphTypeError, match="Strides takes integers"):
        Strides([1.5])


def test_node_vectors():
    a, b = Parameter(Type.f32, Shape([2])), Parameter(Type.f32, Shape([2]))
    f = Function(NodeVector([Add(a, b)]), ParameterVector([a, b]), "add")
    out = ng.runtime().computation(f)(np.ones(2, np.float32), np.arange(2, dtype=np.float32))
    np.testing.assert_array_equal(out[0], [1, 2])
    with pytest.raises(ng.NgraphTypeError, match="NodeVector takes nodes; item 1 is a int"):
        NodeVector([a, 3])
    with pytest.raises(ng.NgraphTypeError, match="item 0 is a Add"):
        ParameterVector([Add(a, b)])


def test_node_and_function_are_ngraph_classes():
    assert Node is ng.Node and Function is ng.Function


def test_node_accessors_of_pyngraph():
    A = Parameter(Type.u16, Shape([2, 3]))
    A.name = "A"
    assert A.get_shape() == Shape([2, 3]) and A.get_element_type() == Type.u16
    assert A.get_output_shape(0) == [2, 3] and A.get_output_element_type(0) == Type.u16
    assert A.get_name() == "A" and A.get_friendly_name() == "A"
    top = TopK(Parameter(Type.f32, Shape([4, 5])), 1, Type.i64, 2)
    assert top.get_output_size() == 2
    assert top.get_output_shape(0) == [4, 2] and top.get_output_element_type(0) == Type.f32
    assert top.get_output_shape(1) == [4, 2] and top.get_output_element_type(1) == Type.i64
    with pytest.raises(IndexError, match="has 2 outputs"):
        top.get_output_shape(2)


def test_a_nonexistent_output_is_an_error_not_a_crash():
    """A node on an output its input does not have is refused naming the op, the index and the
    output count (it aborted the process with "pure virtual method called")."""
    x = ng.parameter([2, 3], name="x")
    with pytest.raises(IndexError, match=r"output index 5 is out of range for x \(Parameter\), "
                                         r"which has 1 output$"):
        ng.get_output_element(x, 5)
    y = ng.batch_norm(1e-3, ng.constant(np.ones(3, np.float32)),
                      ng.constant(np.zeros(3, np.float32)), x)
    for bad in (3, -4):
        with pytest.raises(IndexError, match=f"output index {bad} is out of range for .* "
                                             r"\(BatchNormTraining\), which has 3 outputs"):
            ng.get_output_element(y, bad)
        with pytest.raises(IndexError, match="which has 3 outputs"):
            y[bad]
    with pytest.raises(IndexError, match=r"output index 5 is out of range for x"):
        impl_op.GetOutputElement(x, 5)  # nGraph's class
    assert ng.get_output_element(y, -1).shape == [3]


# ------------------------------------------------------------- the nGraph test pattern


@pytest.mark.parametrize("op_str, op, expected", [
    ("+", lambda a, b: a + b, lambda a, b: a + b),
    ("-", lambda a, b: a - b, lambda a, b: a - b),
    ("*", lambda a, b: a * b, lambda a, b: a * b),
    ("/", lambda a, b: a / b, lambda a, b: a / b),
    ("Add", Add, np.add), ("Subtract", Subtract, np.subtract),
    ("Multiply", Multiply, np.multiply), ("Divide", Divide, np.divide),
])
def test_binary_op(op_str, op, expected):
    element_type = Type.f32
    shape = Shape([2, 2])
    A = Parameter(element_type, shape)
    B = Parameter(element_type, shape)
    parameter_list = [A, B]
    function = Function([op(A, B)], parameter_list, "test")
    a_arr = np.array([[1, 6], [7, 4]], dtype=np.float32)
    b_arr = np.array([[5, 2], [3, 8]], dtype=np.float32)
    runtime = get_runtime()
    computation = runtime.computation(function, A, B)
    result = computation(a_arr, b_arr)[0]
    np.testing.assert_allclose(result, expected(a_arr, b_arr), rtol=1e-6)
    (through_tensors,) = run_function(function, a_arr, b_arr)
    np.testing.assert_allclose(through_tensors, expected(a_arr, b_arr), rtol=1e-6)


def test_computation_returns_a_list_for_one_node():
    x = ng.parameter([2, 3], name="x")
    out = get_runtime().computation(x + 1, x)(np.zeros((2, 3), np.float32))
    assert isinstance(out, list) and len(out) == 1
    np.testing.assert_array_equal(out[0], np.ones((2, 3)))
    # [0] is the first result, not the first row.
    assert out[0].shape == (2, 3)


def test_tensor_write_read_offsets_and_errors():
    backend = Backend.create("CPU")
    t = backend.create_tensor(Type.i16, Shape([4]))
    assert isinstance(t, Tensor) and t.get_size_in_bytes() == 8 and t.get_element_count() == 4
    t.write(util.numpy_to_c(np.array([1, 2, 3, 4], np.int16)), 8)
    t.write(util.numpy_to_c(np.array([9], np.int16)), 4, 2)  # nGraph's (pointer, offset, size)
    out = np.zeros(4, np.int16)
    t.read(util.numpy_to_c(out), 8)
    np.testing.assert_array_equal(out, [1, 2, 9, 4])
    with pytest.raises(ng.UserInputError, match="outside the tensor"):
        t.write(util.numpy_to_c(np.zeros(8, np.int16)), 16)
    with pytest.raises(ng.NgraphTypeError, match="numpy_to_c"):
        t.write(np.zeros(4, np.int16), 8)
    with pytest.raises(ng.NgraphTypeError, match="C-contiguous"):
        util.numpy_to_c(np.zeros((4, 4))[:, 0])
    assert "CPU" in Backend.get_registered_devices()


def test_executable_call_checks_its_tensors():
    A = Parameter(Type.f32, Shape([2]))
    exe = Backend.create("CPU").compile(Function([Abs(A)], [A], "abs"))
    good = Tensor(Type.f32, Shape([2]))
    with pytest.raises(ng.UserInputError, match=r"inputs\[0\] is f64\[2\]"):
        exe.call([good], [Tensor(Type.f64, Shape([2]))])
    with pytest.raises(ng.UserInputError, match="1 inputs expected, got 0"):
        exe.call([good], [])
    with pytest.raises(ng.NgraphTypeError, match="takes a Function"):
        Backend.create("CPU").compile(Abs(A))


# ------------------------------------------------------------- op classes, positionally


def run_node(node, params, *arrays):
    return get_runtime().computation(Function([node], list(params), "t"))(*arrays)[0]


def test_every_core_op_has_a_class():
    for name in _ngraph.op_names():
        cls = getattr(impl_op, name)
        assert cls.op_type == name and name in impl_op.__all__
    assert {"And", "Or", "Not"} <= set(impl_op.__all__)


def test_isinstance_checks_the_op():
    A = Parameter(Type.f32, Shape([2]))
    assert isinstance(A, Parameter) and isinstance(A, Node) and not isinstance(A, Add)
    assert isinstance(Add(A, A), Add)


def test_constant_and_get_data():
    c = Constant(Type.i8, Shape([2, 2]), [1, -2, 3, -4])
    assert isinstance(c, Constant) and c.dtype == np.int8
    np.testing.assert_array_equal(c.get_data(), [[1, -2], [3, -4]])
    np.testing.assert_array_equal(Constant(Type.f32, Shape([3]), [1.5]).get_data(), [1.5] * 3)
    with pytest.raises(ng.UserInputError, match=r"\[Constant\] got 3 values for shape \[2\]"):
        Constant(Type.f32, Shape([2]), [1, 2, 3])
    with pytest.raises(ng.NgraphTypeError, match="is not a Constant"):
        Parameter(Type.f32, Shape([2])).get_data()


def test_shape_ops_positionally():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    A = Parameter(Type.f32, Shape([2, 3]))
    np.testing.assert_array_equal(run_node(Reshape(A, AxisVector([1, 0]), Shape([3, 2])), [A], x),
                                  x.T)
    np.testing.assert_array_equal(
        run_node(Slice(A, Coordinate([0, 1]), Coordinate([2, 3]), Strides([1, 2])), [A], x),
        x[:, 1:3:2])
    np.testing.assert_array_equal(run_node(Slice(A, Coordinate([1, 0]), Coordinate([2, 2])),
                                           [A], x), x[1:2, 0:2])
    np.testing.assert_array_equal(
        run_node(Broadcast(A, Shape([4, 2, 3]), AxisSet({0})), [A], x),
        np.broadcast_to(x, (4, 2, 3)))
    np.testing.assert_array_equal(run_node(Concat([A, A], 1), [A], x), np.concatenate([x, x], 1))
    np.testing.assert_array_equal(run_node(Reverse(A, AxisSet({1})), [A], x), x[:, ::-1])
    np.testing.assert_array_equal(run_node(Sum(A, AxisSet({0})), [A], x), x.sum(0))
    np.testing.assert_array_equal(run_node(Max(A, AxisSet({1})), [A], x), x.max(1))
    np.testing.assert_array_equal(run_node(ArgMax(A, 1, Type.i64), [A], x), x.argmax(1))
    np.testing.assert_allclose(run_node(Softmax(A, AxisSet({1})), [A], x),
                               np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-6)
    v = Constant(Type.f32, Shape([]), [7])
    np.testing.assert_array_equal(
        run_node(Pad(A, v, CoordinateDiff([1, 0]), CoordinateDiff([0, 1]), Shape([0, 0])), [A], x),
        np.pad(x, [(1, 0), (0, 1)], constant_values=7))
    with pytest.raises(ng.UserInputError, match=r"\[Pad\] interior padding"):
        Pad(A, v, CoordinateDiff([0, 0]), CoordinateDiff([0, 0]), Shape([1, 0]))
    np.testing.assert_array_equal(run_node(Convert(A, Type.u8), [A], x), x.astype(np.uint8))
    i = Parameter(Type.i32, Shape([3]))
    np.testing.assert_array_equal(run_node(OneHot(i, Shape([3, 4]), 1), [i],
                                           np.array([0, 3, 1], np.int32)), np.eye(4)[[0, 3, 1]])


def test_logical_aliases_and_select():
    P, Q = Parameter(Type.boolean, Shape([4])), Parameter(Type.boolean, Shape([4]))
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    f = Function([And(P, Q), Or(P, Q), Not(P)], [P, Q], "logic")
    a, o, n = get_runtime().computation(f)(p, q)
    np.testing.assert_array_equal(a, p & q)
    np.testing.assert_array_equal(o, p | q)
    np.testing.assert_array_equal(n, ~p)
    X = Parameter(Type.f32, Shape([4]))
    xs = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run_node(Select(P, X, Abs(X)), [P, X], p, xs), xs)


def test_contractions():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    A, B = Parameter(Type.f32, Shape([2, 3])), Parameter(Type.f32, Shape([3, 4]))
    np.testing.assert_allclose(run_node(Dot(A, B), [A, B], a, b), a @ b)
    np.testing.assert_allclose(run_node(Dot(A, A, 2), [A], a), (a * a).sum())
    np.testing.assert_allclose(run_node(MatMul(A, A, False, True), [A], a), a @ a.T)
    # nGraph's BatchMatMul and BatchMatMulTranspose of 3-D arguments: MatMul over axis 0.
    c = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    C = Parameter(Type.f32, Shape([2, 3, 4]))
    np.testing.assert_allclose(run_node(BatchMatMulTranspose(C, C, False, True), [C], c),
                               c @ c.transpose(0, 2, 1))
    node = BatchMatMul(C, BatchMatMulTranspose(C, C, True, False))
    assert isinstance(node, BatchMatMul) and node.get_type_name() == "MatMul"
    np.testing.assert_allclose(run_node(node, [C], c), c @ (c.transpose(0, 2, 1) @ c))


def _conv(x, w):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for i in range(h - kh + 1):
        for j in range(wd - kw + 1):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return out


def test_convolution_family_positionally():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    X, W = Parameter(Type.f32, Shape([1, 2, 5, 5])), Parameter(Type.f32, Shape([3, 2, 3, 3]))
    conv = Convolution(X, W, Strides([1, 1]), Strides([1, 1]), CoordinateDiff([0, 0]),
                       CoordinateDiff([0, 0]))
    np.testing.assert_allclose(run_node(conv, [X, W], x, w), _conv(x, w), rtol=1e-4, atol=1e-5)
    D = Parameter(Type.f32, Shape([1, 3, 3, 3]))
    bd = ConvolutionBackpropData(Shape([1, 2, 5, 5]), W, D, Strides([1, 1]), Strides([1, 1]),
                                 CoordinateDiff([0, 0]), CoordinateDiff([0, 0]), Strides([1, 1]))
    bf = ConvolutionBackpropFilters(X, Shape([3, 2, 3, 3]), D, Strides([1, 1]), Strides([1, 1]),
                                    CoordinateDiff([0, 0]), CoordinateDiff([0, 0]), Strides([1, 1]))
    assert bd.shape == [1, 2, 5, 5] and bf.shape == [3, 2, 3, 3]
    # Their values are the gradients of the convolution.
    d = rng.standard_normal((1, 3, 3, 3)).astype(np.float32)
    gx, gw = ng.gradients(ng.sum(conv * ng.constant(d)), [X, W])
    want = get_runtime().computation([gx, gw], X, W)(x, w)
    got = get_runtime().computation([bd, bf], W, D, X)(w, d, x)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_pooling_lrn_batch_norm_positionally():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    X = Parameter(Type.f32, Shape([1, 2, 4, 4]))
    mp = MaxPool(X, Shape([2, 2]), Strides([2, 2]), Shape([0, 0]), Shape([0, 0]))
    np.testing.assert_allclose(run_node(mp, [X], x), x.reshape(1, 2, 2, 2, 2, 2).max((3, 5)))
    ap = AvgPool(X, Shape([2, 2]), Strides([2, 2]), Shape([0, 0]), Shape([0, 0]), False)
    np.testing.assert_allclose(run_node(ap, [X], x), x.reshape(1, 2, 2, 2, 2, 2).mean((3, 5)),
                               rtol=1e-6)
    lrn = LRN(X, 1.0, 0.5, 1.0, 1)
    np.testing.assert_allclose(run_node(lrn, [X], x), x / np.sqrt(1 + x * x), rtol=1e-5)
    gamma, beta = ng.constant(np.ones(2, np.float32)), ng.constant(np.zeros(2, np.float32))
    bn = BatchNormTraining(X, gamma, beta, 1e-5)
    y = GetOutputElement(bn, 0)
    mean = x.mean((0, 2, 3), keepdims=True)
    var = x.var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(run_node(y, [X], x), (x - mean) / np.sqrt(var + 1e-5),
                               rtol=1e-4, atol=1e-5)
    inf = BatchNormInference(X, gamma, beta, ng.constant(mean.ravel()), ng.constant(var.ravel()),
                             1e-5)
    np.testing.assert_allclose(run_node(inf, [X], x), (x - mean) / np.sqrt(var + 1e-5),
                               rtol=1e-4, atol=1e-5)


def test_topk_class_follows_ngraph_argument_order():
    x = np.array([[3, 1, 2], [0, 5, 4]], np.float32)
    X = Parameter(Type.f32, Shape([2, 3]))
    node = TopK(X, 1, Type.i32, 2, True)
    values, indices = get_runtime().computation([node[0], node[1]], X)(x)
    np.testing.assert_array_equal(values, [[3, 2], [5, 4]])
    np.testing.assert_array_equal(indices, [[0, 2], [1, 2]])


def test_op_class_argument_errors():
    A = Parameter(Type.f32, Shape([2]))
    with pytest.raises(ng.NgraphTypeError, match=r"\[Reshape\] takes at most 3"):
        Reshape(A, [0], [2], 4)
    with pytest.raises(ng.UserInputError, match=r"\[Add\]"):
        Add(A, Parameter(Type.f32, Shape([3])))
    with pytest.raises(ng.NgraphTypeError, match=r"\[Add\] element types"):
        Add(A, Parameter(Type.f64, Shape([2])))
    with pytest.raises(ng.UserInputError, match=r"unknown attribute 'nope'"):
        Abs(A, nope=1)


def test_replace_slice_as_ngraphs_test_ops_uses_it():
    """nGraph v0.26's test/test_ops.py::test_replace_slice, step by step: ReplaceSlice(A, B,
    lower, upper[, strides]) built from impl classes, one tensor written per input, the result
    read into an array."""
    for backend_name in ("CPU", "INTERPRETER"):
        A, B = Parameter(Type.f32, Shape([6, 4])), Parameter(Type.f32, Shape([3, 2]))
        a, b = np.zeros((6, 4), np.float32), np.ones((3, 2), np.float32)
        backend = Backend.create(backend_name)
        for lower, upper, strides in [([0, 1], [3, 3], None), ([0, 0], [5, 3], [2, 2])]:
            args = [Coordinate(lower), Coordinate(upper)] + ([Strides(strides)] if strides else [])
            function = Function([ReplaceSlice(A, B, *args)], [A, B], "test")
            ta, tb = backend.create_tensor(Type.f32, Shape([6, 4])), backend.create_tensor(
                Type.f32, Shape([3, 2]))
            result = backend.create_tensor(Type.f32, Shape([6, 4]))
            ta.write(util.numpy_to_c(a), 24 * 4)
            tb.write(util.numpy_to_c(b), 6 * 4)
            backend.compile(function).call([result], [ta, tb])
            out = np.zeros((6, 4), np.float32)
            result.read(util.numpy_to_c(out), 24 * 4)
            expected = a.copy()
            steps = strides or [1, 1]
            expected[lower[0]:upper[0]:steps[0], lower[1]:upper[1]:steps[1]] = b
            np.testing.assert_array_equal(out, expected)
