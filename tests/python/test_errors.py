"""Errors: bad graphs are refused when built, with messages naming the op and the shapes;
run-time errors raise and leave the computation usable."""

import concurrent.futures
import multiprocessing
import pickle
import traceback

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph

RUNTIME = ng.runtime(backend_name="CPU")


def P(shape, dtype=np.float32, name=None):
    return ng.parameter(shape, dtype=dtype, name=name)


# -------------------------------------------------------------------------- shapes


def test_dot_mismatch_message_is_exact():
    with pytest.raises(ValueError) as info:
        ng.dot(P([2, 3]), P([4, 5]))
    assert str(info.value) == (
        "[Dot] reduction axis of arg0 shape {2,3} (3) does not match arg1 shape {4,5} (4)"
    )


def test_dot_reduction_count_errors():
    with pytest.raises(ValueError, match=r"\[Dot\] reduction_axes_count \(3\).*\{2,3\}.*\{3\}"):
        ng.dot(P([2, 3]), P([3]), 3)
    with pytest.raises(ValueError, match=r"\[Dot\] reduction_axes_count must be >= 0"):
        ng.dot(P([2, 3]), P([3]), -2)
    with pytest.raises(ValueError, match=r"\[Dot\] reduction axis.*\{2,3,4\}.*\{4,3\}"):
        ng.dot(P([2, 3, 4]), P([4, 3]), 2)


@pytest.mark.parametrize("fn", [ng.add, ng.subtract, ng.multiply, ng.divide, ng.power,
                                ng.maximum, ng.minimum, ng.equal, ng.less],
                         ids=lambda f: f.__name__)
def test_incompatible_broadcast_names_both_shapes(fn):
    with pytest.raises(ValueError) as info:
        fn(P([2, 3]), P([4]))
    message = str(info.value)
    assert message.startswith("[")
    assert "{2,3}" in message and "{4}" in message
    assert "broadcast" in message


def test_incompatible_broadcast_of_operators_and_select():
    with pytest.raises(ValueError, match=r"\[Add\].*\{3,4\}.*\{2,4\}"):
        P([3, 4]) + P([2, 4])
    with pytest.raises(ValueError, match=r"\[Multiply\].*\{5\}.*\{6\}"):
        P([5]) * np.ones(6)
    with pytest.raises(ValueError, match=r"\[Select\].*\{2\}.*\{3\}"):
        ng.select(P([2], np.bool_), P([3]), P([3]))


def test_matmul_mismatch():
    with pytest.raises(ValueError, match=r"\[MatMul\] inner dimension of arg0 shape \{2,3\} "
                                         r"\(3\) does not match arg1 shape \{4,5\} \(4\)"):
        ng.matmul(P([2, 3]), P([4, 5]))
    with pytest.raises(ValueError, match=r"\[MatMul\].*transposed"):
        ng.matmul(P([2, 3]), P([4, 3]), transpose_a=True)
    with pytest.raises(ValueError, match=r"\[MatMul\].*\{2\}.*\{3\}"):
        ng.matmul(P([2, 2, 3]), P([3, 3, 4]))
    with pytest.raises(ValueError, match=r"\[MatMul\].*rank >= 1"):
        ng.matmul(P([]), P([3]))


