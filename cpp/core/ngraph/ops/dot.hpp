// Tensor contractions.
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// Dot(arg0, arg1, reduction_axes_count): nGraph's generalised dot. The last n axes of arg0
// are summed against the first n axes of arg1; the result's shape is
// arg0.shape[:-n] + arg1.shape[n:]. n = -1 (the default) means 0 when either argument is a
// scalar, 1 otherwise: matrix-vector, matrix-matrix, dot of vectors, scalar product.
class Dot : public Op<Dot> {
 public:
  static constexpr const char* type_name = "Dot";
  Dot() = default;
  Dot(const Output& arg0, const Output& arg1, int64_t reduction_axes_count = -1);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("reduction_axes_count", m_reduction_axes_count);
  }
  // The count after resolving the default.
  size_t get_reduction_axes_count() const;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  std::vector<Bf16Set> bf16_sets() const override { return {{{}, {0}}}; }  // the product

 private:
  int64_t m_reduction_axes_count = -1;
};

// MatMul(A, B, transpose_a, transpose_b): NumPy matmul semantics. 1-D arguments are
// promoted (a vector as a row on the left, a column on the right, the added axis dropped
// from the result); leading batch axes broadcast. The transposes swap the last two axes
// of an argument of rank >= 2.
class MatMul : public Op<MatMul> {
 public:
  static constexpr const char* type_name = "MatMul";
  MatMul() = default;
  MatMul(const Output& a, const Output& b, bool transpose_a = false, bool transpose_b = false);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("transpose_a", m_transpose_a);
    v.on("transpose_b", m_transpose_b);
  }
  bool get_transpose_a() const { return m_transpose_a; }
  bool get_transpose_b() const { return m_transpose_b; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  std::vector<Bf16Set> bf16_sets() const override { return {{{}, {0}}}; }  // the product

 private:
  bool m_transpose_a = false;
  bool m_transpose_b = false;
};

}  // namespace op
}  // namespace ngraph
