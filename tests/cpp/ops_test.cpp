// Shape and element-type rules of every op of the core, and their error messages.
#include "ngraph/ops.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "test_utils.hpp"

using namespace ngraph;
using test::contains;
using test::error_of;
using test::starts_with;

namespace {

std::shared_ptr<op::Parameter> param(element::Type t, const Shape& s) {
  return std::make_shared<op::Parameter>(t, s);
}

// Checks a shape error: NodeValidationFailure (not a type error) starting with "[Op] ".
template <typename F>
std::string shape_error(const std::string& op, F&& f) {
  std::string msg = error_of<NodeValidationFailure>(std::forward<F>(f));
  EXPECT_TRUE(starts_with(msg, "[" + op + "] ")) << msg;
  return msg;
}

template <typename F>
std::string type_error(const std::string& op, F&& f) {
  std::string msg = error_of<ElementTypeError>(std::forward<F>(f));
  EXPECT_TRUE(starts_with(msg, "[" + op + "] ")) << msg;
  return msg;
}

using BinaryFactory =
    std::function<std::shared_ptr<Node>(const Output&, const Output&, const std::string&)>;

struct BinaryOp {
  std::string name;
  BinaryFactory make;
};

template <typename T>
BinaryOp binary(const std::string& name) {
  return {name, [](const Output& a, const Output& b, const std::string& ab) {
            return std::make_shared<T>(a, b, ab);
          }};
}

std::vector<BinaryOp> arithmetic_ops() {
  return {binary<op::Add>("Add"),           binary<op::Subtract>("Subtract"),
          binary<op::Multiply>("Multiply"), binary<op::Divide>("Divide"),
          binary<op::Power>("Power"),       binary<op::Maximum>("Maximum"),
          binary<op::Minimum>("Minimum")};
}

std::vector<BinaryOp> comparison_ops() {
  return {binary<op::Equal>("Equal"),     binary<op::NotEqual>("NotEqual"),
          binary<op::Greater>("Greater"), binary<op::GreaterEq>("GreaterEq"),
          binary<op::Less>("Less"),       binary<op::LessEq>("LessEq")};
}

std::vector<BinaryOp> logical_ops() {
  return {binary<op::LogicalAnd>("LogicalAnd"), binary<op::LogicalOr>("LogicalOr")};
}

std::vector<BinaryOp> all_binary_ops() {
  std::vector<BinaryOp> ops = arithmetic_ops();
  for (auto& o : comparison_ops()) ops.push_back(o);
  for (auto& o : logical_ops()) ops.push_back(o);
  return ops;
}

// An element type the op accepts.
element::Type accepted_type(const std::string& name) {
  return (name == "LogicalAnd" || name == "LogicalOr") ? element::boolean : element::f32;
}

struct BroadcastCase {
  Shape a, b, out;
};

const std::vector<BroadcastCase> kBroadcastCases = {
    {{2, 3}, {2, 3}, {2, 3}},
    {{2, 3}, {3}, {2, 3}},
    {{3}, {2, 3}, {2, 3}},
    {{2, 1}, {1, 3}, {2, 3}},
    {{}, {2, 3}, {2, 3}},
    {{2, 3}, {}, {2, 3}},
    {{}, {}, {}},
    {{4, 1, 5}, {3, 1}, {4, 3, 5}},
    {{0, 3}, {1, 3}, {0, 3}},
    {{0}, {1}, {0}},
    {{2, 0}, {2, 1}, {2, 0}},
    {{0}, {}, {0}},
    {{1, 1}, {5}, {1, 5}},
    {{2, 1, 0}, {3, 1}, {2, 3, 0}},
};

}  // namespace

// ------------------------------------------------------------------------ Parameter, Constant

TEST(ops_parameter, shape_and_type) {
  auto p = param(element::i64, Shape{2, 0, 3});
  EXPECT_EQ(p->get_type_name(), "Parameter");
  EXPECT_EQ(p->get_element_type(), element::i64);
  EXPECT_EQ(p->get_shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(p->get_input_size(), 0u);
  EXPECT_EQ(p->get_output_size(), 1u);
  EXPECT_FALSE(p->is_pure());
  auto s = param(element::boolean, Shape{});
  EXPECT_EQ(s->get_shape(), Shape{});
  EXPECT_EQ(s->get_element_type(), element::boolean);
}

TEST(ops_parameter, undefined_type_throws) {
  type_error("Parameter", [] { param(element::undefined, Shape{2}); });
}

TEST(ops_constant, shape_type_and_values) {
  auto c = std::make_shared<op::Constant>(element::f32, Shape{2, 2}, std::vector<int>{1, 2, 3, 4});
  EXPECT_EQ(c->get_element_type(), element::f32);
  EXPECT_EQ(c->get_shape(), (Shape{2, 2}));
  EXPECT_EQ(c->get_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(c->byte_size(), 16u);

  auto fill = std::make_shared<op::Constant>(element::i64, Shape{3}, std::vector<double>{7.9});
  EXPECT_EQ(fill->get_vector<int64_t>(), (std::vector<int64_t>{7, 7, 7}));

  int32_t raw[3] = {-1, 0, 5};
  auto fromraw = std::make_shared<op::Constant>(element::i32, Shape{3}, raw);
  EXPECT_EQ(fromraw->get_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 5}));
  EXPECT_EQ(fromraw->get_vector<double>(), (std::vector<double>{-1, 0, 5}));

  auto b = std::make_shared<op::Constant>(element::boolean, Shape{3}, std::vector<int>{0, 1, 1});
  EXPECT_EQ(b->get_element_type(), element::boolean);
  EXPECT_EQ(b->get_vector<int>(), (std::vector<int>{0, 1, 1}));

  auto empty = std::make_shared<op::Constant>(element::f64, Shape{0, 4}, std::vector<double>{});
  EXPECT_EQ(empty->get_shape(), (Shape{0, 4}));
  EXPECT_TRUE(empty->get_vector<double>().empty());

  auto scalar = std::make_shared<op::Constant>(element::f64, Shape{}, std::vector<double>{2.5});
  EXPECT_EQ(scalar->get_shape(), Shape{});
  EXPECT_EQ(scalar->get_vector<double>(), std::vector<double>{2.5});
}

TEST(ops_constant, wrong_value_count_throws) {
  std::string msg = shape_error("Constant", [] {
    op::Constant(element::f32, Shape{2, 2}, std::vector<float>{1, 2, 3});
  });
  EXPECT_EQ(msg, "[Constant] got 3 values for shape {2,2} (4 elements)");
  type_error("Constant", [] { op::Constant(element::undefined, Shape{1}, std::vector<int>{1}); });
}

TEST(ops_constant, equality_compares_data) {
  auto a = std::make_shared<op::Constant>(element::f32, Shape{2}, std::vector<float>{1, 2});
  auto b = std::make_shared<op::Constant>(element::f32, Shape{2}, std::vector<float>{1, 2});
  auto c = std::make_shared<op::Constant>(element::f32, Shape{2}, std::vector<float>{1, 3});
  auto d = std::make_shared<op::Constant>(element::i32, Shape{2}, std::vector<int>{1, 2});
  EXPECT_TRUE(a->attributes_equal(*b));
  EXPECT_EQ(a->attributes_hash(), b->attributes_hash());
  EXPECT_FALSE(a->attributes_equal(*c));
  EXPECT_FALSE(a->attributes_equal(*d));
}

TEST(ops_result, passes_shape_and_type) {
  auto p = param(element::i32, Shape{4, 1});
  auto r = std::make_shared<op::Result>(p);
  EXPECT_EQ(r->get_type_name(), "Result");
  EXPECT_EQ(r->get_element_type(), element::i32);
  EXPECT_EQ(r->get_shape(), (Shape{4, 1}));
  EXPECT_FALSE(r->is_pure());
}

TEST(ops_result, function_wraps_results) {
  auto p = param(element::f32, Shape{2});
  auto neg = std::make_shared<op::Negative>(p);
  auto r = std::make_shared<op::Result>(neg);
  Function f(OutputVector{neg, r}, ParameterVector{p});
  ASSERT_EQ(f.get_results().size(), 2u);
  EXPECT_NE(f.get_results()[0], r);  // a new Result around neg
  EXPECT_EQ(f.get_results()[0]->input_value(0), Output(neg));
  EXPECT_EQ(f.get_results()[1], r);  // already a Result: kept
}

TEST(ops_function, missing_parameter_throws) {
  auto p = param(element::f32, Shape{2});
  auto q = param(element::f32, Shape{2});
  auto add = std::make_shared<op::Add>(p, q);
  EXPECT_THROW(Function(OutputVector{add}, ParameterVector{p}), std::invalid_argument);
  EXPECT_THROW(Function(OutputVector{add}, ParameterVector{p, q, p}), std::invalid_argument);
  EXPECT_NO_THROW(Function(OutputVector{add}, ParameterVector{q, p, param(element::i32, {})}));
}

// ------------------------------------------------------------------------ binary elementwise

TEST(ops_binary, same_shape_without_broadcast) {
  for (const auto& op : all_binary_ops()) {
    SCOPED_TRACE(op.name);
    auto t = accepted_type(op.name);
    auto node = op.make(param(t, {2, 3}), param(t, {2, 3}), "none");
    EXPECT_EQ(node->get_type_name(), op.name);
    EXPECT_EQ(node->get_shape(), (Shape{2, 3}));
    auto scalar = op.make(param(t, {}), param(t, {}), "none");
    EXPECT_EQ(scalar->get_shape(), Shape{});
    auto empty = op.make(param(t, {0, 3}), param(t, {0, 3}), "none");
    EXPECT_EQ(empty->get_shape(), (Shape{0, 3}));
  }
}

TEST(ops_binary, shape_mismatch_without_broadcast_throws) {
  for (const auto& op : all_binary_ops()) {
    SCOPED_TRACE(op.name);
    auto t = accepted_type(op.name);
    std::string msg = shape_error(op.name, [&] {
      op.make(param(t, {2, 3}), param(t, {3}), "none");
    });
    EXPECT_EQ(msg, "[" + op.name +
                       "] arguments must have the same shape (got {2,3} and {3}); use "
                       "auto_broadcast='numpy' to broadcast");
    // Broadcastable shapes are still an error without auto_broadcast.
    shape_error(op.name, [&] { op.make(param(t, {}), param(t, {2}), "none"); });
  }
}

TEST(ops_binary, numpy_broadcast_shapes) {
  for (const auto& op : all_binary_ops()) {
    SCOPED_TRACE(op.name);
    auto t = accepted_type(op.name);
    for (const auto& c : kBroadcastCases) {
      SCOPED_TRACE(to_braces(c.a) + " with " + to_braces(c.b));
      auto node = op.make(param(t, c.a), param(t, c.b), "numpy");
      EXPECT_EQ(node->get_shape(), c.out);
    }
  }
}

