#include "ngraph/runtime/cpu/op/matmul_bias.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

MatMulBias::MatMulBias(const Output& a, const Output& b, const Output& bias, bool transpose_a,
                       bool transpose_b, bool relu, int64_t a_split, int64_t b_split)
    : Op<MatMulBias>(bias ? OutputVector{a, b, bias} : OutputVector{a, b}),
      m_transpose_a(transpose_a),
      m_transpose_b(transpose_b),
      m_relu(relu),
      m_a_split(a_split),
      m_b_split(b_split) {
  constructor_validate_and_infer_types();
}

size_t MatMulBias::split(size_t input) const {
  size_t rank = get_input_shape(input).size();
  int64_t s = input == 0 ? m_a_split : m_b_split;
  if (s < 0) return rank - 1;
  if (static_cast<size_t>(s) > rank)
    fail(concat_message("split ", s, " of input ", input, " exceeds its rank ", rank));
  return static_cast<size_t>(s);
}

namespace {
// The matrix of `shape` split at `s`: rows and columns, and the axes of each.
struct MatrixView {
  size_t rows = 1, cols = 1;
  Shape row_axes, col_axes;
};
MatrixView matrix_view(const Shape& shape, size_t s) {
  MatrixView v;
  for (size_t i = 0; i < shape.size(); ++i) {
    (i < s ? v.rows : v.cols) *= shape[i];
    (i < s ? v.row_axes : v.col_axes).push_back(shape[i]);
  }
  return v;
}
}  // namespace

void MatMulBias::get_gemm(size_t& m, size_t& n, size_t& k) const {
  MatrixView a = matrix_view(get_input_shape(0), split(0)), b = matrix_view(get_input_shape(1), split(1));
  m = m_transpose_a ? a.cols : a.rows;
  k = m_transpose_a ? a.rows : a.cols;
  n = m_transpose_b ? b.rows : b.cols;
}

void MatMulBias::validate_and_infer_types() {
  if (get_input_size() != 2 && get_input_size() != 3) fail("expects 2 or 3 inputs");
  const Shape& as = get_input_shape(0);
  const Shape& bs = get_input_shape(1);
  if (as.empty() || bs.empty()) fail(concat_message("needs arguments of rank >= 1, got ", as, " and ", bs));
  MatrixView a = matrix_view(as, split(0)), b = matrix_view(bs, split(1));
  size_t k = m_transpose_a ? a.rows : a.cols;
  size_t k2 = m_transpose_b ? b.cols : b.rows;
  if (k != k2) fail(concat_message("inner dimensions of ", as, " and ", bs, " differ"));
  Shape out = m_transpose_a ? a.col_axes : a.row_axes;
  for (auto d : m_transpose_b ? b.row_axes : b.col_axes) out.push_back(d);
  size_t n = m_transpose_b ? b.rows : b.cols;
  // A and B may be bf16 (mixed precision): the bias is the output's type.
  element::Type t = accumulation_type(get_input_element_type(0));
  if (get_input_element_type(1) != get_input_element_type(0)) fail_type("element types differ");
  if (has_bias() && get_input_element_type(2) != t) fail_type("element types differ");
  if (has_bias() && shape_size(get_input_shape(2)) != n)
    fail(concat_message("bias shape ", get_input_shape(2), " does not have ", n, " elements"));
  set_output_type(0, t, out);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
