"""nGraph's Python package layout (v0.26): its modules and names import from ngraph, and its
exceptions behave as nGraph's (and as the built-in ones they extend)."""

import re
from pathlib import Path

import ngraph as ng
import numpy as np
import pytest

API_DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"

# Every op function of nGraph v0.26's python/ngraph/ops.py.
NGRAPH_V026_OPS = [
    "parameter", "constant", "elu", "shuffle_channels", "squeeze", "unsqueeze", "grn",
    "scale_shift", "space_to_depth", "mvn", "quantize", "dequantize", "quantized_convolution",
    "quantized_dot", "absolute", "acos", "asin", "atan", "cos", "cosh", "sqrt", "exp", "log",
    "negative", "floor", "ceiling", "reshape", "relu", "sign", "sin", "sinh", "tan", "divide",
    "multiply", "subtract", "add", "minimum", "maximum", "power", "equal", "not_equal",
    "greater", "greater_eq", "less", "less_eq", "logical_and", "logical_or", "logical_not",
    "squared_difference", "broadcast", "broadcast_to", "fake_quantize", "gemm", "convert",
    "depth_to_space", "gelu", "select", "tanh", "clamp", "dot", "convolution",
    "convolution_backprop_data", "avg_pool", "max_pool", "sum", "prod", "max", "min", "prelu",
    "hard_sigmoid", "slice", "concat", "softmax", "pad", "one_hot", "replace_slice", "reverse",
    "batch_norm", "lrn", "argmax", "argmin", "topk", "get_output_element",
]  # fmt: skip
# Not provided: each must be named in docs/api.md's differences.
NOT_PROVIDED = {"quantize", "quantized_convolution", "quantized_dot"}


@pytest.mark.parametrize("name", NGRAPH_V026_OPS)
def test_every_ngraph_op_function_exists_or_is_documented_as_missing(name):
    if name in NOT_PROVIDED:
        assert not hasattr(ng, name)
        differences = API_DOC.read_text().split("## Differences from nGraph's Python API")[1]
        assert f"`{name}`" in differences, f"{name} is neither provided nor documented"
    else:
        assert callable(getattr(ng, name)), f"ng.{name} is missing"
        assert name in ng.__all__


@pytest.mark.parametrize("name", ["reduce_sum", "variadic_split", "function_call", "quantize"])
def test_names_not_provided_say_why_and_are_documented(name):
    from ngraph._not_provided import NOT_PROVIDED

    with pytest.raises(AttributeError, match=f"ngraph has no {name}: .*docs/api.md"):
        getattr(ng, name)
    assert not hasattr(ng, name)
    assert re.search(rf"`(ng\.)?{name}[`(]", API_DOC.read_text()), f"{name} is not in docs/api.md"
    assert name in NOT_PROVIDED


def test_a_missing_name_is_an_ordinary_attribute_error():
    with pytest.raises(AttributeError, match="module 'ngraph' has no attribute 'nonsense'"):
        ng.nonsense  # noqa: B018


def test_utils_is_a_package_with_ngraphs_modules():
    import ngraph.utils

    assert hasattr(ngraph.utils, "__path__")
    from ngraph.utils.broadcasting import as_elementwise_compatible_nodes, get_broadcast_axes
    from ngraph.utils.decorators import binary_op, nameable_op, unary_op
    from ngraph.utils.input_validation import assert_list_of_ints
    from ngraph.utils.node_factory import NodeFactory
    from ngraph.utils.reduction import get_reduction_axes
    from ngraph.utils.types import (
        NodeInput,
        NumericData,
        NumericType,
        ScalarData,
        TensorShape,
        as_node,
        get_dtype,
        get_element_type,
        make_constant_node,
    )

    for obj in (as_elementwise_compatible_nodes, get_broadcast_axes, binary_op, nameable_op,
                unary_op, assert_list_of_ints, NodeFactory, get_reduction_axes, NodeInput,
                NumericData, NumericType, ScalarData, TensorShape, as_node, get_dtype,
                get_element_type, make_constant_node):
        assert obj is not None