@pytest.mark.parametrize("build,pattern", [
    (lambda: ng.concat([P([2, 3]), P([3, 3])], 1), r"\[Concat\].*\{3,3\}.*\{2,3\}"),
    (lambda: ng.reshape(P([2, 3]), [4, 2]), r"\[Reshape\].*\{2,3\}.*\{4,2\}"),
    (lambda: ng.reshape(P([2, 3]), [3, 2], [0, 0]), r"\[Reshape\] input_order"),
    (lambda: ng.slice(P([2, 3]), [0, 0], [3, 3]), r"\[Slice\] upper bound 3.*\{2,3\}"),
    (lambda: ng.slice(P([2, 3]), [2, 0], [1, 3]), r"\[Slice\] lower bound 2"),
    (lambda: ng.slice(P([2, 3]), [0, 0], [2, 3], [0, 1]), r"\[Slice\] stride of axis 0"),
    (lambda: ng.slice(P([2, 3]), [0], [2]), r"\[Slice\].*\{2,3\}"),
    (lambda: ng.slice(P([2, 3]), [-1, 0], [2, 3]), r"\[Slice\].*lower_bounds.*negative"),
    (lambda: ng.pad(P([2, 3]), 0, [1], [1]), r"\[Pad\].*\{2,3\}"),
    (lambda: ng.pad(P([2, 3]), 0, [2, 1], [0, 0], pad_mode="reflect"),
     r"\[Pad\] pad_mode 'reflect'.*\{2,3\}"),
    (lambda: ng.pad(P([2, 3]), 0, [-2, 0], [-1, 0]), r"\[Pad\].*negative size"),
    (lambda: ng.pad(P([2, 3]), P([2]), [1, 1], [1, 1]), r"\[Pad\] pad value must be a scalar"),
    (lambda: ng.broadcast(P([3]), [2, 3], {1}), r"\[Broadcast\] arg shape \{3\}.*\{2,3\}"),
    (lambda: ng.broadcast(P([3]), [2, 4]), r"\[Broadcast\].*\{3\}.*\{2,4\}"),
    (lambda: ng.broadcast(P([3]), [2, 3], -1), r"\[Broadcast\]"),
    (lambda: ng.one_hot(P([3], np.int32), [4, 5], 1), r"\[OneHot\] arg shape \{3\}.*\{4,5\}"),
    (lambda: ng.argmax(P([0, 3]), 0), r"\[ArgMax\] axis 0 of arg shape \{0,3\} is empty"),
], ids=["concat", "reshape_size", "reshape_order", "slice_upper", "slice_lower",
        "slice_stride", "slice_rank", "slice_negative", "pad_rank", "pad_reflect", "pad_crop",
        "pad_value", "broadcast_axes", "broadcast_numpy", "broadcast_axis", "one_hot",
        "argmax_empty"])
def test_bad_shapes(build, pattern):
    with pytest.raises(ValueError, match=pattern):
        build()


# ---------------------------------------------------------------------- element types


@pytest.mark.parametrize("build,pattern", [
    (lambda: ng.add(P([2]), P([2], np.int32)), r"\[Add\] element types of arg0 \(f32\) and "
                                              r"arg1 \(i32\) must match"),
    (lambda: P([2]) * P([2], np.float64), r"\[Multiply\].*f32.*f64"),
    (lambda: ng.dot(P([3]), P([3], np.float64)), r"\[Dot\].*f32.*f64"),
    (lambda: ng.matmul(P([3, 3], np.int32), P([3, 3])), r"\[MatMul\].*i32.*f32"),
    (lambda: ng.concat([P([2]), P([2], np.int64)], 0), r"\[Concat\].*i64"),
    (lambda: ng.select(P([2]), P([2]), P([2])), r"\[Select\] arg0.*f32.*boolean"),
    (lambda: ng.select(P([2], bool), P([2]), P([2], np.int32)), r"\[Select\].*f32.*i32"),
    (lambda: ng.logical_and(P([2]), P([2])), r"\[LogicalAnd\].*boolean"),
    (lambda: ng.logical_not(P([2], np.int32)), r"\[LogicalNot\].*boolean"),
    (lambda: ng.exp(P([2], np.int32)), r"\[Exp\].*i32.*floating-point"),
    (lambda: ng.softmax(P([2], np.int64), 0), r"\[Softmax\].*i64"),
    (lambda: ng.negative(P([2], bool)), r"\[Negative\].*boolean.*numeric"),
    (lambda: ng.add(P([2], bool), P([2], bool)), r"\[Add\].*boolean"),
    (lambda: ng.sum(P([2], bool)), r"\[Sum\].*boolean"),
    (lambda: ng.argmax(P([2], bool)), r"\[ArgMax\].*boolean"),
    (lambda: ng.argmax(P([2]), 0, np.float32), r"\[ArgMax\] index_element_type"),
    (lambda: ng.one_hot(P([3], bool), [3, 4], 1), r"\[OneHot\].*boolean"),
    (lambda: ng.pad(P([2]), P([], np.int32), [1], [1]), r"\[Pad\].*i32.*f32"),
    (lambda: P([2], np.int32) + 0.5, r"\[Add\].*0\.5.*int32"),
], ids=["add", "multiply", "dot", "matmul", "concat", "select_cond", "select_values",
        "logical_and", "logical_not", "exp_int", "softmax_int", "negative_bool", "add_bool",
        "sum_bool", "argmax_bool", "argmax_index_type", "one_hot_bool", "pad_value",
        "int_plus_half"])