TEST(ops_binary, numpy_broadcast_incompatible_throws) {
  for (const auto& op : all_binary_ops()) {
    SCOPED_TRACE(op.name);
    auto t = accepted_type(op.name);
    std::string msg = shape_error(op.name, [&] {
      op.make(param(t, {2, 3}), param(t, {4}), "numpy");
    });
    EXPECT_EQ(msg, "[" + op.name +
                       "] shapes {2,3} and {4} are not broadcast-compatible (axis 1 of the "
                       "result: 3 vs 4)");
    msg = shape_error(op.name, [&] { op.make(param(t, {0}), param(t, {2}), "numpy"); });
    EXPECT_TRUE(contains(msg, "{0} and {2}")) << msg;
    msg = shape_error(op.name, [&] { op.make(param(t, {2, 1, 3}), param(t, {5, 2, 1}), "numpy"); });
    EXPECT_TRUE(contains(msg, "{2,1,3} and {5,2,1}")) << msg;
  }
}

TEST(ops_binary, unknown_auto_broadcast_throws) {
  for (const auto& op : all_binary_ops()) {
    SCOPED_TRACE(op.name);
    auto t = accepted_type(op.name);
    std::string msg = shape_error(op.name, [&] { op.make(param(t, {2}), param(t, {2}), "pdpd"); });
    EXPECT_EQ(msg, "[" + op.name + "] auto_broadcast must be 'none' or 'numpy', got 'pdpd'");
  }
}

TEST(ops_binary, element_types_must_match) {
  for (const auto& op : arithmetic_ops()) {
    SCOPED_TRACE(op.name);
    std::string msg = type_error(
        op.name, [&] { op.make(param(element::f32, {2}), param(element::i32, {2}), "none"); });
    EXPECT_EQ(msg, "[" + op.name + "] element types of arg0 (f32) and arg1 (i32) must match");
  }
  for (const auto& op : comparison_ops()) {
    SCOPED_TRACE(op.name);
    type_error(op.name,
               [&] { op.make(param(element::i64, {2}), param(element::i32, {2}), "none"); });
  }
}

TEST(ops_binary, arithmetic_keeps_numeric_type) {
  for (const auto& op : arithmetic_ops()) {
    SCOPED_TRACE(op.name);
    for (auto t : {element::f32, element::f64, element::i32, element::i64}) {
      auto node = op.make(param(t, {2}), param(t, {2}), "none");
      EXPECT_EQ(node->get_element_type(), t);
    }
    std::string msg = type_error(op.name, [&] {
      op.make(param(element::boolean, {2}), param(element::boolean, {2}), "none");
    });
    EXPECT_EQ(msg, "[" + op.name +
                       "] arg0 has element type boolean; expected a numeric type (f32, f64, i8, "
                       "i16, i32, i64, u8, u16, u32, u64)");
  }
}

TEST(ops_binary, comparisons_give_boolean) {
  for (const auto& op : comparison_ops()) {
    SCOPED_TRACE(op.name);
    for (auto t : {element::f32, element::f64, element::i32, element::i64}) {
      auto node = op.make(param(t, {3}), param(t, {}), "numpy");
      EXPECT_EQ(node->get_element_type(), element::boolean);
      EXPECT_EQ(node->get_shape(), Shape{3});
    }
    bool accepts_boolean = op.name == "Equal" || op.name == "NotEqual";
    auto make_bool = [&] {
      op.make(param(element::boolean, {2}), param(element::boolean, {2}), "none");
    };
    if (accepts_boolean) {
      EXPECT_NO_THROW(make_bool());
    } else {
      type_error(op.name, make_bool);
    }
  }
}

TEST(ops_binary, logical_ops_need_boolean) {
  for (const auto& op : logical_ops()) {
    SCOPED_TRACE(op.name);
    auto node = op.make(param(element::boolean, {2, 1}), param(element::boolean, {3}), "numpy");
    EXPECT_EQ(node->get_element_type(), element::boolean);
    EXPECT_EQ(node->get_shape(), (Shape{2, 3}));
    std::string msg = type_error(
        op.name, [&] { op.make(param(element::f32, {2}), param(element::f32, {2}), "none"); });
    EXPECT_EQ(msg, "[" + op.name + "] arg0 has element type f32; expected boolean");
    msg = type_error(
        op.name, [&] { op.make(param(element::boolean, {2}), param(element::i32, {2}), "none"); });
    EXPECT_TRUE(starts_with(msg, "[" + op.name + "] arg1 has element type i32")) << msg;
  }
}

TEST(ops_binary, divide_pythondiv_attribute) {
  auto a = param(element::i32, {2});
  auto d = std::make_shared<op::Divide>(a, a);
  EXPECT_TRUE(d->is_pythondiv());
  EXPECT_EQ(d->get_auto_broadcast(), op::AutoBroadcast::none);
  auto c = std::make_shared<op::Divide>(a, a, "numpy", false);
  EXPECT_FALSE(c->is_pythondiv());
  EXPECT_EQ(c->attributes_string(), "auto_broadcast='numpy', pythondiv=false");
  // The auto_broadcast rule still applies to Divide.
  shape_error("Divide", [] { op::Divide(param(element::f32, {2}), param(element::f32, {3})); });
}

// ------------------------------------------------------------------------- unary elementwise

namespace {
using UnaryFactory = std::function<std::shared_ptr<Node>(const Output&)>;
struct UnaryOp {
  std::string name;
  UnaryFactory make;
  bool real_only;
  bool boolean_only;
};
template <typename T>
UnaryOp unary(const std::string& name, bool real_only, bool boolean_only = false) {
  return {name, [](const Output& a) { return std::make_shared<T>(a); }, real_only, boolean_only};
}
std::vector<UnaryOp> unary_ops() {
  return {unary<op::Negative>("Negative", false),
          unary<op::Abs>("Abs", false),
          unary<op::Sign>("Sign", false),
          unary<op::Floor>("Floor", false),
          unary<op::Ceiling>("Ceiling", false),
          unary<op::Relu>("Relu", false),
          unary<op::Exp>("Exp", true),
          unary<op::Log>("Log", true),
          unary<op::Sqrt>("Sqrt", true),
          unary<op::Sin>("Sin", true),
          unary<op::Cos>("Cos", true),
          unary<op::Tan>("Tan", true),
          unary<op::Asin>("Asin", true),
          unary<op::Acos>("Acos", true),
          unary<op::Atan>("Atan", true),
          unary<op::Sinh>("Sinh", true),
          unary<op::Cosh>("Cosh", true),
          unary<op::Tanh>("Tanh", true),
          unary<op::Sigmoid>("Sigmoid", true),
          unary<op::Erf>("Erf", true),
          unary<op::Gelu>("Gelu", true),
          unary<op::LogicalNot>("LogicalNot", false, true)};
}
}  // namespace

TEST(ops_unary, keeps_shape_and_type) {
  for (const auto& op : unary_ops()) {
    SCOPED_TRACE(op.name);
    std::vector<element::Type> ok;
    if (op.boolean_only)
      ok = {element::boolean};
    else if (op.real_only)
      ok = {element::f32, element::f64};
    else
      ok = {element::f32, element::f64, element::i32, element::i64};
    for (auto t : ok)
      for (const Shape& s : {Shape{}, Shape{3}, Shape{2, 0, 4}, Shape{1, 1}}) {
        auto node = op.make(param(t, s));
        EXPECT_EQ(node->get_type_name(), op.name);
        EXPECT_EQ(node->get_element_type(), t);
        EXPECT_EQ(node->get_shape(), s);
      }
  }
}

TEST(ops_unary, rejects_wrong_element_kind) {
  for (const auto& op : unary_ops()) {
    SCOPED_TRACE(op.name);
    if (op.boolean_only) {
      std::string msg = type_error(op.name, [&] { op.make(param(element::f32, {2})); });
      EXPECT_EQ(msg, "[" + op.name + "] arg0 has element type f32; expected boolean");
      continue;
    }
    std::string msg = type_error(op.name, [&] { op.make(param(element::boolean, {2})); });
    EXPECT_TRUE(starts_with(msg, "[" + op.name + "] arg0 has element type boolean")) << msg;
    if (op.real_only) {
      msg = type_error(op.name, [&] { op.make(param(element::i32, {2})); });
      EXPECT_EQ(msg, "[" + op.name +
                         "] arg0 has element type i32; expected a floating-point type (f32, f64)");
      type_error(op.name, [&] { op.make(param(element::i64, {2})); });
    }
  }
}

// ------------------------------------------------------------------------- Select, Convert

