#include "ngraph/ops/reduction.hpp"

#include "ngraph/autodiff/adjoints.hpp"

namespace ngraph {
namespace op {

Softmax::Softmax(const Output& arg, const AxisSet& axes) : Op<Softmax>({arg}), m_axes(axes) {
  constructor_validate_and_infer_types();
}

void Softmax::validate_and_infer_types() {
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::real);
  check_axes(*this, "axes", m_axes, get_input_shape(0));
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

OneHot::OneHot(const Output& arg, const Shape& shape, size_t one_hot_axis)
    : Op<OneHot>({arg}), m_shape(shape), m_axis(one_hot_axis) {
  constructor_validate_and_infer_types();
}

void OneHot::validate_and_infer_types() {
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::numeric);
  if (m_axis >= m_shape.size())
    fail(concat_message("one_hot_axis ", m_axis, " is out of range for result shape ", m_shape));
  Shape expected = m_shape;
  expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(m_axis));
  if (expected != get_input_shape(0))
    fail(concat_message("arg shape ", get_input_shape(0), " does not match result shape ",
                        m_shape, " without one_hot_axis ", m_axis, " (", expected, ")"));
  set_output_type(0, get_input_element_type(0), m_shape);
}

TopK::TopK(const Output& arg, size_t k, size_t axis, bool compute_max,
           element::Type index_element_type)
    : Op<TopK>({arg}), m_k(k), m_axis(axis), m_compute_max(compute_max),
      m_index_type(index_element_type) {
  constructor_validate_and_infer_types();
}

void TopK::validate_and_infer_types() {
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::numeric);
  const Shape& in = get_input_shape(0);
  if (m_axis >= in.size())
    fail(concat_message("axis ", m_axis, " is out of range for arg shape ", in));
  if (m_k < 1 || m_k > in[m_axis])
    fail(concat_message("k ", m_k, " must be between 1 and the size of axis ", m_axis,
                        " of arg shape ", in, " (", in[m_axis], ")"));
  if (m_index_type != element::i32 && m_index_type != element::i64)
    fail_type(concat_message("index_element_type must be i32 or i64, got ", m_index_type));
  Shape out = in;
  out[m_axis] = m_k;
  set_output_size(2);
  set_output_type(0, get_input_element_type(0), out);
  set_output_type(1, m_index_type, out);
}

// ------------------------------------------------------------------------ gradient rules

namespace {
const std::string np = "numpy";
// An output-shaped value broadcast back over the reduced axes.
Output expand(const Output& v, const Shape& shape, const AxisSet& axes) {
  return std::make_shared<Broadcast>(v, shape, axes);
}
}  // namespace

// Each value's gradient goes back to the element it came from: one_hot(indices) along a new
// axis after `axis` (of the input's size), times the gradient broadcast along it, summed over
// the k picks. The indices output has no gradient (it is integral).
void TopK::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  if (autodiff::is_zeros(deltas[0])) return;
  Output x = input_value(0);
  const Shape& in = x.get_shape();
  Shape picks = get_output_shape(0);  // in with axis of size k
  Shape expanded = picks;
  expanded.insert(expanded.begin() + static_cast<std::ptrdiff_t>(m_axis) + 1, in[m_axis]);
  auto hot = std::make_shared<OneHot>(output(1), expanded, m_axis + 1);
  // A Select, not a Convert of the integer mask: a constant for a gradient of this gradient.
  element::Type t = x.get_element_type();
  auto mask = std::make_shared<Select>(
      std::make_shared<Equal>(hot, autodiff::scalar(output(1).get_element_type(), 1.0), np),
      autodiff::scalar(t, 1.0), autodiff::scalar(t, 0.0), np);
  auto spread = std::make_shared<Broadcast>(deltas[0], expanded, AxisSet{m_axis + 1});
  adj.add_delta(x, std::make_shared<Sum>(std::make_shared<Multiply>(mask, spread),
                                         AxisSet{m_axis}));
}

void Sum::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), expand(deltas[0], get_input_shape(0), m_axes));
}