def test_element_type_mismatch_is_type_error(build, pattern):
    with pytest.raises(TypeError, match=pattern):
        build()


# ------------------------------------------------------------------ attributes and axes


def test_unknown_attribute():
    with pytest.raises(ValueError, match=r"\[Add\] unknown attribute 'foo' \(attributes: "
                                         r"auto_broadcast\)"):
        _ngraph.make_node("Add", [P([2]), P([2])], {"foo": 1})
    with pytest.raises(ValueError, match=r"\[Sum\] unknown attribute 'axes'.*reduction_axes"):
        _ngraph.make_node("Sum", [P([2])], {"axes": [0]})


def test_enum_attributes_by_name():
    # reduce_op and auto_broadcast are enums inside C++: Python names them by string, they
    # print by name, and an unknown name is refused naming the op, the attribute and the value.
    x = P([2, 4])
    v = np.arange(8, dtype=np.float32).reshape(2, 4)
    for op in ("sum", "mean", "max", "min", "prod"):
        ar = ng.allreduce(x, op)
        rs = _ngraph.make_node("ReduceScatter", [x], {"reduce_op": op, "axis": 1})
        assert ar.attributes() == f"reduce_op='{op}', compression='none', error_feedback=false"
        assert rs.attributes() == f"reduce_op='{op}', axis=1"
        for out in RUNTIME.computation([ar, rs], x)(v):  # one rank: identities
            np.testing.assert_array_equal(out, v)
    for mode in ("none", "numpy"):
        add = _ngraph.make_node("Add", [x, x], {"auto_broadcast": mode})
        sel = _ngraph.make_node("Select", [P([2, 4], np.bool_), x, x], {"auto_broadcast": mode})
        assert add.attributes() == f"auto_broadcast='{mode}'"
        assert sel.attributes() == f"auto_broadcast='{mode}'"
    y = P([4])
    add = _ngraph.make_node("Add", [x, y], {"auto_broadcast": "numpy"})
    (out,) = RUNTIME.computation(add, x, y)(v, np.ones(4, np.float32))
    np.testing.assert_array_equal(out, v + 1)

    with pytest.raises(ValueError, match=r"\[AllReduce\] unknown reduce_op 'avg' \(expected sum, "
                                         r"mean, max, min or prod\)"):
        ng.allreduce(x, "avg")
    with pytest.raises(ValueError, match=r"\[ReduceScatter\] unknown reduce_op 'avg'"):
        ng.reduce_scatter(x, "avg")
    with pytest.raises(ValueError, match=r"\[AllReduce\] unknown compression 'int8' \(expected "
                                         r"none, bf16 or fp16\)"):
        _ngraph.make_node("AllReduce", [x], {"reduce_op": "sum", "compression": "int8"})
    with pytest.raises(ValueError, match=r"\[Select\] auto_broadcast must be 'none' or 'numpy', "
                                         r"got 'pytorch'"):
        _ngraph.make_node("Select", [P([2], np.bool_), P([2]), P([2])],
                          {"auto_broadcast": "pytorch"})
    with pytest.raises(TypeError, match=r"\[AllReduce\] attribute 'reduce_op' expects a string"):
        _ngraph.make_node("AllReduce", [x], {"reduce_op": 1})