TEST(ops_select, shapes_and_types) {
  auto s = std::make_shared<op::Select>(param(element::boolean, {2, 3}),
                                        param(element::i32, {2, 3}), param(element::i32, {2, 3}));
  EXPECT_EQ(s->get_element_type(), element::i32);
  EXPECT_EQ(s->get_shape(), (Shape{2, 3}));
  auto b = std::make_shared<op::Select>(param(element::boolean, {3}), param(element::f64, {2, 1}),
                                        param(element::f64, {}), "numpy");
  EXPECT_EQ(b->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(b->get_element_type(), element::f64);
  auto z = std::make_shared<op::Select>(param(element::boolean, {0, 1}), param(element::f32, {4}),
                                        param(element::f32, {1}), "numpy");
  EXPECT_EQ(z->get_shape(), (Shape{0, 4}));
  auto bb = std::make_shared<op::Select>(param(element::boolean, {}), param(element::boolean, {}),
                                         param(element::boolean, {}));
  EXPECT_EQ(bb->get_element_type(), element::boolean);
}

TEST(ops_select, errors) {
  std::string msg = type_error("Select", [] {
    op::Select(param(element::f32, {2}), param(element::f32, {2}), param(element::f32, {2}));
  });
  EXPECT_EQ(msg, "[Select] arg0 has element type f32; expected boolean");
  msg = type_error("Select", [] {
    op::Select(param(element::boolean, {2}), param(element::f32, {2}), param(element::f64, {2}));
  });
  EXPECT_EQ(msg, "[Select] element types of arg1 (f32) and arg2 (f64) must match");
  msg = shape_error("Select", [] {
    op::Select(param(element::boolean, {2}), param(element::f32, {3}), param(element::f32, {3}));
  });
  EXPECT_TRUE(contains(msg, "{2}") && contains(msg, "{3}")) << msg;
  msg = shape_error("Select", [] {
    op::Select(param(element::boolean, {2, 3}), param(element::f32, {3}), param(element::f32, {4}),
               "numpy");
  });
  EXPECT_TRUE(contains(msg, "{2,3} and {4}")) << msg;
}

TEST(ops_convert, shape_and_type) {
  for (auto from : {element::f32, element::f64, element::i32, element::i64, element::boolean})
    for (auto to : {element::f32, element::f64, element::i32, element::i64, element::boolean}) {
      auto c = std::make_shared<op::Convert>(param(from, {2, 0}), to);
      EXPECT_EQ(c->get_element_type(), to);
      EXPECT_EQ(c->get_shape(), (Shape{2, 0}));
      EXPECT_EQ(c->get_destination_type(), to);
    }
  type_error("Convert", [] { op::Convert(param(element::f32, {2}), element::undefined); });
}

// ------------------------------------------------------------------------------ Dot, MatMul

TEST(ops_dot, shapes) {
  auto dot = [](const Shape& a, const Shape& b, int64_t n = -1) {
    return std::make_shared<op::Dot>(param(element::f32, a), param(element::f32, b), n);
  };
  EXPECT_EQ(dot({3}, {3})->get_shape(), Shape{});
  EXPECT_EQ(dot({2, 3}, {3})->get_shape(), Shape{2});
  EXPECT_EQ(dot({3}, {3, 4})->get_shape(), Shape{4});
  EXPECT_EQ(dot({2, 3}, {3, 4})->get_shape(), (Shape{2, 4}));
  EXPECT_EQ(dot({2, 3, 4}, {4, 5})->get_shape(), (Shape{2, 3, 5}));
  // Scalars: the default count is 0 (a scalar product).
  EXPECT_EQ(dot({}, {2, 3})->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(dot({2, 3}, {})->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(dot({}, {})->get_shape(), Shape{});
  EXPECT_EQ(dot({}, {2, 3})->get_reduction_axes_count(), 0u);
  EXPECT_EQ(dot({2}, {2})->get_reduction_axes_count(), 1u);
  // Explicit counts.
  EXPECT_EQ(dot({2, 3}, {4, 5}, 0)->get_shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(dot({2, 3, 4}, {3, 4, 5}, 2)->get_shape(), (Shape{2, 5}));
  EXPECT_EQ(dot({3, 4}, {3, 4}, 2)->get_shape(), Shape{});
  EXPECT_EQ(dot({2, 3}, {3, 4}, 1)->get_shape(), (Shape{2, 4}));
  // Zero-size axes.
  EXPECT_EQ(dot({2, 0}, {0, 3})->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(dot({0, 3}, {3, 4})->get_shape(), (Shape{0, 4}));
  for (auto t : {element::f64, element::i32, element::i64}) {
    auto d = std::make_shared<op::Dot>(param(t, {2, 3}), param(t, {3}));
    EXPECT_EQ(d->get_element_type(), t);
  }
}

TEST(ops_dot, errors) {
  std::string msg = shape_error("Dot", [] {
    op::Dot(param(element::f32, {2, 3}), param(element::f32, {4, 5}));
  });
  EXPECT_EQ(msg,
            "[Dot] reduction axis of arg0 shape {2,3} (3) does not match arg1 shape {4,5} (4)");
  msg = shape_error("Dot", [] {
    op::Dot(param(element::f32, {2, 3, 4}), param(element::f32, {3, 5, 6}), 2);
  });
  EXPECT_EQ(msg,
            "[Dot] reduction axis of arg0 shape {2,3,4} (4) does not match arg1 shape {3,5,6} (5)");
  msg = shape_error("Dot", [] {
    op::Dot(param(element::f32, {3}), param(element::f32, {3, 3}), 2);
  });
  EXPECT_TRUE(contains(msg, "reduction_axes_count (2)") && contains(msg, "{3}") &&
              contains(msg, "{3,3}"))
      << msg;
  msg = shape_error("Dot", [] { op::Dot(param(element::f32, {3}), param(element::f32, {3}), -2); });
  EXPECT_TRUE(contains(msg, "-2")) << msg;
  msg = type_error("Dot", [] { op::Dot(param(element::f32, {3}), param(element::f64, {3})); });
  EXPECT_EQ(msg, "[Dot] element types of arg0 (f32) and arg1 (f64) must match");
  type_error("Dot", [] { op::Dot(param(element::boolean, {3}), param(element::boolean, {3})); });
}

TEST(ops_matmul, shapes) {
  auto mm = [](const Shape& a, const Shape& b, bool ta = false, bool tb = false) {
    return std::make_shared<op::MatMul>(param(element::f32, a), param(element::f32, b), ta, tb);
  };
  EXPECT_EQ(mm({2, 3}, {3, 4})->get_shape(), (Shape{2, 4}));
  EXPECT_EQ(mm({3, 2}, {3, 4}, true)->get_shape(), (Shape{2, 4}));
  EXPECT_EQ(mm({2, 3}, {4, 3}, false, true)->get_shape(), (Shape{2, 4}));
  EXPECT_EQ(mm({3, 2}, {4, 3}, true, true)->get_shape(), (Shape{2, 4}));
  // 1-D promotion: the added axis is dropped; transposes do not apply to vectors.
  EXPECT_EQ(mm({3}, {3, 4})->get_shape(), Shape{4});
  EXPECT_EQ(mm({2, 3}, {3})->get_shape(), Shape{2});
  EXPECT_EQ(mm({3}, {3})->get_shape(), Shape{});
  EXPECT_EQ(mm({3}, {3}, true, true)->get_shape(), Shape{});
  EXPECT_EQ(mm({3}, {4, 3}, true, true)->get_shape(), Shape{4});
  EXPECT_EQ(mm({5, 3}, {2, 3, 4})->get_shape(), (Shape{2, 5, 4}));
  // Batches broadcast.
  EXPECT_EQ(mm({5, 2, 3}, {3, 4})->get_shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(mm({2, 1, 2, 3}, {4, 3, 5})->get_shape(), (Shape{2, 4, 2, 5}));
  EXPECT_EQ(mm({7, 2, 3}, {3})->get_shape(), (Shape{7, 2}));
  EXPECT_EQ(mm({3}, {7, 3, 4})->get_shape(), (Shape{7, 4}));
  EXPECT_EQ(mm({0, 2, 3}, {1, 3, 4})->get_shape(), (Shape{0, 2, 4}));
  EXPECT_EQ(mm({2, 0}, {0, 4})->get_shape(), (Shape{2, 4}));
  auto i = std::make_shared<op::MatMul>(param(element::i64, {2, 2}), param(element::i64, {2, 2}));
  EXPECT_EQ(i->get_element_type(), element::i64);
}

TEST(ops_matmul, errors) {
  std::string msg = shape_error("MatMul", [] {
    op::MatMul(param(element::f32, {2, 3}), param(element::f32, {4, 5}));
  });
  EXPECT_EQ(msg,
            "[MatMul] inner dimension of arg0 shape {2,3} (3) does not match arg1 shape {4,5} (4)");
  msg = shape_error("MatMul", [] {
    op::MatMul(param(element::f32, {2, 3}), param(element::f32, {3, 4}), true, false);
  });
  EXPECT_TRUE(contains(msg, "{2,3} (2, transposed)") && contains(msg, "{3,4} (3)")) << msg;
  msg =
      shape_error("MatMul", [] { op::MatMul(param(element::f32, {}), param(element::f32, {3})); });
  EXPECT_TRUE(contains(msg, "rank >= 1")) << msg;
  msg = shape_error("MatMul", [] {
    op::MatMul(param(element::f32, {2, 2, 3}), param(element::f32, {3, 3, 4}));
  });
  EXPECT_TRUE(contains(msg, "{2} and {3}")) << msg;
  msg = type_error("MatMul", [] {
    op::MatMul(param(element::i32, {2, 2}), param(element::i64, {2, 2}));
  });
  EXPECT_EQ(msg, "[MatMul] element types of arg0 (i32) and arg1 (i64) must match");
  type_error("MatMul", [] {
    op::MatMul(param(element::boolean, {2, 2}), param(element::boolean, {2, 2}));
  });
}

// -------------------------------------------------------------------------- data movement

TEST(ops_broadcast, shapes) {
  auto b = std::make_shared<op::Broadcast>(param(element::i32, {3}), Shape{2, 3}, AxisSet{0});
  EXPECT_EQ(b->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(b->get_element_type(), element::i32);
  auto s = std::make_shared<op::Broadcast>(param(element::boolean, {}), Shape{2, 3}, AxisSet{0, 1});
  EXPECT_EQ(s->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(s->get_element_type(), element::boolean);
  auto m = std::make_shared<op::Broadcast>(param(element::f32, {2}), Shape{2, 4}, AxisSet{1});
  EXPECT_EQ(m->get_shape(), (Shape{2, 4}));
  auto z = std::make_shared<op::Broadcast>(param(element::f32, {3}), Shape{0, 3}, AxisSet{0});
  EXPECT_EQ(z->get_shape(), (Shape{0, 3}));
  auto id = std::make_shared<op::Broadcast>(param(element::f32, {3}), Shape{3}, AxisSet{});
  EXPECT_EQ(id->get_shape(), Shape{3});
}

TEST(ops_broadcast, errors) {
  std::string msg = shape_error("Broadcast", [] {
    op::Broadcast(param(element::f32, {3}), Shape{2, 3}, AxisSet{2});
  });
  EXPECT_TRUE(contains(msg, "axis 2") && contains(msg, "{2,3}")) << msg;
  msg = shape_error("Broadcast", [] {
    op::Broadcast(param(element::f32, {3}), Shape{2, 3}, AxisSet{1});
  });
  EXPECT_EQ(msg,
            "[Broadcast] arg shape {3} does not match result shape {2,3} with broadcast axes {1} "
            "removed ({2})");
}

TEST(ops_reshape, shapes) {
  auto r =
      std::make_shared<op::Reshape>(param(element::f32, {2, 3}), AxisVector{0, 1}, Shape{3, 2});
  EXPECT_EQ(r->get_shape(), (Shape{3, 2}));
  EXPECT_FALSE(r->is_transpose());
  auto t =
      std::make_shared<op::Reshape>(param(element::i64, {2, 3}), AxisVector{1, 0}, Shape{3, 2});
  EXPECT_TRUE(t->is_transpose());
  EXPECT_EQ(t->get_element_type(), element::i64);
  auto f =
      std::make_shared<op::Reshape>(param(element::f32, {2, 3, 4}), AxisVector{2, 0, 1}, Shape{24});
  EXPECT_EQ(f->get_shape(), Shape{24});
  auto s = std::make_shared<op::Reshape>(param(element::f32, {}), AxisVector{}, Shape{1, 1});
  EXPECT_EQ(s->get_shape(), (Shape{1, 1}));
  auto to_scalar =
      std::make_shared<op::Reshape>(param(element::f32, {1, 1}), AxisVector{0, 1}, Shape{});
  EXPECT_EQ(to_scalar->get_shape(), Shape{});
  auto z =
      std::make_shared<op::Reshape>(param(element::f32, {0, 3}), AxisVector{1, 0}, Shape{3, 0, 5});
  EXPECT_EQ(z->get_shape(), (Shape{3, 0, 5}));
}

TEST(ops_reshape, errors) {
  std::string msg = shape_error("Reshape", [] {
    op::Reshape(param(element::f32, {2, 3}), AxisVector{0, 0}, Shape{6});
  });
  EXPECT_TRUE(contains(msg, "{0,0}") && contains(msg, "{2,3}")) << msg;
  shape_error("Reshape", [] { op::Reshape(param(element::f32, {2, 3}), AxisVector{0}, Shape{6}); });
  shape_error("Reshape", [] {
    op::Reshape(param(element::f32, {2, 3}), AxisVector{0, 2}, Shape{6});
  });
  msg = shape_error("Reshape", [] {
    op::Reshape(param(element::f32, {2, 3}), AxisVector{0, 1}, Shape{4, 2});
  });
  EXPECT_EQ(msg, "[Reshape] arg shape {2,3} (6 elements) cannot be reshaped to {4,2} (8 elements)");
}

TEST(ops_slice, shapes) {
  auto s = std::make_shared<op::Slice>(param(element::f32, {4, 5}), Coordinate{1, 0},
                                       Coordinate{4, 5}, Strides{2, 2});
  EXPECT_EQ(s->get_shape(), (Shape{2, 3}));
  auto d =
      std::make_shared<op::Slice>(param(element::i32, {4, 5}), Coordinate{1, 2}, Coordinate{3, 5});
  EXPECT_EQ(d->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(d->get_element_type(), element::i32);
  EXPECT_EQ(d->get_strides(), (Strides{1, 1}));
  auto e = std::make_shared<op::Slice>(param(element::f32, {4}), Coordinate{2}, Coordinate{2});
  EXPECT_EQ(e->get_shape(), Shape{0});
  auto t = std::make_shared<op::Slice>(param(element::f32, {10}), Coordinate{1}, Coordinate{10},
                                       Strides{3});
  EXPECT_EQ(t->get_shape(), Shape{3});  // 1, 4, 7
  auto big = std::make_shared<op::Slice>(param(element::f32, {10}), Coordinate{1}, Coordinate{10},
                                         Strides{20});
  EXPECT_EQ(big->get_shape(), Shape{1});
  auto scalar = std::make_shared<op::Slice>(param(element::f32, {}), Coordinate{}, Coordinate{});
  EXPECT_EQ(scalar->get_shape(), Shape{});
}

TEST(ops_slice, errors) {
  std::string msg = shape_error("Slice", [] {
    op::Slice(param(element::f32, {4, 5}), Coordinate{0}, Coordinate{4, 5});
  });
  EXPECT_TRUE(contains(msg, "{4,5}")) << msg;
  msg = shape_error("Slice", [] {
    op::Slice(param(element::f32, {4, 5}), Coordinate{0, 0}, Coordinate{4, 6});
  });
  EXPECT_EQ(msg, "[Slice] upper bound 6 of axis 1 exceeds arg shape {4,5}");
  msg = shape_error("Slice", [] {
    op::Slice(param(element::f32, {4, 5}), Coordinate{3, 0}, Coordinate{2, 5});
  });
  EXPECT_EQ(msg, "[Slice] lower bound 3 of axis 0 exceeds upper bound 2");
  msg = shape_error("Slice", [] {
    op::Slice(param(element::f32, {4, 5}), Coordinate{0, 0}, Coordinate{4, 5}, Strides{1, 0});
  });
  EXPECT_EQ(msg, "[Slice] stride of axis 1 is zero");
  shape_error("Slice", [] {
    op::Slice(param(element::f32, {4, 5}), Coordinate{0, 0}, Coordinate{4, 5}, Strides{1});
  });
}

TEST(ops_concat, shapes) {
  auto c = std::make_shared<op::Concat>(
      OutputVector{param(element::f32, {2, 3}), param(element::f32, {4, 3}),
                   param(element::f32, {0, 3})},
      0);
  EXPECT_EQ(c->get_shape(), (Shape{6, 3}));
  auto d = std::make_shared<op::Concat>(
      OutputVector{param(element::i32, {2, 1}), param(element::i32, {2, 4})}, 1);
  EXPECT_EQ(d->get_shape(), (Shape{2, 5}));
  EXPECT_EQ(d->get_element_type(), element::i32);
  auto one = std::make_shared<op::Concat>(OutputVector{param(element::boolean, {3})}, 0);
  EXPECT_EQ(one->get_shape(), Shape{3});
  EXPECT_EQ(one->get_concatenation_axis(), 0u);
}

TEST(ops_concat, errors) {
  std::string msg = shape_error("Concat", [] { op::Concat(OutputVector{}, 0); });
  EXPECT_EQ(msg, "[Concat] needs at least one argument");
  msg = shape_error("Concat", [] {
    op::Concat(OutputVector{param(element::f32, {2, 3}), param(element::f32, {2, 3})}, 2);
  });
  EXPECT_TRUE(contains(msg, "concatenation axis 2") && contains(msg, "{2,3}")) << msg;
  shape_error("Concat", [] { op::Concat(OutputVector{param(element::f32, {})}, 0); });
  msg = shape_error("Concat", [] {
    op::Concat(OutputVector{param(element::f32, {2, 3}), param(element::f32, {2, 4})}, 0);
  });
  EXPECT_EQ(msg,
            "[Concat] arg1 shape {2,4} does not match arg0 shape {2,3} outside the concatenation "
            "axis 0");
  shape_error("Concat", [] {
    op::Concat(OutputVector{param(element::f32, {2, 3}), param(element::f32, {2, 3, 1})}, 0);
  });
  msg = type_error("Concat", [] {
    op::Concat(OutputVector{param(element::f32, {2}), param(element::f64, {2})}, 0);
  });
  EXPECT_EQ(msg, "[Concat] arg1 has element type f64, arg0 has f32");
}

TEST(ops_pad, shapes) {
  auto pad = [](const Shape& s, CoordinateDiff below, CoordinateDiff above,
                const std::string& mode = "constant") {
    return std::make_shared<op::Pad>(param(element::f32, s), param(element::f32, {}), below, above,
                                     mode);
  };
  EXPECT_EQ(pad({2, 3}, {1, 0}, {2, 1})->get_shape(), (Shape{5, 4}));
  EXPECT_EQ(pad({5, 4}, {-1, -2}, {-1, 0})->get_shape(), (Shape{3, 2}));
  EXPECT_EQ(pad({5}, {-2}, {-3})->get_shape(), Shape{0});
  EXPECT_EQ(pad({0}, {2}, {1})->get_shape(), Shape{3});
  EXPECT_EQ(pad({3}, {2}, {2}, "reflect")->get_shape(), Shape{7});
  EXPECT_EQ(pad({3}, {3}, {3}, "symmetric")->get_shape(), Shape{9});
  EXPECT_EQ(pad({3}, {5}, {-1}, "edge")->get_shape(), Shape{7});
  EXPECT_EQ(pad({}, {}, {})->get_shape(), Shape{});
  auto p = pad({2, 2}, {1, 1}, {0, 0}, "edge");
  EXPECT_EQ(p->get_pad_mode(), "edge");
  auto i = std::make_shared<op::Pad>(param(element::i64, {2}), param(element::i64, {}),
                                     CoordinateDiff{1}, CoordinateDiff{1});
  EXPECT_EQ(i->get_element_type(), element::i64);
}

TEST(ops_pad, errors) {
  std::string msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {2}), param(element::f32, {1}), CoordinateDiff{1},
            CoordinateDiff{1});
  });
  EXPECT_EQ(msg, "[Pad] pad value must be a scalar, got shape {1}");
  msg = type_error("Pad", [] {
    op::Pad(param(element::f32, {2}), param(element::i32, {}), CoordinateDiff{1},
            CoordinateDiff{1});
  });
  EXPECT_EQ(msg, "[Pad] pad value type i32 does not match arg type f32");
  msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {2}), param(element::f32, {}), CoordinateDiff{1}, CoordinateDiff{1},
            "wrap");
  });
  EXPECT_TRUE(contains(msg, "'wrap'")) << msg;
  msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {2, 3}), param(element::f32, {}), CoordinateDiff{1},
            CoordinateDiff{1, 1});
  });
  EXPECT_TRUE(contains(msg, "{2,3}")) << msg;
  msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {2, 3}), param(element::f32, {}), CoordinateDiff{0, -2},
            CoordinateDiff{0, -2});
  });
  EXPECT_EQ(msg, "[Pad] padding -2/-2 on axis 1 of arg shape {2,3} gives a negative size");
  msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {3}), param(element::f32, {}), CoordinateDiff{3}, CoordinateDiff{0},
            "reflect");
  });
  EXPECT_EQ(msg, "[Pad] pad_mode 'reflect' can pad axis 0 of arg shape {3} by at most 2 (got 3/0)");
  msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {3}), param(element::f32, {}), CoordinateDiff{0}, CoordinateDiff{4},
            "symmetric");
  });
  EXPECT_TRUE(contains(msg, "at most 3")) << msg;
  msg = shape_error("Pad", [] {
    op::Pad(param(element::f32, {0}), param(element::f32, {}), CoordinateDiff{1}, CoordinateDiff{0},
            "edge");
  });
  EXPECT_TRUE(contains(msg, "size 0")) << msg;
}