// The gradient is shared equally by the elements that attain the extreme value. Masks are
// made with Select, not Convert(bool): they are constants for a gradient of this gradient.
void extreme_adjoints(Node& node, const AxisSet& axes, autodiff::Adjoints& adj,
                      const Output& delta) {
  Output x = node.input_value(0);
  const Shape& shape = x.get_shape();
  element::Type t = x.get_element_type();
  auto hit = std::make_shared<Select>(
      std::make_shared<Equal>(x, expand(node.output(0), shape, axes)),
      autodiff::scalar(t, 1.0), autodiff::scalar(t, 0.0), np);
  auto count = std::make_shared<Sum>(hit, axes);
  auto share = std::make_shared<Divide>(delta, count);
  adj.add_delta(x, std::make_shared<Multiply>(expand(share, shape, axes), hit));
}

void Max::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  extreme_adjoints(*this, m_axes, adj, deltas[0]);
}
void Min::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  extreme_adjoints(*this, m_axes, adj, deltas[0]);
}

// d prod / d x_i is the product of the other elements; computed without dividing by zero, and
// so that its own gradient is right at zeros too (second order): with nz = x with its zeros
// replaced by 1 and zp = the product of the group's zeros (0 if it has one, else 1), a nonzero
// element gets zp * prod(nz) / x_i and a zero element prod(nz) times the product of the other
// zeros: 1 if it is the only one, the other zero if there are two, 0 if more.
void Product::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(0);
  const Shape& shape = x.get_shape();
  element::Type t = x.get_element_type();
  auto zero = autodiff::scalar(t, 0.0), one = autodiff::scalar(t, 1.0);
  auto is_zero = std::make_shared<Equal>(x, zero, np);
  auto nz = std::make_shared<Select>(is_zero, one, x, np);
  auto group = [&](const Output& v) -> Output {  // the group's product, for every element
    return expand(std::make_shared<Product>(v, m_axes), shape, m_axes);
  };
  auto group_sum = [&](const Output& v) -> Output {
    return expand(std::make_shared<Sum>(v, m_axes), shape, m_axes);
  };
  Output rest = group(nz);
  Output zp = group(std::make_shared<Select>(is_zero, x, one, np));
  Output zeros_in_group = group_sum(std::make_shared<Select>(is_zero, one, zero, np));
  Output zero_sum = group_sum(std::make_shared<Select>(is_zero, x, zero, np));
  auto other_zeros = std::make_shared<Select>(
      std::make_shared<Equal>(zeros_in_group, one, np), one,
      std::make_shared<Select>(
          std::make_shared<Equal>(zeros_in_group, autodiff::scalar(t, 2.0), np),
          std::make_shared<Subtract>(zero_sum, x), zero, np),
      np);
  auto others = std::make_shared<Select>(
      is_zero, std::make_shared<Multiply>(rest, other_zeros),
      std::make_shared<Divide>(std::make_shared<Multiply>(zp, rest), nz));
  adj.add_delta(x, std::make_shared<Multiply>(expand(deltas[0], shape, m_axes), others));
}

// dx = y * (delta - sum(delta * y)) over the softmax axes.
void Softmax::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output y = output(0);
  const Shape& shape = get_shape();
  auto dy = std::make_shared<Multiply>(deltas[0], y);
  auto s = expand(std::make_shared<Sum>(dy, m_axes), shape, m_axes);
  adj.add_delta(input_value(0), std::make_shared<Multiply>(y, std::make_shared<Subtract>(deltas[0], s)));
}

NGRAPH_REGISTER_OP(Sum);
NGRAPH_REGISTER_OP(Product);
NGRAPH_REGISTER_OP(Max);
NGRAPH_REGISTER_OP(Min);
NGRAPH_REGISTER_OP(ArgMax);
NGRAPH_REGISTER_OP(TopK);
NGRAPH_REGISTER_OP(ArgMin);
NGRAPH_REGISTER_OP(Softmax);
NGRAPH_REGISTER_OP(OneHot);

}  // namespace op
}  // namespace ngraph