def test_unknown_op_and_bad_attribute_values():
    with pytest.raises(ValueError, match="unknown op 'Frobnicate'"):
        _ngraph.make_node("Frobnicate", [P([2])], {})
    with pytest.raises(ValueError, match=r"\[Add\] auto_broadcast must be 'none' or 'numpy'"):
        _ngraph.make_node("Add", [P([2]), P([2])], {"auto_broadcast": "pytorch"})
    with pytest.raises(ValueError, match=r"\[Add\] arguments must have the same shape"):
        _ngraph.make_node("Add", [P([2, 1]), P([2])], {"auto_broadcast": "none"})
    with pytest.raises(TypeError, match=r"\[Sum\] attribute 'reduction_axes' expects a list"):
        _ngraph.make_node("Sum", [P([2])], {"reduction_axes": "ab"})
    with pytest.raises(TypeError, match=r"\[Dot\] attribute 'reduction_axes_count' expects an "
                                        r"integer, got 1.5"):
        _ngraph.make_node("Dot", [P([2]), P([2])], {"reduction_axes_count": 1.5})
    with pytest.raises(ValueError, match=r"\[Sum\] reduction_axes \{5\} has axis 5 out of "
                                         r"range for arg shape \{2,3\}"):
        _ngraph.make_node("Sum", [P([2, 3])], {"reduction_axes": [5]})
    with pytest.raises(ValueError, match=r"\[Pad\] pad_mode must be"):
        ng.pad(P([2]), 0, [1], [1], pad_mode="wrap")
    with pytest.raises(ValueError, match=r"\[Pad\] interior padding"):
        ng.pad(P([2]), 0, [1], [1], [1])
    with pytest.raises(ValueError, match=r"\[Constant\] build constants with"):
        _ngraph.make_node("Constant", [], {})


@pytest.mark.parametrize("build,error,pattern", [
    (lambda: ng.sum(P([2, 3]), 5), ValueError, r"\[Sum\] reduction_axes: axis 5 is out of range"),
    (lambda: ng.max(P([2, 3]), [0, -3]), ValueError, r"\[Max\].*axis -3"),
    (lambda: ng.prod(P([2, 3]), [0.5]), TypeError, r"\[Product\] reduction_axes must be a "
                                                   r"sequence of integers"),
    (lambda: ng.min(P([2, 3]), "a"), TypeError, r"\[Min\]"),
    (lambda: ng.concat([P([2, 3]), P([2, 3])], 2), ValueError, r"\[Concat\] axis.*2"),
    (lambda: ng.concat([], 0), ValueError, r"\[Concat\] needs at least one"),
    (lambda: ng.reverse(P([2, 3]), 3), ValueError, r"\[Reverse\].*axis 3"),
    (lambda: ng.softmax(P([2, 3]), -3), ValueError, r"\[Softmax\].*axis -3"),
    (lambda: ng.argmax(P([2, 3]), 2), ValueError, r"\[ArgMax\].*axis 2"),
    (lambda: ng.argmin(P([2, 3]), 1.5), TypeError, r"\[ArgMin\]"),
    (lambda: ng.one_hot(P([3], np.int32), [3, 5], 2), ValueError, r"\[OneHot\].*axis 2"),
    (lambda: ng.reshape(P([2, 3]), [3, 2], [1, -1]), ValueError,
     r"\[Reshape\].*input_order.*negative"),
    (lambda: ng.reshape(P([2, 3]), [-1, 6]), ValueError, r"\[Reshape\].*negative"),
    (lambda: ng.broadcast(P([3]), [2, 3], {5}), ValueError, r"\[Broadcast\].*axis 5"),
    (lambda: ng.broadcast(P([3]), [2, 3], [-1]), ValueError, r"\[Broadcast\].*negative"),
    (lambda: ng.slice(P([2, 3]), [0, 0], [2, 3], [1, -1]), ValueError,
     r"\[Slice\].*strides.*negative"),
    (lambda: ng.slice(P([2, 3]), [0, 0.5], [2, 3]), TypeError, r"\[Slice\] lower_bounds"),
    (lambda: ng.convert(P([2]), np.complex64), TypeError, r"\[Convert\].*complex64"),
    (lambda: ng.convert(P([2]), "banana"), TypeError, r"\[Convert\].*banana"),
], ids=["sum_axis", "max_negative_axis", "prod_float_axis", "min_str_axis", "concat_axis",
        "concat_empty", "reverse_axis", "softmax_axis", "argmax_axis", "argmin_float_axis",
        "one_hot_axis", "reshape_negative_order", "reshape_negative_shape",
        "broadcast_axis_range", "broadcast_negative_axis", "slice_negative_stride",
        "slice_float_bound", "convert_complex64", "convert_name"])