TEST(ops_reverse, shapes_and_errors) {
  auto r = std::make_shared<op::Reverse>(param(element::i32, {2, 3}), AxisSet{0, 1});
  EXPECT_EQ(r->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(r->get_element_type(), element::i32);
  auto none = std::make_shared<op::Reverse>(param(element::f32, {}), AxisSet{});
  EXPECT_EQ(none->get_shape(), Shape{});
  std::string msg = shape_error("Reverse", [] {
    op::Reverse(param(element::f32, {2, 3}), AxisSet{2});
  });
  EXPECT_EQ(msg,
            "[Reverse] reversed_axes {2} has axis 2 out of range for arg shape {2,3} (rank 2)");
}

// ------------------------------------------------------------------------------ reductions

namespace {
using ReductionFactory = std::function<std::shared_ptr<Node>(const Output&, const AxisSet&)>;
template <typename T>
std::pair<std::string, ReductionFactory> reduction(const std::string& name) {
  return {name, [](const Output& a, const AxisSet& axes) { return std::make_shared<T>(a, axes); }};
}
}  // namespace

TEST(ops_reduction, shapes_and_errors) {
  std::vector<std::pair<std::string, ReductionFactory>> ops = {
      reduction<op::Sum>("Sum"), reduction<op::Product>("Product"), reduction<op::Max>("Max"),
      reduction<op::Min>("Min")};
  for (const auto& [name, make] : ops) {
    SCOPED_TRACE(name);
    for (auto t : {element::f32, element::f64, element::i32, element::i64}) {
      auto n = make(param(t, {2, 3, 4}), AxisSet{1});
      EXPECT_EQ(n->get_type_name(), name);
      EXPECT_EQ(n->get_shape(), (Shape{2, 4}));
      EXPECT_EQ(n->get_element_type(), t);
    }
    EXPECT_EQ(make(param(element::f32, {2, 3, 4}), AxisSet{0, 2})->get_shape(), Shape{3});
    EXPECT_EQ(make(param(element::f32, {2, 3}), AxisSet{0, 1})->get_shape(), Shape{});
    EXPECT_EQ(make(param(element::f32, {2, 3}), AxisSet{})->get_shape(), (Shape{2, 3}));
    EXPECT_EQ(make(param(element::f32, {0, 3}), AxisSet{0})->get_shape(), Shape{3});
    EXPECT_EQ(make(param(element::f32, {}), AxisSet{})->get_shape(), Shape{});
    std::string msg = shape_error(name, [&] { make(param(element::f32, {2, 3}), AxisSet{0, 2}); });
    EXPECT_EQ(
        msg,
        "[" + name + "] reduction_axes {0,2} has axis 2 out of range for arg shape {2,3} (rank 2)");
    type_error(name, [&] { make(param(element::boolean, {2}), AxisSet{0}); });
  }
}

TEST(ops_index_reduction, shapes_and_errors) {
  auto argmax = std::make_shared<op::ArgMax>(param(element::f32, {2, 3, 4}), 1);
  EXPECT_EQ(argmax->get_shape(), (Shape{2, 4}));
  EXPECT_EQ(argmax->get_element_type(), element::i64);
  auto argmin = std::make_shared<op::ArgMin>(param(element::i32, {5}), 0, element::i32);
  EXPECT_EQ(argmin->get_shape(), Shape{});
  EXPECT_EQ(argmin->get_element_type(), element::i32);
  auto z = std::make_shared<op::ArgMax>(param(element::f64, {0, 3}), 1);
  EXPECT_EQ(z->get_shape(), Shape{0});

  std::string msg = shape_error("ArgMax", [] { op::ArgMax(param(element::f32, {2, 3}), 2); });
  EXPECT_EQ(msg, "[ArgMax] axis 2 is out of range for arg shape {2,3}");
  msg = shape_error("ArgMin", [] { op::ArgMin(param(element::f32, {2, 0}), 1); });
  EXPECT_EQ(msg, "[ArgMin] axis 1 of arg shape {2,0} is empty");
  msg = type_error("ArgMax", [] { op::ArgMax(param(element::f32, {2}), 0, element::f32); });
  EXPECT_EQ(msg, "[ArgMax] index_element_type must be i32 or i64, got f32");
  type_error("ArgMin", [] { op::ArgMin(param(element::boolean, {2}), 0); });
  shape_error("ArgMin", [] { op::ArgMin(param(element::f32, {}), 0); });
}

TEST(ops_softmax, shapes_and_errors) {
  auto s = std::make_shared<op::Softmax>(param(element::f32, {2, 3}), AxisSet{1});
  EXPECT_EQ(s->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(s->get_element_type(), element::f32);
  auto m = std::make_shared<op::Softmax>(param(element::f64, {2, 3, 4}), AxisSet{0, 2});
  EXPECT_EQ(m->get_shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(m->get_axes(), (AxisSet{0, 2}));
  std::string msg = shape_error("Softmax", [] {
    op::Softmax(param(element::f32, {2, 3}), AxisSet{2});
  });
  EXPECT_EQ(msg, "[Softmax] axes {2} has axis 2 out of range for arg shape {2,3} (rank 2)");
  msg = type_error("Softmax", [] { op::Softmax(param(element::i32, {2, 3}), AxisSet{1}); });
  EXPECT_EQ(msg, "[Softmax] arg0 has element type i32; expected a floating-point type (f32, f64)");
}

TEST(ops_one_hot, shapes_and_errors) {
  auto h = std::make_shared<op::OneHot>(param(element::i32, {3}), Shape{3, 5}, 1);
  EXPECT_EQ(h->get_shape(), (Shape{3, 5}));
  EXPECT_EQ(h->get_element_type(), element::i32);
  auto h0 = std::make_shared<op::OneHot>(param(element::f32, {2, 3}), Shape{4, 2, 3}, 0);
  EXPECT_EQ(h0->get_shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(h0->get_element_type(), element::f32);
  auto s = std::make_shared<op::OneHot>(param(element::i64, {}), Shape{4}, 0);
  EXPECT_EQ(s->get_shape(), Shape{4});
  std::string msg = shape_error("OneHot", [] {
    op::OneHot(param(element::i32, {3}), Shape{3, 5}, 2);
  });
  EXPECT_EQ(msg, "[OneHot] one_hot_axis 2 is out of range for result shape {3,5}");
  msg = shape_error("OneHot", [] { op::OneHot(param(element::i32, {3}), Shape{3, 5}, 0); });
  EXPECT_EQ(
      msg, "[OneHot] arg shape {3} does not match result shape {3,5} without one_hot_axis 0 ({5})");
  type_error("OneHot", [] { op::OneHot(param(element::boolean, {3}), Shape{3, 2}, 1); });
}

// ------------------------------------------------------------------- multi-output nodes

TEST(ops_get_output_element, shapes_and_errors) {
  auto x = param(element::f32, {4, 3});
  auto bn = std::make_shared<op::BatchNormTraining>(x, param(element::f32, {3}),
                                                    param(element::f32, {3}), 1e-5);
  auto mean = std::make_shared<op::GetOutputElement>(bn, 1);
  EXPECT_EQ(mean->get_shape(), Shape{3});
  EXPECT_EQ(mean->get_element_type(), element::f32);
  EXPECT_EQ(mean->input_value(0), bn->output(1));
  EXPECT_EQ(mean->get_n(), 1u);
  EXPECT_EQ(mean->attributes_string(), "n=1");
  EXPECT_EQ(op::get_output_element(bn->output(2))->get_type_name(), "GetOutputElement");
  auto all = op::get_output_elements(bn);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->get_shape(), (Shape{4, 3}));
  EXPECT_EQ(all[2]->input_value(0), bn->output(2));
  auto msg = shape_error("GetOutputElement", [&] { op::GetOutputElement(bn, 3); });
  EXPECT_EQ(msg, "[GetOutputElement] output index 3 is out of range for " + bn->get_name() +
                     ", which has 3 outputs");
  msg = shape_error("GetOutputElement", [&] { op::GetOutputElement(x, 1); });
  EXPECT_TRUE(contains(msg, "which has 1 output")) << msg;
  msg = shape_error("GetOutputElement", [&] { mean->clone_with_new_inputs({bn->output(2)}); });
  EXPECT_EQ(msg, "[GetOutputElement] n = 1 but the input is output 2 of " + bn->get_name());
  // A multi-output node has no single shape.
  msg = shape_error("BatchNormTraining", [&] { bn->get_shape(); });
  EXPECT_TRUE(contains(msg, "3 outputs")) << msg;
}

// An op built on an output its input node does not have is refused by name, whether the
// op is being constructed (the base class cannot call the op's virtual name then) or cloned.
TEST(ops_inputs, nonexistent_output_is_refused_naming_the_op_and_the_count) {
  auto x = param(element::f32, {2, 3});
  x->set_friendly_name("x");
  auto msg = shape_error("Relu", [&] { op::Relu(Output(x, 5)); });
  EXPECT_EQ(msg, "[Relu] input 0 refers to output 5 of x (Parameter), which has 1 output");
  msg = shape_error("Add", [&] { std::make_shared<op::Add>(x, Output(x, 1)); });
  EXPECT_EQ(msg, "[Add] input 1 refers to output 1 of x (Parameter), which has 1 output");
  auto bn = std::make_shared<op::BatchNormTraining>(
      param(element::f32, {4, 3}), param(element::f32, {3}), param(element::f32, {3}), 1e-5);
  msg = shape_error("Negative", [&] { op::Negative(Output(bn, 3)); });
  EXPECT_TRUE(contains(msg, "refers to output 3 of " + bn->get_name() +
                                " (BatchNormTraining), which has 3 outputs"))
      << msg;
  auto relu = std::make_shared<op::Relu>(x);
  msg = shape_error("Relu", [&] { relu->clone_with_new_inputs({Output(x, 2)}); });
  EXPECT_TRUE(contains(msg, "refers to output 2 of x")) << msg;
  msg = shape_error("Relu", [&] { op::Relu{Output{}}; });
  EXPECT_EQ(msg, "[Relu] input 0 is a null node");
}

// ------------------------------------------------------------------- batch normalization

TEST(ops_batch_norm, training_shapes_and_input_order) {
  auto x = param(element::f32, {8, 3, 5, 5});
  auto gamma = param(element::f32, {3}), beta = param(element::f32, {3});
  auto bn = std::make_shared<op::BatchNormTraining>(x, gamma, beta, 1e-3);
  ASSERT_EQ(bn->get_output_size(), 3u);
  EXPECT_EQ(bn->get_output_shape(0), (Shape{8, 3, 5, 5}));
  EXPECT_EQ(bn->get_output_shape(1), Shape{3});
  EXPECT_EQ(bn->get_output_shape(2), Shape{3});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(bn->get_output_element_type(i), element::f32);
  // nGraph's order: gamma, beta, input.
  EXPECT_EQ(bn->input_value(op::BatchNormBase::INPUT_GAMMA), Output(gamma));
  EXPECT_EQ(bn->input_value(op::BatchNormBase::INPUT_BETA), Output(beta));
  EXPECT_EQ(bn->input_value(op::BatchNormBase::INPUT_DATA), Output(x));
  EXPECT_EQ(bn->get_eps_value(), 1e-3);
  EXPECT_EQ(bn->attributes_string(), "epsilon=0.001");
  auto x2 = param(element::f64, {2, 4}), g2 = param(element::f64, {4});
  auto copy = std::static_pointer_cast<op::BatchNormTraining>(
      bn->clone_with_new_inputs({g2, param(element::f64, {4}), x2}));
  EXPECT_EQ(copy->get_eps_value(), 1e-3);
  EXPECT_EQ(copy->get_output_shape(0), (Shape{2, 4}));
  EXPECT_EQ(copy->get_output_shape(1), Shape{4});
  EXPECT_EQ(copy->get_output_element_type(2), element::f64);
  EXPECT_TRUE(copy->attributes_equal(*bn));
}

TEST(ops_batch_norm, inference_and_backprop_shapes) {
  auto f = [](const Shape& s) { return param(element::f64, s); };
  auto x = f({2, 5}), g = f({5}), b = f({5}), m = f({5}), v = f({5}), d = f({2, 5});
  auto bi = std::make_shared<op::BatchNormInference>(x, g, b, m, v, 0.0);
  EXPECT_EQ(bi->get_output_size(), 1u);
  EXPECT_EQ(bi->get_shape(), (Shape{2, 5}));
  EXPECT_EQ(bi->get_element_type(), element::f64);
  EXPECT_EQ(bi->input_value(2), Output(x));
  EXPECT_EQ(bi->input_value(3), Output(m));
  EXPECT_EQ(bi->input_value(4), Output(v));
  auto bp = std::make_shared<op::BatchNormTrainingBackprop>(x, g, b, m, v, d, 1e-5);
  ASSERT_EQ(bp->get_output_size(), 3u);
  EXPECT_EQ(bp->get_output_shape(0), (Shape{2, 5}));
  EXPECT_EQ(bp->get_output_shape(1), Shape{5});
  EXPECT_EQ(bp->get_output_shape(2), Shape{5});
  EXPECT_EQ(bp->input_value(op::BatchNormBase::INPUT_DELTA), Output(d));
  // Rank 2 is the smallest; an empty batch is allowed.
  auto empty = std::make_shared<op::BatchNormTraining>(f({0, 5, 2}), g, b, 1e-5);
  EXPECT_EQ(empty->get_output_shape(1), Shape{5});
}

TEST(ops_batch_norm, shape_errors) {
  auto f = [](const Shape& s) { return param(element::f32, s); };
  auto msg = shape_error("BatchNormTraining",
                         [&] { op::BatchNormTraining(f({3}), f({3}), f({3}), 1e-5); });
  EXPECT_EQ(msg, "[BatchNormTraining] input shape {3} must have rank >= 2 (axis 1 is the "
                 "channel axis)");
  msg = shape_error("BatchNormTraining",
                    [&] { op::BatchNormTraining(f({2, 0}), f({0}), f({0}), 1e-5); });
  EXPECT_EQ(msg, "[BatchNormTraining] input shape {2,0} has no channels (axis 1 is empty)");
  msg = shape_error("BatchNormTraining",
                    [&] { op::BatchNormTraining(f({2, 3}), f({4}), f({3}), 1e-5); });
  EXPECT_EQ(msg, "[BatchNormTraining] gamma shape {4} must be {3}, the channel count of input "
                 "shape {2,3}");
  msg = shape_error("BatchNormTraining",
                    [&] { op::BatchNormTraining(f({2, 3, 4}), f({3}), f({3, 1}), 1e-5); });
  EXPECT_TRUE(contains(msg, "beta shape {3,1} must be {3}")) << msg;
  msg = shape_error("BatchNormInference", [&] {
    op::BatchNormInference(f({2, 3}), f({3}), f({3}), f({2}), f({3}), 1e-5);
  });
  EXPECT_TRUE(contains(msg, "mean shape {2} must be {3}")) << msg;
  msg = shape_error("BatchNormInference", [&] {
    op::BatchNormInference(f({2, 3}), f({3}), f({3}), f({3}), f({}), 1e-5);
  });
  EXPECT_TRUE(contains(msg, "variance shape {} must be {3}")) << msg;
  msg = shape_error("BatchNormTrainingBackprop", [&] {
    op::BatchNormTrainingBackprop(f({2, 3}), f({3}), f({3}), f({3}), f({3}), f({3, 2}), 1e-5);
  });
  EXPECT_EQ(msg, "[BatchNormTrainingBackprop] delta shape {3,2} must equal input shape {2,3}");
  msg = shape_error("BatchNormInference", [&] {
    op::BatchNormInference(f({2, 3}), f({3}), f({3}), f({3}), f({3}), -1.0);
  });
  EXPECT_EQ(msg, "[BatchNormInference] epsilon must be finite and >= 0, got -1");
  shape_error("BatchNormTraining", [&] {
    op::BatchNormTraining(f({2, 3}), f({3}), f({3}), std::numeric_limits<double>::quiet_NaN());
  });
  msg = shape_error("BatchNormTraining", [&] {
    OpRegistry::get().create("BatchNormTraining")->clone_with_new_inputs({f({2, 3})});
  });
  EXPECT_EQ(msg, "[BatchNormTraining] expects 3 inputs, got 1");
}

TEST(ops_batch_norm, type_errors) {
  auto f = [](const Shape& s) { return param(element::f32, s); };
  auto msg = type_error("BatchNormTraining", [&] {
    op::BatchNormTraining(param(element::i32, {2, 3}), f({3}), f({3}), 1e-5);
  });
  EXPECT_EQ(msg, "[BatchNormTraining] input has element type i32; expected f32 or f64");
  msg = type_error("BatchNormTraining", [&] {
    op::BatchNormTraining(f({2, 3}), param(element::f64, {3}), f({3}), 1e-5);
  });
  EXPECT_EQ(msg, "[BatchNormTraining] element type of gamma (f64) does not match input (f32)");
  msg = type_error("BatchNormInference", [&] {
    op::BatchNormInference(f({2, 3}), f({3}), f({3}), f({3}), param(element::f64, {3}), 1e-5);
  });
  EXPECT_TRUE(contains(msg, "element type of variance (f64)")) << msg;
  msg = type_error("BatchNormTrainingBackprop", [&] {
    op::BatchNormTrainingBackprop(f({2, 3}), f({3}), f({3}), f({3}), f({3}),
                                  param(element::f64, {2, 3}), 1e-5);
  });
  EXPECT_TRUE(contains(msg, "element type of delta (f64)")) << msg;
}

// ------------------------------------------------------------------------- pooling, LRN

TEST(ops_pooling, shapes) {
  auto f = [](const Shape& s) { return param(element::f32, s); };
  // floor((in + below + above - window) / stride) + 1 per spatial axis; N and C kept.
  auto m = std::make_shared<op::MaxPool>(f({2, 3, 7}), Shape{3}, Strides{2}, Shape{1}, Shape{0});
  EXPECT_EQ(m->get_shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(m->get_element_type(), element::f32);
  auto c = std::make_shared<op::MaxPool>(f({2, 3, 7}), Shape{3}, Strides{2}, Shape{1}, Shape{0},
                                         true);
  EXPECT_EQ(c->get_shape(), (Shape{2, 3, 4}));  // ceil(5 / 2) + 1
  EXPECT_EQ(op::effective_padding_above(Shape{2, 3, 7}, *c), Shape{1});
  EXPECT_EQ(op::effective_padding_above(Shape{2, 3, 7}, *m), Shape{0});
  auto a = std::make_shared<op::AvgPool>(param(element::f64, {1, 2, 5, 6}), Shape{2, 3},
                                         Strides{2, 1}, Shape{0, 1}, Shape{1, 1}, false);
  EXPECT_EQ(a->get_shape(), (Shape{1, 2, 3, 6}));
  EXPECT_EQ(a->get_element_type(), element::f64);
  auto a3 = std::make_shared<op::AvgPool>(f({1, 2, 4, 5, 3}), Shape{2, 2, 2}, Strides{1, 2, 1},
                                          Shape{1, 0, 1}, Shape{0, 1, 1}, true);
  EXPECT_EQ(a3->get_shape(), (Shape{1, 2, 4, 3, 4}));
  auto mb = std::make_shared<op::MaxPoolBackprop>(f({2, 3, 7}), f({2, 3, 3}), Shape{3}, Strides{2},
                                                  Shape{1}, Shape{0});
  EXPECT_EQ(mb->get_shape(), (Shape{2, 3, 7}));
  auto ab = std::make_shared<op::AvgPoolBackprop>(Shape{2, 3, 7}, f({2, 3, 4}), Shape{3},
                                                  Strides{2}, Shape{1}, Shape{1}, true);
  EXPECT_EQ(ab->get_shape(), (Shape{2, 3, 7}));
  auto l = std::make_shared<op::LRN>(f({2, 5, 3}), 1e-4, 0.75, 2.0, 3);
  EXPECT_EQ(l->get_shape(), (Shape{2, 5, 3}));
  EXPECT_EQ(l->get_nsize(), 3u);
  auto lb = std::make_shared<op::LRNBackprop>(f({2, 5, 3}), f({2, 5, 3}), 1e-4, 0.75, 2.0, 3);
  EXPECT_EQ(lb->get_shape(), (Shape{2, 5, 3}));
}

TEST(ops_pooling, errors) {
  auto f = [](const Shape& s) { return param(element::f32, s); };
  auto max_pool = [&](const Shape& data, const Shape& w, const Strides& s, const Shape& b,
                      const Shape& a) { op::MaxPool(f(data), w, s, b, a); };
  std::string msg = shape_error("MaxPool", [&] { max_pool({2, 3}, {2}, {1}, {0}, {0}); });
  EXPECT_EQ(msg, "[MaxPool] data shape {2,3} must have rank 3 to 5 (N, C and 1 to 3 spatial axes)");
  msg = shape_error("MaxPool", [&] { max_pool({1, 1, 4, 4}, {2}, {1, 1}, {0, 0}, {0, 0}); });
  EXPECT_EQ(msg, "[MaxPool] window_shape {2} must have one value per spatial axis of data shape {1,1,4,4} (2)");
  msg = shape_error("MaxPool", [&] { max_pool({1, 1, 4, 4}, {2, 2}, {1, 1}, {0}, {0, 0}); });
  EXPECT_EQ(msg, "[MaxPool] padding_below {0} must have one value per spatial axis of data shape {1,1,4,4} "
                 "(2)");
  msg = shape_error("MaxPool", [&] { max_pool({1, 1, 4, 4}, {2, 2}, {1, 0}, {0, 0}, {0, 0}); });
  EXPECT_EQ(msg, "[MaxPool] window_movement_strides {1,0} is 0 at axis 3 of data shape {1,1,4,4}");
  msg = shape_error("MaxPool", [&] { max_pool({1, 1, 4, 4}, {0, 2}, {1, 1}, {0, 0}, {0, 0}); });
  EXPECT_EQ(msg, "[MaxPool] window_shape {0,2} is 0 at axis 2 of data shape {1,1,4,4}");
  msg = shape_error("MaxPool", [&] { max_pool({1, 1, 4, 4}, {2, 6}, {1, 1}, {0, 1}, {0, 0}); });
  EXPECT_EQ(msg, "[MaxPool] window_shape {2,6} is larger than the padded data at axis 3 (6 > 5: "
                 "data shape {1,1,4,4}, padding_below {0,1}, padding_above {0,0})");
  type_error("MaxPool", [&] { op::MaxPool(param(element::i32, {1, 1, 4}), {2}, {1}, {0}, {0}); });
  // A window with no data cell has no average unless the padding counts.
  msg = shape_error("AvgPool", [&] {
    op::AvgPool(f({1, 1, 4}), Shape{2}, Strides{1}, Shape{2}, Shape{0}, false);
  });
  EXPECT_EQ(msg, "[AvgPool] a window at axis 2 lies entirely in the padding (data shape {1,1,4}, "
                 "window_shape {2}, padding_below {2}, padding_above {0}): its average has no data "
                 "cells unless include_padding_in_avg_computation is set");
  EXPECT_NO_THROW(op::AvgPool(f({1, 1, 4}), Shape{2}, Strides{1}, Shape{2}, Shape{0}, true));
  EXPECT_NO_THROW(op::MaxPool(f({1, 1, 4}), Shape{2}, Strides{1}, Shape{2}, Shape{0}));
  msg = shape_error("AvgPool", [&] {  // ceil mode: the last window starts past the data
    op::AvgPool(f({1, 1, 5}), Shape{1}, Strides{3}, Shape{0}, Shape{0}, false, true);
  });
  EXPECT_TRUE(contains(msg, "ceil_mode")) << msg;
  msg = shape_error("MaxPoolBackprop", [&] {
    op::MaxPoolBackprop(f({1, 1, 4}), f({1, 1, 2}), Shape{2}, Strides{1}, Shape{0}, Shape{0});
  });
  EXPECT_EQ(msg, "[MaxPoolBackprop] delta shape {1,1,2} does not match the pooling result shape "
                 "{1,1,3} of forward argument shape {1,1,4}");
  msg = type_error("MaxPoolBackprop", [&] {
    op::MaxPoolBackprop(f({1, 1, 4}), param(element::f64, {1, 1, 3}), Shape{2}, Strides{1},
                        Shape{0}, Shape{0});
  });
  EXPECT_EQ(msg, "[MaxPoolBackprop] element types of arg_forward (f32) and delta (f64) must match");
  msg = shape_error("AvgPoolBackprop", [&] {
    op::AvgPoolBackprop(Shape{1, 1, 4}, f({1, 1, 4}), Shape{2}, Strides{1}, Shape{0}, Shape{0},
                        false);
  });
  EXPECT_TRUE(contains(msg, "delta shape {1,1,4}")) << msg;
  msg = shape_error("LRN", [&] { op::LRN(f({2, 3}), 1, 0.5, 1, 3); });
  EXPECT_EQ(msg, "[LRN] arg shape {2,3} must have rank >= 3 (N, C and spatial axes)");
  msg = shape_error("LRN", [&] { op::LRN(f({2, 3, 4}), 1, 0.5, 1, 0); });
  EXPECT_EQ(msg, "[LRN] size must be at least 1, got 0");
  type_error("LRN", [&] { op::LRN(param(element::i64, {2, 3, 4}), 1, 0.5, 1, 3); });
  msg = shape_error("LRNBackprop", [&] { op::LRNBackprop(f({2, 3, 4}), f({2, 3, 5}), 1, 0.5, 1, 3); });
  EXPECT_EQ(msg, "[LRNBackprop] delta shape {2,3,5} does not match arg shape {2,3,4}");
}

TEST(ops_pooling, attributes_round_trip) {
  auto f = [](const Shape& s) { return param(element::f32, s); };
  NodeVector nodes = {
      std::make_shared<op::MaxPool>(f({1, 2, 5, 5}), Shape{2, 2}, Strides{2, 2}, Shape{0, 1},
                                    Shape{1, 0}, true),
      std::make_shared<op::AvgPool>(f({1, 2, 5}), Shape{3}, Strides{1}, Shape{1}, Shape{1}, true,
                                    true),
      std::make_shared<op::AvgPoolBackprop>(Shape{1, 2, 5}, f({1, 2, 5}), Shape{3}, Strides{1},
                                            Shape{1}, Shape{1}, false),
      std::make_shared<op::LRN>(f({1, 4, 2}), 0.25, 0.75, 2.0, 3),
  };
  for (const auto& node : nodes) {
    SCOPED_TRACE(node->description());
    OutputVector inputs;
    for (const auto& in : node->input_values()) inputs.push_back(f(in.get_shape()));
    auto copy = node->clone_with_new_inputs(inputs);
    EXPECT_EQ(copy->attributes_string(), node->attributes_string());
    EXPECT_TRUE(copy->attributes_equal(*node));
    EXPECT_EQ(copy->get_shape(), node->get_shape());
  }
  EXPECT_EQ(nodes[0]->attributes_string(),
            "window_shape={2,2}, window_movement_strides={2,2}, padding_below={0,1}, "
            "padding_above={1,0}, ceil_mode=true");
  EXPECT_EQ(nodes[3]->attributes_string(), "alpha=0.25, beta=0.75, bias=2, size=3");
}

// ----------------------------------------------------------------------------- OpRegistry

TEST(op_registry, lists_every_op_of_the_core) {
  std::set<std::string> expected = {
      "Parameter", "Constant", "Result",    "Add",      "Subtract",  "Multiply",   "Divide",
      "Power",     "Maximum",  "Minimum",   "Negative", "Abs",       "Exp",        "Log",
      "Sqrt",      "Sign",     "Floor",     "Ceiling",  "Sin",       "Cos",        "Tanh",
      "Sigmoid",   "Relu",     "Dot",       "MatMul",   "Broadcast", "Reshape",    "Slice",
      "Concat",    "Pad",      "Reverse",   "Sum",      "Max",       "Min",        "Product",
      "ArgMax",    "ArgMin",   "Softmax",   "OneHot",   "Convert",   "Select",     "Equal",
      "NotEqual",  "Greater",  "GreaterEq", "Less",     "LessEq",    "LogicalAnd", "LogicalOr",
      "LogicalNot", "Erf",      "Gelu",      "Convolution", "ConvolutionBackpropData",
      "ConvolutionBackpropFilters", "GetOutputElement",   "BatchNormTraining",
      "BatchNormInference",     "BatchNormTrainingBackprop", "MaxPool",  "AvgPool",
      "MaxPoolBackprop", "AvgPoolBackprop", "LRN", "LRNBackprop", "Tan", "Asin", "Acos",
      "Atan", "Sinh", "Cosh", "TopK"};
  auto names = OpRegistry::get().names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  std::set<std::string> got(names.begin(), names.end());
  EXPECT_EQ(got.size(), names.size()) << "duplicate names";
  for (const auto& n : expected) EXPECT_TRUE(got.count(n)) << n << " is not registered";
  for (const auto& n : names) {
    EXPECT_TRUE(OpRegistry::get().contains(n));
    auto node = OpRegistry::get().create(n);
    ASSERT_TRUE(node) << n;
    EXPECT_EQ(node->get_type_name(), n);
    EXPECT_EQ(node->get_input_size(), 0u) << n;
  }
}

TEST(op_registry, unknown_name_throws) {
  EXPECT_FALSE(OpRegistry::get().contains("NoSuchOp"));
  std::string msg = error_of<std::invalid_argument>([] { OpRegistry::get().create("NoSuchOp"); });
  EXPECT_TRUE(contains(msg, "NoSuchOp")) << msg;
  EXPECT_THROW(OpRegistry::get().create("add"), std::invalid_argument);  // case-sensitive
}

TEST(op_registry, created_node_takes_inputs) {
  auto a = param(element::f32, {2, 3});
  auto b = param(element::f32, {2, 3});
  auto add = OpRegistry::get().create("Add")->clone_with_new_inputs({a, b});
  EXPECT_EQ(add->get_type_name(), "Add");
  EXPECT_EQ(add->get_shape(), (Shape{2, 3}));
  EXPECT_EQ(add->input_value(0), Output(a));
  EXPECT_EQ(add->input_value(1), Output(b));
  auto relu = OpRegistry::get().create("Relu")->clone_with_new_inputs({a});
  EXPECT_EQ(relu->get_shape(), (Shape{2, 3}));
  // Validation runs on the new inputs.
  shape_error("Add", [&] {
    OpRegistry::get().create("Add")->clone_with_new_inputs({a, param(element::f32, {3})});
  });
  shape_error("Relu", [&] { OpRegistry::get().create("Relu")->clone_with_new_inputs({a, b}); });
}

TEST(op_registry, clone_with_new_inputs_keeps_attributes) {
  auto f = [](const Shape& s) { return param(element::f32, s); };
  auto i = [](const Shape& s) { return param(element::i64, s); };
  auto b = [](const Shape& s) { return param(element::boolean, s); };
  NodeVector nodes = {
      std::make_shared<op::Add>(f({2, 1}), f({3}), "numpy"),
      std::make_shared<op::Divide>(i({2}), i({}), "numpy", false),
      std::make_shared<op::Select>(b({3}), f({2, 3}), f({}), "numpy"),
      std::make_shared<op::Convert>(f({2}), element::i32),
      std::make_shared<op::Dot>(f({2, 3}), f({4}), 0),
      std::make_shared<op::MatMul>(f({3, 2}), f({4, 3}), true, true),
      std::make_shared<op::Broadcast>(f({3}), Shape{2, 3}, AxisSet{0}),
      std::make_shared<op::Reshape>(f({2, 3}), AxisVector{1, 0}, Shape{6}),
      std::make_shared<op::Slice>(f({4, 5}), Coordinate{1, 0}, Coordinate{4, 5}, Strides{2, 3}),
      std::make_shared<op::Concat>(OutputVector{f({2, 1}), f({2, 2})}, 1),
      std::make_shared<op::Pad>(f({3}), f({}), CoordinateDiff{2}, CoordinateDiff{-1}, "reflect"),
      std::make_shared<op::Reverse>(f({2, 3}), AxisSet{1}),
      std::make_shared<op::Sum>(f({2, 3}), AxisSet{0}),
      std::make_shared<op::Product>(f({2, 3}), AxisSet{1}),
      std::make_shared<op::Max>(f({2, 3}), AxisSet{0, 1}),
      std::make_shared<op::Min>(f({2, 3}), AxisSet{}),
      std::make_shared<op::ArgMax>(f({2, 3}), 1, element::i32),
      std::make_shared<op::ArgMin>(f({2, 3}), 0),
      std::make_shared<op::Softmax>(f({2, 3}), AxisSet{0, 1}),
      std::make_shared<op::OneHot>(i({3}), Shape{3, 4}, 1),
      std::make_shared<op::Parameter>(element::i32, Shape{7}),
      std::make_shared<op::Constant>(element::f64, Shape{2}, std::vector<double>{1.5, 2.5}),
  };
  for (const auto& node : nodes) {
    SCOPED_TRACE(node->description());
    // New inputs of the same types and shapes.
    OutputVector inputs;
    for (const auto& in : node->input_values())
      inputs.push_back(param(in.get_element_type(), in.get_shape()));
    auto copy = node->clone_with_new_inputs(inputs);
    EXPECT_EQ(copy->get_type_name(), node->get_type_name());
    EXPECT_NE(copy->get_instance_id(), node->get_instance_id());
    EXPECT_EQ(copy->attributes_string(), node->attributes_string());
    EXPECT_TRUE(copy->attributes_equal(*node));
    EXPECT_EQ(copy->get_shape(), node->get_shape());
    EXPECT_EQ(copy->get_element_type(), node->get_element_type());
    ASSERT_EQ(copy->get_input_size(), inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) EXPECT_EQ(copy->input_value(k), inputs[k]);
  }
  // Spot-check a few attributes through their getters.
  auto mm = std::make_shared<op::MatMul>(f({3, 2}), f({4, 3}), true, true);
  auto mm2 =
      std::static_pointer_cast<op::MatMul>(mm->clone_with_new_inputs({f({3, 2}), f({4, 3})}));
  EXPECT_TRUE(mm2->get_transpose_a());
  EXPECT_TRUE(mm2->get_transpose_b());
  auto pad =
      std::make_shared<op::Pad>(f({3}), f({}), CoordinateDiff{2}, CoordinateDiff{-1}, "reflect");
  auto pad2 = std::static_pointer_cast<op::Pad>(pad->clone_with_new_inputs({f({3}), f({})}));
  EXPECT_EQ(pad2->get_pad_mode(), "reflect");
  EXPECT_EQ(pad2->get_padding_below(), CoordinateDiff{2});
  EXPECT_EQ(pad2->get_padding_above(), CoordinateDiff{-1});
  EXPECT_EQ(pad2->get_shape(), Shape{4});
  // Cloning onto inputs of another shape re-infers the output shape with the same attributes.
  auto sum = std::make_shared<op::Sum>(f({2, 3}), AxisSet{0});
  EXPECT_EQ(sum->clone_with_new_inputs({f({5, 7})})->get_shape(), Shape{7});
  auto add = std::make_shared<op::Add>(f({2, 1}), f({3}), "numpy");
  EXPECT_EQ(add->clone_with_new_inputs({f({4, 1}), f({1, 6})})->get_shape(), (Shape{4, 6}));
  // Attributes differ: not equal.
  auto sum1 = std::make_shared<op::Sum>(f({2, 3}), AxisSet{1});
  EXPECT_FALSE(sum->attributes_equal(*sum1));
}

TEST(node, names_and_description) {
  auto a = param(element::f32, {2, 3});
  a->set_friendly_name("A");
  auto b = param(element::f32, {3});
  auto add = std::make_shared<op::Add>(a, b, "numpy");
  EXPECT_EQ(a->get_name(), "A");
  EXPECT_EQ(add->get_name(), "Add_" + std::to_string(add->get_instance_id()));
  std::string d = add->description();
  EXPECT_TRUE(starts_with(d, add->get_name() + "(A, " + b->get_name() + ") -> f32{2,3}")) << d;
  EXPECT_TRUE(contains(d, "auto_broadcast='numpy'")) << d;
}

// ------------------------------------------------------------------------- enum attributes

namespace {
// Sets one string attribute to `value` and remembers the value it had, as the Python
// bindings' keyword loader does.
class StringSetter : public AttributeVisitor {
 public:
  StringSetter(std::string name, std::string value)
      : m_name(std::move(name)), m_value(std::move(value)) {}
  using AttributeVisitor::on;
  void on(const std::string&, bool&) override {}
  void on(const std::string&, int64_t&) override {}
  void on(const std::string&, double&) override {}
  void on(const std::string& name, std::string& v) override {
    if (name != m_name) return;
    seen = v;
    v = m_value;
  }
  void on(const std::string&, element::Type&) override {}
  void on(const std::string&, std::vector<int64_t>&) override {}
  std::string seen;

 private:
  std::string m_name, m_value;
};
}  // namespace

TEST(enum_attributes, names_round_trip) {
  for (auto b : {op::AutoBroadcast::none, op::AutoBroadcast::numpy})
    EXPECT_EQ(op::auto_broadcast_from_string(op::to_string(b)), b);
  using distributed::ReduceOp;
  for (auto r : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min, ReduceOp::prod})
    EXPECT_EQ(distributed::reduce_op_from_string(distributed::to_string(r)), r);
  EXPECT_EQ(error_of<std::invalid_argument>([] { op::auto_broadcast_from_string("pdpd"); }),
            "auto_broadcast must be 'none' or 'numpy', got 'pdpd'");
  EXPECT_EQ(error_of<std::invalid_argument>([] { distributed::reduce_op_from_string("avg"); }),
            "unknown reduce_op 'avg' (expected sum, mean, max, min or prod)");
}

TEST(enum_attributes, print_by_name) {
  using distributed::ReduceOp;
  auto a = param(element::f32, {2});
  auto c = param(element::boolean, {2});
  EXPECT_EQ(std::make_shared<op::Add>(a, a, op::AutoBroadcast::numpy)->attributes_string(),
            "auto_broadcast='numpy'");
  EXPECT_EQ(std::make_shared<op::Select>(c, a, a)->attributes_string(), "auto_broadcast='none'");
  EXPECT_EQ(std::make_shared<op::AllReduce>(a, ReduceOp::max)->attributes_string(),
            "reduce_op='max', compression='none', error_feedback=false");
  EXPECT_EQ(std::make_shared<op::ReduceScatter>(a, ReduceOp::mean)->attributes_string(),
            "reduce_op='mean', axis=0");
  EXPECT_EQ(std::make_shared<op::AllReduce>(a, ReduceOp::prod)->collective_signature(),
            "AllReduce f32{2} prod");
  // The typed and the named constructors build the same op; CSE compares the names.
  auto typed = std::make_shared<op::Multiply>(a, a, op::AutoBroadcast::numpy);
  auto named = std::make_shared<op::Multiply>(a, a, "numpy");
  EXPECT_EQ(named->get_auto_broadcast(), op::AutoBroadcast::numpy);
  EXPECT_TRUE(typed->attributes_equal(*named));
  EXPECT_EQ(typed->attributes_hash(), named->attributes_hash());
  EXPECT_FALSE(typed->attributes_equal(*std::make_shared<op::Multiply>(a, a)));
  EXPECT_EQ(std::make_shared<op::AllReduce>(a, "min")->get_reduce_op(), ReduceOp::min);
  EXPECT_EQ(std::make_shared<op::AllReduce>(a)->get_reduce_op(), ReduceOp::sum);
  EXPECT_EQ(std::make_shared<op::Select>(c, a, a, "numpy")->get_auto_broadcast(),
            op::AutoBroadcast::numpy);
}

TEST(enum_attributes, load_by_name) {
  using distributed::ReduceOp;
  auto a = param(element::f32, {2});
  auto add = std::make_shared<op::Add>(a, a);
  StringSetter to_numpy("auto_broadcast", "numpy");
  add->visit_attributes(to_numpy);
  EXPECT_EQ(to_numpy.seen, "none");
  EXPECT_EQ(add->get_auto_broadcast(), op::AutoBroadcast::numpy);
  auto ar = std::make_shared<op::AllReduce>(a);
  StringSetter to_min("reduce_op", "min");
  ar->visit_attributes(to_min);
  EXPECT_EQ(to_min.seen, "sum");
  EXPECT_EQ(ar->get_reduce_op(), ReduceOp::min);
  // An unknown name: std::invalid_argument naming the attribute and the value (the bindings
  // add the op's name); the op keeps its value.
  StringSetter bad("reduce_op", "avg");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { ar->visit_attributes(bad); }),
            "unknown reduce_op 'avg' (expected sum, mean, max, min or prod)");
  EXPECT_EQ(ar->get_reduce_op(), ReduceOp::min);
  StringSetter bad_mode("auto_broadcast", "pdpd");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { add->visit_attributes(bad_mode); }),
            "auto_broadcast must be 'none' or 'numpy', got 'pdpd'");
  EXPECT_EQ(add->get_auto_broadcast(), op::AutoBroadcast::numpy);
}

