#include "ngraph/ops/elementwise.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/reduction.hpp"
#include "ngraph/ops/shape_ops.hpp"

namespace ngraph {
namespace op {

const char* to_string(AutoBroadcast auto_broadcast) {
  switch (auto_broadcast) {
    case AutoBroadcast::none: return "none";
    case AutoBroadcast::numpy: return "numpy";
  }
  return "?";
}

AutoBroadcast auto_broadcast_from_string(const std::string& name) {
  if (name == "none") return AutoBroadcast::none;
  if (name == "numpy") return AutoBroadcast::numpy;
  throw std::invalid_argument("auto_broadcast must be 'none' or 'numpy', got '" + name + "'");
}

AutoBroadcast auto_broadcast_of(const Node& node, const std::string& name) {
  try {
    return auto_broadcast_from_string(name);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

Shape broadcast_shapes(const Node& node, const Shape& a, const Shape& b,
                       AutoBroadcast auto_broadcast) {
  if (auto_broadcast == AutoBroadcast::none) {
    if (a != b)
      node.fail(concat_message("arguments must have the same shape (got ", a, " and ", b,
                               "); use auto_broadcast='numpy' to broadcast"));
    return a;
  }
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
  auto t = node.get_input_compute_type(i);  // f32 for a value stored in bf16 (bf16_sets)
  const char* want = nullptr;
  switch (kind) {
    case ElementKind::numeric:
      if (!t.is_numeric()) want = "a numeric type (f32, f64, i8, i16, i32, i64, u8, u16, u32, u64)";
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
               AutoBroadcast auto_broadcast)
    : Op<Select>({cond, then_value, else_value}), m_auto_broadcast(auto_broadcast) {
  constructor_validate_and_infer_types();
}

Select::Select(const Output& cond, const Output& then_value, const Output& else_value,
               const std::string& auto_broadcast)
    : Op<Select>({cond, then_value, else_value}) {
  m_auto_broadcast = auto_broadcast_of(*this, auto_broadcast);
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

// ------------------------------------------------------------------------ gradient rules
// delta is the gradient of the output; inputs that were broadcast get it summed back
// (reduce_to_shape). Products with inputs use NumPy broadcasting so no zeros are stored.

namespace {
using autodiff::reduce_to_shape;
using autodiff::scalar;
const std::string np = "numpy";

Output mul(const Output& a, const Output& b) { return std::make_shared<Multiply>(a, b, np); }
Output div(const Output& a, const Output& b) { return std::make_shared<Divide>(a, b, np); }
Output neg(const Output& a) { return std::make_shared<Negative>(a); }
Output cst(const Output& like, double v) { return scalar(like.get_element_type(), v); }

// Adds delta (of the output's shape) to input i, summed down to its shape.
void add_input_delta(autodiff::Adjoints& adj, const Node& node, size_t i, const Output& delta) {
  adj.add_delta(node.input_value(i), reduce_to_shape(delta, node.get_input_shape(i)));
}
}  // namespace

void Negative::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), neg(deltas[0]));
}
void Abs::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), mul(deltas[0], std::make_shared<Sign>(input_value(0))));
}
// Sign, Floor and Ceiling are piecewise constant: their derivative is 0 wherever it exists.
void Sign::generate_adjoints(autodiff::Adjoints& adj, const OutputVector&) {
  adj.add_delta(input_value(0), autodiff::zeros(get_element_type(), get_shape()));
}
void Floor::generate_adjoints(autodiff::Adjoints& adj, const OutputVector&) {
  adj.add_delta(input_value(0), autodiff::zeros(get_element_type(), get_shape()));
}
void Ceiling::generate_adjoints(autodiff::Adjoints& adj, const OutputVector&) {
  adj.add_delta(input_value(0), autodiff::zeros(get_element_type(), get_shape()));
}
// From the output (relu(x) > 0 exactly where x > 0), so the pre-activation need not be kept
// and a backend can fuse the ReLU into the op that produces x.
void Relu::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  auto y = output(0);
  auto positive = std::make_shared<Greater>(y, cst(y, 0.0), np);
  adj.add_delta(input_value(0), std::make_shared<Select>(positive, deltas[0], cst(y, 0.0), np));
}
void StopGradient::generate_adjoints(autodiff::Adjoints&, const OutputVector&) {}
void Exp::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), mul(deltas[0], output(0)));
}
void Log::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), div(deltas[0], input_value(0)));
}
void Sqrt::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), div(deltas[0], mul(output(0), cst(output(0), 2.0))));
}
void Sin::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), mul(deltas[0], std::make_shared<Cos>(input_value(0))));
}
void Cos::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), neg(mul(deltas[0], std::make_shared<Sin>(input_value(0)))));
}
void Tan::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // 1 + tan^2
  auto y = output(0);
  adj.add_delta(input_value(0),
                mul(deltas[0], std::make_shared<Add>(cst(y, 1.0), mul(y, y), np)));
}
namespace {
// 1 / sqrt(1 - x^2), the derivative of asin (and minus that of acos).
Output inverse_sqrt_one_minus_square(const Output& x) {
  auto s = std::make_shared<Sqrt>(std::make_shared<Subtract>(cst(x, 1.0), mul(x, x), np));
  return div(cst(x, 1.0), s);
}
}  // namespace
void Asin::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), mul(deltas[0], inverse_sqrt_one_minus_square(input_value(0))));
}
void Acos::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0),
                neg(mul(deltas[0], inverse_sqrt_one_minus_square(input_value(0)))));
}
void Atan::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // 1 / (1 + x^2)
  Output x = input_value(0);
  adj.add_delta(x, div(deltas[0], std::make_shared<Add>(cst(x, 1.0), mul(x, x), np)));
}
void Sinh::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), mul(deltas[0], std::make_shared<Cosh>(input_value(0))));
}
void Cosh::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), mul(deltas[0], std::make_shared<Sinh>(input_value(0))));
}
void Tanh::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // 1 - tanh^2
  auto y = output(0);
  auto d = std::make_shared<Subtract>(cst(y, 1.0), mul(y, y), np);
  adj.add_delta(input_value(0), mul(deltas[0], d));
}
void Sigmoid::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // s (1 - s)
  auto y = output(0);
  auto d = mul(y, std::make_shared<Subtract>(cst(y, 1.0), y, np));
  adj.add_delta(input_value(0), mul(deltas[0], d));
}
void Erf::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // 2 / sqrt(pi) * exp(-x^2)
  Output x = input_value(0);
  auto e = std::make_shared<Exp>(neg(mul(x, x)));
  adj.add_delta(x, mul(deltas[0], mul(e, cst(x, 1.1283791670955126))));
}
void Gelu::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // Phi(x) + x * phi(x) = (1 + erf(x / sqrt(2))) / 2 + x * exp(-x^2 / 2) / sqrt(2 pi)
  Output x = input_value(0);
  auto cdf = mul(std::make_shared<Add>(cst(x, 1.0), std::make_shared<Erf>(mul(x, cst(x, 0.7071067811865476))), np),
                 cst(x, 0.5));
  auto pdf = mul(std::make_shared<Exp>(mul(mul(x, x), cst(x, -0.5))), cst(x, 0.3989422804014327));
  adj.add_delta(x, mul(deltas[0], std::make_shared<Add>(cdf, mul(x, pdf), np)));
}