def test_bad_axes_and_attribute_values(build, error, pattern):
    with pytest.raises(error, match=pattern):
        build()


# --------------------------------------------------------------------- leaves


@pytest.mark.parametrize("shape", [[2.5], "ab", 3, [None], [2, "x"], [True]],
                         ids=["float", "str", "int", "none", "str_dim", "bool"])
def test_parameter_with_a_bad_shape(shape):
    with pytest.raises(TypeError, match=r"\[Parameter\] shape"):
        ng.parameter(shape)


def test_parameter_with_a_negative_dimension():
    with pytest.raises(ValueError, match=r"\[Parameter\] shape.*negative.*\[2, -1\]"):
        ng.parameter([2, -1])


@pytest.mark.parametrize("dtype", [np.complex64, object, "complex128", "banana", "float128",
                                   np.datetime64],
                         ids=str)
def test_parameter_with_an_unsupported_dtype(dtype):
    with pytest.raises(TypeError, match=r"\[Parameter\] dtype"):
        ng.parameter([2], dtype=dtype)


@pytest.mark.parametrize("value", [np.array([1, 2], np.complex64), np.complex64(1.5), "abc", None,
                                   1j, [1, None], object()],
                         ids=["complex64_array", "complex64", "str", "none", "complex", "list_none",
                              "object"])
def test_constant_with_an_unsupported_value(value):
    with pytest.raises(TypeError, match=r"\[Constant\]"):
        ng.constant(value)


@pytest.mark.parametrize("value", [None, "x", 1j, object()],
                         ids=["none", "str", "complex", "object"])
def test_operand_that_is_not_a_number(value):
    p = P([2])
    with pytest.raises(TypeError, match=r"\[Constant\]"):
        ng.add(p, value)
    with pytest.raises(TypeError, match=r"\[Constant\]"):
        p * value


# --------------------------------------------------------------------------- run time


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_division_by_zero_raises_and_computation_stays_usable(dtype):
    a = P([4], dtype, name="a")
    b = P([4], dtype, name="b")
    comp = RUNTIME.computation(ng.divide(a, b), a, b)
    x = np.array([7, -7, 8, 9], dtype=dtype)
    with pytest.raises(ValueError, match=r"\[Divide\] integer division by zero"):
        comp(x, np.array([2, 0, 3, 1], dtype=dtype))
    np.testing.assert_array_equal(comp(x, np.array([2, 2, -3, 1], dtype=dtype))[0], [3, -4, -3, 9])
    with pytest.raises(ValueError, match="division by zero"):
        comp(x, np.zeros(4, dtype=dtype))
    np.testing.assert_array_equal(comp(x, np.ones(4, dtype=dtype))[0], x)


def test_integer_division_by_zero_in_a_larger_graph():
    a = P([3], np.int32, name="a")
    b = P([3], np.int32, name="b")
    comp = RUNTIME.computation([a + b, (a * 2) / b, a - b], a, b)
    x = np.array([4, 5, 6], np.int32)
    with pytest.raises(ValueError, match="division by zero"):
        comp(x, np.array([1, 0, 1], np.int32))
    out = comp(x, np.array([1, 2, 4], np.int32))
    np.testing.assert_array_equal(out[0], [5, 7, 10])
    np.testing.assert_array_equal(out[1], [8, 5, 3])
    np.testing.assert_array_equal(out[2], [3, 3, 2])


def test_float_division_by_zero_is_not_an_error():
    a = P([3], np.float64, name="a")
    b = P([3], np.float64, name="b")
    out = RUNTIME.computation(a / b, a, b)(np.array([1.0, -1.0, 0.0]), np.zeros(3))[0]
    np.testing.assert_array_equal(out[:2], [np.inf, -np.inf])
    assert np.isnan(out[2])


