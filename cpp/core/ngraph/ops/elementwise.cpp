#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace op {

Shape broadcast_shapes(const Node& node, const Shape& a, const Shape& b,
                       const std::string& auto_broadcast) {
  if (auto_broadcast == "none") {
    if (a != b)
      node.fail(concat_message("arguments must have the same shape (got ", a, " and ", b,
                               "); use auto_broadcast='numpy' to broadcast"));
    return a;
  }
  if (auto_broadcast != "numpy")
    node.fail("auto_broadcast must be 'none' or 'numpy', got '" + auto_broadcast + "'");
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    size_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    size_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      node.fail(concat_message("shapes ", a, " and ", b,
                               " are not broadcast-compatible (axis ", i, " of the result: ", da,
                               " vs ", db, ")"));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void check_element_kind(const Node& node, size_t i, ElementKind kind) {
  auto t = node.get_input_element_type(i);
  const char* want = nullptr;
  switch (kind) {
    case ElementKind::numeric:
      if (!t.is_numeric()) want = "a numeric type (f32, f64, i32, i64)";
      break;
    case ElementKind::real:
      if (!t.is_real()) want = "a floating-point type (f32, f64)";
      break;
    case ElementKind::boolean:
      if (!t.is_boolean()) want = "boolean";
      break;
    case ElementKind::any:
      if (t == element::undefined) want = "a defined type";
      break;
  }
  if (want) node.fail_type(concat_message("arg", i, " has element type ", t, "; expected ", want));
}

Select::Select(const Output& cond, const Output& then_value, const Output& else_value,
               const std::string& auto_broadcast)
    : Op<Select>({cond, then_value, else_value}), m_auto_broadcast(auto_broadcast) {
  constructor_validate_and_infer_types();
}

void Select::validate_and_infer_types() {
  check_input_count(3);
  check_element_kind(*this, 0, ElementKind::boolean);
  auto t1 = get_input_element_type(1), t2 = get_input_element_type(2);
  if (t1 != t2)
    fail_type(concat_message("element types of arg1 (", t1, ") and arg2 (", t2, ") must match"));
  Shape s = broadcast_shapes(*this, get_input_shape(0), get_input_shape(1), m_auto_broadcast);
  s = broadcast_shapes(*this, s, get_input_shape(2), m_auto_broadcast);
  set_output_type(0, t1, s);
}

Convert::Convert(const Output& arg, element::Type destination_type)
    : Op<Convert>({arg}), m_type(destination_type) {
  constructor_validate_and_infer_types();
}

void Convert::validate_and_infer_types() {
  check_input_count(1);
  if (m_type == element::undefined) fail_type("destination type must be defined");
  set_output_type(0, m_type, get_input_shape(0));
}

NGRAPH_REGISTER_OP(Negative);
NGRAPH_REGISTER_OP(Abs);
NGRAPH_REGISTER_OP(Sign);
NGRAPH_REGISTER_OP(Floor);
NGRAPH_REGISTER_OP(Ceiling);
NGRAPH_REGISTER_OP(Relu);
NGRAPH_REGISTER_OP(Exp);
NGRAPH_REGISTER_OP(Log);
NGRAPH_REGISTER_OP(Sqrt);
NGRAPH_REGISTER_OP(Sin);
NGRAPH_REGISTER_OP(Cos);
NGRAPH_REGISTER_OP(Tanh);
NGRAPH_REGISTER_OP(Sigmoid);
NGRAPH_REGISTER_OP(LogicalNot);
NGRAPH_REGISTER_OP(Add);
NGRAPH_REGISTER_OP(Subtract);
NGRAPH_REGISTER_OP(Multiply);
NGRAPH_REGISTER_OP(Divide);
NGRAPH_REGISTER_OP(Power);
NGRAPH_REGISTER_OP(Maximum);
NGRAPH_REGISTER_OP(Minimum);
NGRAPH_REGISTER_OP(Equal);
NGRAPH_REGISTER_OP(NotEqual);
NGRAPH_REGISTER_OP(Greater);
NGRAPH_REGISTER_OP(GreaterEq);
NGRAPH_REGISTER_OP(Less);
NGRAPH_REGISTER_OP(LessEq);
NGRAPH_REGISTER_OP(LogicalAnd);
NGRAPH_REGISTER_OP(LogicalOr);
NGRAPH_REGISTER_OP(Select);
NGRAPH_REGISTER_OP(Convert);

}  // namespace op
}  // namespace ngraph