def test_our_helpers_stay_importable_from_ngraph_utils():
    from ngraph.utils import as_node, as_nodes, axis_list, int_list, shape_of, to_dtype

    assert to_dtype("u8") == np.uint8
    assert axis_list(-1, 3, "axes") == [2]
    assert shape_of([2, 3]) == [2, 3]
    assert int_list((1, 2), "x") == [1, 2]
    assert as_node(1.5).dtype == np.float64
    assert [n.dtype for n in as_nodes(ng.parameter([2], np.int8), 3)] == [np.int8, np.int8]


def test_types_module():
    from ngraph.impl import Type
    from ngraph.utils.types import get_dtype, get_element_type, make_constant_node

    assert get_element_type(np.float32) == Type.f32
    assert get_element_type(np.uint16) == Type.u16
    assert get_element_type(int) == Type.i32
    assert get_element_type(float) == Type.f32
    assert get_dtype(Type.i8) == np.int8
    with pytest.raises(ng.NgraphTypeError):
        get_element_type(np.complex64)
    with pytest.raises(ng.NgraphTypeError):
        get_dtype("f32")
    c = make_constant_node([1, 2, 3], np.uint8)
    assert c.dtype == np.uint8 and list(c.get_data()) == [1, 2, 3]


def test_input_validation_and_reduction_helpers():
    from ngraph.utils.input_validation import assert_list_of_ints
    from ngraph.utils.reduction import get_reduction_axes

    assert_list_of_ints([1, 2], "ok")
    with pytest.raises(ng.UserInputError, match="Parameter shape must be"):
        assert_list_of_ints([1, 2.5], "Parameter shape must be a list of integer values.")
    with pytest.raises(ValueError):
        assert_list_of_ints(7, "not iterable")
    p = ng.parameter([2, 3, 4])
    assert get_reduction_axes(p, None) == {0, 1, 2}
    assert get_reduction_axes(p, [2, 0]) == {0, 2}
    assert get_reduction_axes(p, -1) == {2}


def test_attribute_validators():
    from ngraph.utils.input_validation import (
        _check_value,
        check_valid_attribute,
        check_valid_attributes,
        is_non_negative_value,
        is_positive_value,
    )

    assert is_positive_value(np.uint8(3)) and not is_positive_value(np.int8(0))
    assert is_non_negative_value(np.float32(0)) and not is_non_negative_value(-1)
    assert _check_value("Op", "k", np.int16(4), np.integer, lambda v: v % 2 == 0)
    with pytest.raises(ng.UserInputError, match=r"\[Op\] attribute 'k': .*not of kind floating"):
        _check_value("Op", "k", np.int16(4), np.floating)
    with pytest.raises(ng.UserInputError, match=r"\[Op\] attribute 'k': 3 does not satisfy"):
        _check_value("Op", "k", 3, np.integer, lambda v: v % 2 == 0)
    attrs = {"mode": "linear", "sizes": [1, 2, 3]}
    assert check_valid_attribute("Op", attrs, "sizes", np.integer, is_positive_value)
    assert check_valid_attribute("Op", attrs, "alpha", np.floating)  # optional, missing
    with pytest.raises(ng.UserInputError, match="required attribute 'alpha' is missing"):
        check_valid_attribute("Op", attrs, "alpha", np.floating, required=True)
    with pytest.raises(ng.UserInputError, match="'sizes': 0 does not satisfy"):
        check_valid_attribute("Op", {"sizes": [1, 0]}, "sizes", np.integer, is_positive_value)
    assert check_valid_attributes("Op", attrs, [("mode", True, np.str_, None),
                                                ("sizes", True, np.integer, None)])
    with pytest.raises(ng.UserInputError, match="'mode'"):
        check_valid_attributes("Op", attrs, [("mode", True, np.integer, None)])


def test_decorators_name_and_convert():
    from ngraph.utils.decorators import binary_op, nameable_op, unary_op

    @nameable_op
    def make(shape, name=None):
        return ng.parameter(shape)

    @unary_op
    def neg(node, name=None):
        return ng.negative(node)

    @binary_op
    def plus(a, b, name=None):
        return ng.add(a, b)

    assert make([2], name="p").name == "p"
    assert neg(np.float32(2), name="n").name == "n"
    x = ng.parameter([2], np.int16)
    y = plus(x, 3, name="s")
    assert y.name == "s" and y.dtype == np.int16


