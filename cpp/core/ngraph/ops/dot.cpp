#include "ngraph/ops/dot.hpp"

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
  set_output_type(0, t0, out);
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
  Shape out = broadcast_shapes(*this, batch_a, batch_b, "numpy");
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  set_output_type(0, t0, out);
}

NGRAPH_REGISTER_OP(Dot);
NGRAPH_REGISTER_OP(MatMul);

}  // namespace op
}  // namespace ngraph
