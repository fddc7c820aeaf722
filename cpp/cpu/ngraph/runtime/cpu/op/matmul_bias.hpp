// MatMulBias: a matrix product with its bias and ReLU as one oneDNN matmul (formed by
// pass/fuse_matmul_bias_relu.cpp; kernel in linalg_kernels.cpp). Backend-internal: no Python
// wrapper, no gradient rule (the fusions run on a compiled copy, after autodiff).
#pragma once

#include <cstdint>

#include "ngraph/node.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// MatMulBias(a, b[, bias]): op(a) . op(b) (+ bias on every row) (then ReLU), with op an
// optional transpose given as strides: one oneDNN matmul with bias and a post-op. a and b may
// have any rank >= 1: each is the row-major matrix of its axes split at a_split (b_split):
// rows = prod(shape[:split]), columns = prod(shape[split:]) (a Dot of an activation
// [batch, length, width] and a weight is one GEMM of [batch * length, width], without a copy).
// The result's shape is op(a)'s row axes followed by op(b)'s column axes (the Dot's shape).
class MatMulBias : public Op<MatMulBias> {
 public:
  static constexpr const char* type_name = "CPUMatMulBias";
  MatMulBias() = default;
  MatMulBias(const Output& a, const Output& b, const Output& bias, bool transpose_a,
             bool transpose_b, bool relu, int64_t a_split = -1, int64_t b_split = -1);
  void validate_and_infer_types() override;
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  std::vector<Bf16Set> bf16_sets() const override { return {{{}, {0}}}; }  // the product
  void visit_attributes(AttributeVisitor& v) override {
    v.on("transpose_a", m_transpose_a);
    v.on("transpose_b", m_transpose_b);
    v.on("relu", m_relu);
    v.on("a_split", m_a_split);
    v.on("b_split", m_b_split);
  }
  bool has_bias() const { return get_input_size() == 3; }
  bool get_transpose_a() const { return m_transpose_a; }
  bool get_transpose_b() const { return m_transpose_b; }
  bool get_relu() const { return m_relu; }
  // The GEMM: op(a) is m x k, op(b) is k x n.
  void get_gemm(size_t& m, size_t& n, size_t& k) const;

 private:
  // Where each operand's axes split into the matrix's rows and columns (-1: before the last).
  size_t split(size_t input) const;
  bool m_transpose_a = false, m_transpose_b = false, m_relu = false;
  int64_t m_a_split = -1, m_b_split = -1;
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