def test_node_factory_builds_any_op_by_name():
    from ngraph.utils.node_factory import NodeFactory

    x = ng.parameter([2, 3])
    node = NodeFactory("opset1").create("Softmax", [x], {"axes": [1]})
    assert node.get_type_name() == "Softmax" and node.shape == [2, 3]
    with pytest.raises(ng.UserInputError, match="Softmax"):
        NodeFactory().create("Softmax", [x], {"no_such": 1})
    with pytest.raises(ng.UserInputError, match="NoSuchOp"):
        NodeFactory().create("NoSuchOp", [x])


# ------------------------------------------------------------------------- exceptions


def test_exception_hierarchy():
    from ngraph.exceptions import NgraphError, NgraphTypeError, UserInputError

    assert issubclass(UserInputError, NgraphError) and issubclass(UserInputError, ValueError)
    assert issubclass(NgraphTypeError, NgraphError) and issubclass(NgraphTypeError, TypeError)
    assert ng.UserInputError is UserInputError and ng.NgraphError is NgraphError
    assert UserInputError.__module__ == "ngraph.exceptions"
    assert repr(UserInputError("x")) == "UserInputError('x')"
    assert f"{UserInputError.__module__}.{UserInputError.__qualname__}" == \
        "ngraph.exceptions.UserInputError"


def test_shape_mismatch_in_op_construction_is_user_input_error():
    with pytest.raises(ng.UserInputError, match=r"\[Add\] shapes \{2\} and \{3\}") as info:
        ng.add(ng.parameter([2]), ng.parameter([3]))
    assert isinstance(info.value, ValueError)
    assert type(info.value).__module__ == "ngraph.exceptions"


def test_type_mismatch_in_op_construction_is_ngraph_type_error():
    with pytest.raises(ng.NgraphTypeError, match=r"\[Add\].*element types") as info:
        ng.add(ng.parameter([2], np.int8), ng.parameter([2], np.uint8))
    assert isinstance(info.value, TypeError)
    with pytest.raises(ng.NgraphTypeError, match=r"\[Sin\]"):
        ng.sin(ng.parameter([2], np.int32))
    with pytest.raises(ng.NgraphTypeError, match="complex64 is not supported"):
        ng.parameter([2], np.complex64)


def test_wrong_call_arguments_raise_ngraph_errors():
    x = ng.parameter([2, 2], name="x")
    comp = ng.runtime().computation(x * 2, x)
    with pytest.raises(ng.UserInputError, match=r"argument 0 \(x\) expects shape \(2, 2\)"):
        comp(np.ones(3, np.float32))
    with pytest.raises(ng.NgraphTypeError, match="expects 1 arguments"):
        comp()
    with pytest.raises(ng.NgraphTypeError, match="cannot convert"):
        comp(np.ones((2, 2), np.complex64))


def test_validation_errors_of_python_helpers_are_ngraph_errors():
    with pytest.raises(ng.UserInputError, match="axis 3 is out of range"):
        ng.concat([ng.parameter([2])], 3)
    with pytest.raises(ng.NgraphTypeError, match="must be a sequence of integers"):
        ng.reshape(ng.parameter([2]), ["a"])
    with pytest.raises(ng.UserInputError, match="negative"):
        ng.parameter([-1])


def test_integer_division_by_zero_is_user_input_error_and_the_process_survives():
    for dtype in (np.int8, np.uint8, np.int64, np.uint64):
        a, b = ng.parameter([3], dtype, name="a"), ng.parameter([3], dtype, name="b")
        comp = ng.runtime().computation(a / b, a, b)
        with pytest.raises(ng.UserInputError, match=r"\[Divide\] integer division by zero"):
            comp(np.ones(3, dtype), np.array([1, 0, 1], dtype))
        (out,) = comp(np.array([7, 8, 9], dtype), np.array([2, 3, 4], dtype))
        np.testing.assert_array_equal(out, np.array([7, 8, 9], dtype) // np.array([2, 3, 4], dtype))


def test_no_gradient_error_module_path():
    assert ng.NoGradientError.__module__ == "ngraph.exceptions"
    assert ng.exceptions.NoGradientError is ng.NoGradientError
    assert re.match(r"ngraph\.", f"{ng.NoGradientError.__module__}.x")
