#include "ngraph/ops/dot.hpp"

#include <numeric>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/reduction.hpp"
#include "ngraph/ops/shape_ops.hpp"

#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace op {

Dot::Dot(const Output& arg0, const Output& arg1, int64_t reduction_axes_count)
    : Op<Dot>({arg0, arg1}), m_reduction_axes_count(reduction_axes_count) {
  constructor_validate_and_infer_types();
}

size_t Dot::get_reduction_axes_count() const {
  if (m_reduction_axes_count >= 0) return static_cast<size_t>(m_reduction_axes_count);
  return (get_input_shape(0).empty() || get_input_shape(1).empty()) ? 0 : 1;
}

void Dot::validate_and_infer_types() {
  check_input_count(2);
  check_element_kind(*this, 0, ElementKind::numeric);
  check_element_kind(*this, 1, ElementKind::numeric);
  auto t0 = get_input_element_type(0), t1 = get_input_element_type(1);
  if (t0 != t1)
    fail_type(concat_message("element types of arg0 (", t0, ") and arg1 (", t1, ") must match"));
  if (m_reduction_axes_count < -1)
    fail(concat_message("reduction_axes_count must be >= 0 (or -1 for the default), got ",
                        m_reduction_axes_count));
  const Shape& s0 = get_input_shape(0);
  const Shape& s1 = get_input_shape(1);
  size_t n = get_reduction_axes_count();
  if (n > s0.size() || n > s1.size())
    fail(concat_message("reduction_axes_count (", n, ") is greater than the rank of arg0 shape ",
                        s0, " or arg1 shape ", s1));
  for (size_t i = 0; i < n; ++i) {
    size_t d0 = s0[s0.size() - n + i], d1 = s1[i];
    if (d0 != d1)
      fail(concat_message("reduction axis of arg0 shape ", s0, " (", d0,
                          ") does not match arg1 shape ", s1, " (", d1, ")"));
  }
  Shape out(s0.begin(), s0.end() - static_cast<std::ptrdiff_t>(n));
  out.insert(out.end(), s1.begin() + static_cast<std::ptrdiff_t>(n), s1.end());
  set_output_type(0, accumulation_type(t0), out);
}

MatMul::MatMul(const Output& a, const Output& b, bool transpose_a, bool transpose_b)
    : Op<MatMul>({a, b}), m_transpose_a(transpose_a), m_transpose_b(transpose_b) {
  constructor_validate_and_infer_types();
}

void MatMul::validate_and_infer_types() {
  check_input_count(2);
  check_element_kind(*this, 0, ElementKind::numeric);
  check_element_kind(*this, 1, ElementKind::numeric);
  auto t0 = get_input_element_type(0), t1 = get_input_element_type(1);
  if (t0 != t1)
    fail_type(concat_message("element types of arg0 (", t0, ") and arg1 (", t1, ") must match"));
  Shape a = get_input_shape(0), b = get_input_shape(1);
  if (a.empty() || b.empty())
    fail(concat_message("arguments must have rank >= 1 (got shapes ", a, " and ", b,
                        "); use Multiply for scalars"));
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  if (m_transpose_a && !a_vec) std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (m_transpose_b && !b_vec) std::swap(b[b.size() - 1], b[b.size() - 2]);
  size_t m = a[a.size() - 2], k = a.back(), k2 = b[b.size() - 2], n = b.back();
  if (k != k2)
    fail(concat_message("inner dimension of arg0 shape ", get_input_shape(0), " (", k,
                        m_transpose_a ? ", transposed" : "", ") does not match arg1 shape ",
                        get_input_shape(1), " (", k2, m_transpose_b ? ", transposed" : "", ")"));
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  Shape out = broadcast_shapes(*this, batch_a, batch_b, AutoBroadcast::numpy);
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  set_output_type(0, accumulation_type(t0), out);
}

// d(a . b): da = delta . b^T over b's free axes, db = a^T . delta over a's free axes, where
// ^T moves the reduced axes to the other end (nGraph's Dot adjoints).
void Dot::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  auto a = input_value(0), b = input_value(1);
  const Shape& sa = a.get_shape();
  const Shape& sb = b.get_shape();
  size_t n = get_reduction_axes_count();
  size_t a_free = sa.size() - n, b_free = sb.size() - n;
  // b^T: b's free axes first, then its reduced axes.
  AxisVector b_order;
  Shape bt_shape;
  for (size_t i = n; i < sb.size(); ++i) b_order.push_back(i);
  for (size_t i = 0; i < n; ++i) b_order.push_back(i);
  for (auto i : b_order) bt_shape.push_back(sb[i]);
  auto bt = std::make_shared<Reshape>(b, b_order, bt_shape);
  adj.add_delta(a, std::make_shared<Dot>(deltas[0], bt, static_cast<int64_t>(b_free)));
  // a^T: a's reduced axes first, then its free axes.
  AxisVector a_order;
  Shape at_shape;
  for (size_t i = a_free; i < sa.size(); ++i) a_order.push_back(i);
  for (size_t i = 0; i < a_free; ++i) a_order.push_back(i);
  for (auto i : a_order) at_shape.push_back(sa[i]);
  auto at = std::make_shared<Reshape>(a, a_order, at_shape);
  adj.add_delta(b, std::make_shared<Dot>(at, deltas[0], static_cast<int64_t>(a_free)));
}

// With A' = op(a), B' = op(b) (op = optional transpose): dA' = delta B'^T, dB' = A'^T delta,
// computed on the 1-D-promoted shapes and summed over broadcast batch axes.
void MatMul::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output a = input_value(0), b = input_value(1), delta = deltas[0];
  const Shape sa = a.get_shape(), sb = b.get_shape();
  auto as_shape = [](const Output& v, const Shape& s) -> Output {
    if (v.get_shape() == s) return v;
    AxisVector order(v.get_shape().size());
    std::iota(order.begin(), order.end(), 0);
    return std::make_shared<Reshape>(v, order, s);
  };
  bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  bool ta = m_transpose_a && !a_vec, tb = m_transpose_b && !b_vec;
  Shape pa = sa, pb = sb;
  if (a_vec) pa.insert(pa.begin(), 1);
  if (b_vec) pb.push_back(1);
  Output a2 = as_shape(a, pa), b2 = as_shape(b, pb);
  // The output with the promoted axes put back.
  Shape pd = delta.get_shape();
  if (a_vec) pd.insert(pd.end() - (b_vec ? 0 : 1), 1);
  if (b_vec) pd.push_back(1);
  Output d2 = as_shape(delta, pd);
  Output da = ta ? Output(std::make_shared<MatMul>(b2, d2, tb, true))
                 : Output(std::make_shared<MatMul>(d2, b2, false, !tb));
  Output db = tb ? Output(std::make_shared<MatMul>(d2, a2, true, ta))
                 : Output(std::make_shared<MatMul>(a2, d2, !ta, false));
  adj.add_delta(a, as_shape(autodiff::reduce_to_shape(da, pa), sa));
  adj.add_delta(b, as_shape(autodiff::reduce_to_shape(db, pb), sb));
}

NGRAPH_REGISTER_OP(Dot);
NGRAPH_REGISTER_OP(MatMul);

}  // namespace op
}  // namespace ngraph