@pytest.mark.parametrize("dtype,bad", [(np.int32, 4), (np.int32, -1), (np.int64, 100),
                                       (np.float32, 1.5), (np.float32, 5.0),
                                       (np.float64, -1.0)],
                         ids=["i32_depth", "i32_negative", "i64_large", "f32_fraction",
                              "f32_depth", "f64_negative"])
def test_one_hot_out_of_range_raises_at_run_time(dtype, bad):
    p = P([3], dtype, name="labels")
    comp = RUNTIME.computation(ng.one_hot(p, [3, 4], 1), p)
    with pytest.raises(IndexError, match=r"\[OneHot\] value .* is not an integer in \[0, 4\)"):
        comp(np.array([0, bad, 2], dtype=dtype))
    np.testing.assert_array_equal(comp(np.array([3, 0, 1], dtype=dtype))[0], np.eye(4)[[3, 0, 1]])


def test_errors_in_one_thread_do_not_break_another_computation():
    a = P([2], np.int32, name="a")
    bad = RUNTIME.computation(a / a, a)
    good = RUNTIME.computation(a * 2, a)
    for _ in range(3):
        with pytest.raises(ValueError):
            bad(np.array([1, 0], np.int32))
        np.testing.assert_array_equal(good(np.array([1, 0], np.int32))[0], [2, 0])
    np.testing.assert_array_equal(bad(np.array([3, 4], np.int32))[0], [1, 1])


@pytest.mark.parametrize("shape", [[2**31, 2**31], [2**32, 2**32], [2**62, 4], [2**40, 2**40]])
def test_sizes_that_overflow_are_refused_when_the_graph_is_built(shape):
    """An element count or byte size beyond 64 bits is an error naming the op and the shape
    where the node is made (it used to compile to a 128-byte buffer and crash, or return 0)."""
    s = ng.parameter([], np.float32)
    with pytest.raises(ValueError, match=r"\[Broadcast\].*more bytes than fit in 64 bits"):
        ng.sum(ng.broadcast(s, shape) * 2)
    with pytest.raises(ValueError, match=r"\[Parameter\].*more bytes than fit in 64 bits"):
        ng.parameter(shape, np.float32)


# ------------------------------------------------------------- public exception names

PUBLIC_EXCEPTIONS = ["NgraphError", "UserInputError", "NgraphTypeError", "CheckpointError",
                     "DatasetError", "NoGradientError", "SerializationError", "DistributedError"]


@pytest.mark.parametrize("name", PUBLIC_EXCEPTIONS)
def test_exceptions_have_public_names_and_pickle(name):
    """Every exception prints, is caught and pickles as ngraph.exceptions.<Name> (also
    ngraph.<Name>), never as the extension module ngraph._ngraph."""
    cls = getattr(ng.exceptions, name)
    assert getattr(ng, name) is cls
    assert f"{cls.__module__}.{cls.__qualname__}" == f"ngraph.exceptions.{name}"
    e = cls("what went wrong")
    assert repr(e) == f"{name}('what went wrong')"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and back.args == ("what went wrong",)


def _raise_no_gradient():
    x = ng.parameter([2], np.float32, name="x")
    ng.gradients(ng.argmax(x, 0, np.int64), [x])


def _raise_serialization():
    ng.deserialize("{not json")


def _raise_in_worker(which):
    """Raised in a worker process: the exception comes back through pickle."""
    try:
        {"no_gradient": _raise_no_gradient, "serialization": _raise_serialization}[which]()
    except Exception as e:
        return e
    return None


@pytest.mark.parametrize("which,name", [("no_gradient", "NoGradientError"),
                                        ("serialization", "SerializationError")])
def test_exceptions_from_the_core_print_under_public_names(which, name):
    e = _raise_in_worker(which)
    assert type(e) is getattr(ng, name), e
    text = "".join(traceback.format_exception_only(type(e), e))
    assert text.startswith(f"ngraph.exceptions.{name}: ") and "_ngraph" not in text
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(
            "spawn")) as pool:
        back = pool.submit(_raise_in_worker, which).result(timeout=120)
    assert type(back) is type(e) and str(back).split("(node")[0] == str(e).split("(node")[0]