TEST(enum_attributes, unknown_name_in_constructor_names_the_op) {
  auto a = param(element::f32, {2});
  EXPECT_EQ(shape_error("AllReduce", [&] { std::make_shared<op::AllReduce>(a, "avg"); }),
            "[AllReduce] unknown reduce_op 'avg' (expected sum, mean, max, min or prod)");
  EXPECT_EQ(shape_error("ReduceScatter", [&] { std::make_shared<op::ReduceScatter>(a, "avg"); }),
            "[ReduceScatter] unknown reduce_op 'avg' (expected sum, mean, max, min or prod)");
  auto c = param(element::boolean, {2});
  EXPECT_EQ(shape_error("Select", [&] { std::make_shared<op::Select>(c, a, a, "pdpd"); }),
            "[Select] auto_broadcast must be 'none' or 'numpy', got 'pdpd'");
}

// Compression is an attribute of f32 sum and mean AllReduces only; the error names the op.
TEST(allreduce_compression, only_f32_sum_and_mean) {
  using distributed::ReduceOp;
  using distributed::Wire;
  auto f = param(element::f32, {2});
  auto i = param(element::i32, {2});
  auto ok = std::make_shared<op::AllReduce>(f, ReduceOp::mean);
  ok->set_compression(Wire::bf16, true);
  EXPECT_EQ(ok->attributes_string(), "reduce_op='mean', compression='bf16', error_feedback=true");
  EXPECT_EQ(ok->collective_signature(), "AllReduce f32{2} mean compression=bf16+error_feedback");
  auto expect_refused = [](const std::shared_ptr<op::AllReduce>& ar, Wire w, bool ef, const std::string& part) {
    try {
      ar->set_compression(w, ef);
      ADD_FAILURE() << "accepted: " << part;
    } catch (const std::exception& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("AllReduce"), std::string::npos) << msg;
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  };
  expect_refused(std::make_shared<op::AllReduce>(i, ReduceOp::sum), Wire::fp16, false,
                 "compression 'fp16' applies to f32 sum and mean only, got i32 sum");
  expect_refused(std::make_shared<op::AllReduce>(f, ReduceOp::max), Wire::bf16, false, "got f32 max");
  expect_refused(std::make_shared<op::AllReduce>(f, ReduceOp::sum), Wire::f32, true,
                 "error_feedback needs compression 'bf16' or 'fp16'");
}