void Add::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  add_input_delta(adj, *this, 0, deltas[0]);
  add_input_delta(adj, *this, 1, deltas[0]);
}
void Subtract::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  add_input_delta(adj, *this, 0, deltas[0]);
  add_input_delta(adj, *this, 1, neg(deltas[0]));
}
void Multiply::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  add_input_delta(adj, *this, 0, mul(deltas[0], input_value(1)));
  add_input_delta(adj, *this, 1, mul(deltas[0], input_value(0)));
}
void Divide::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // d(a/b) = da / b - db * (a/b) / b
  auto b = input_value(1);
  add_input_delta(adj, *this, 0, div(deltas[0], b));
  add_input_delta(adj, *this, 1, neg(div(mul(deltas[0], output(0)), b)));
}
void Power::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // d(a^b) = b a^(b-1) da + log(a) a^b db
  auto a = input_value(0), b = input_value(1);
  auto b_minus_1 = std::make_shared<Subtract>(b, cst(b, 1.0), np);
  auto da = mul(mul(deltas[0], b), std::make_shared<Power>(a, b_minus_1, np));
  add_input_delta(adj, *this, 0, da);
  auto db = mul(mul(deltas[0], output(0)), std::make_shared<Log>(a));
  // 0^b is 0 around any b > 0: its derivative is 0, not 0 * log(0) = nan (as in PyTorch,
  // for b >= 0). Without this one zero base makes a broadcast exponent's gradient nan.
  auto zero_base = std::make_shared<LogicalAnd>(std::make_shared<Equal>(a, cst(a, 0.0), np),
                                                std::make_shared<GreaterEq>(b, cst(b, 0.0), np), np);
  add_input_delta(adj, *this, 1, std::make_shared<Select>(zero_base, cst(db, 0.0), db, np));
}
// At ties the whole gradient goes to arg0, so the two parts always add up to delta.
void Maximum::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  auto a_wins = std::make_shared<GreaterEq>(input_value(0), input_value(1), np);
  auto zero = cst(deltas[0], 0.0);
  add_input_delta(adj, *this, 0, std::make_shared<Select>(a_wins, deltas[0], zero, np));
  add_input_delta(adj, *this, 1, std::make_shared<Select>(a_wins, zero, deltas[0], np));
}
void Minimum::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  auto a_wins = std::make_shared<LessEq>(input_value(0), input_value(1), np);
  auto zero = cst(deltas[0], 0.0);
  add_input_delta(adj, *this, 0, std::make_shared<Select>(a_wins, deltas[0], zero, np));
  add_input_delta(adj, *this, 1, std::make_shared<Select>(a_wins, zero, deltas[0], np));
}
// The condition is boolean: it gets no gradient (not an error: it is not differentiable data).
void Select::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  auto zero = cst(deltas[0], 0.0);
  add_input_delta(adj, *this, 1, std::make_shared<Select>(input_value(0), deltas[0], zero, np));
  add_input_delta(adj, *this, 2, std::make_shared<Select>(input_value(0), zero, deltas[0], np));
}
void Convert::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  element::Type from = get_input_element_type(0);
  if (!from.is_real())
    throw autodiff::NoGradientRule("[Convert] is not differentiable: its input (" +
                                   input_value(0).get_node()->get_type_name() + " node " +
                                   input_value(0).get_node()->get_name() + ") has element type " +
                                   from.get_type_name());
  adj.add_delta(input_value(0), std::make_shared<Convert>(deltas[0], from));
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
NGRAPH_REGISTER_OP(Tan);
NGRAPH_REGISTER_OP(Asin);
NGRAPH_REGISTER_OP(Acos);
NGRAPH_REGISTER_OP(Atan);
NGRAPH_REGISTER_OP(Sinh);
NGRAPH_REGISTER_OP(Cosh);
NGRAPH_REGISTER_OP(Tanh);
NGRAPH_REGISTER_OP(Sigmoid);
NGRAPH_REGISTER_OP(Erf);
NGRAPH_REGISTER_OP(Gelu);
NGRAPH_REGISTER_OP(LogicalNot);
NGRAPH_REGISTER_OP(StopGradient);
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
