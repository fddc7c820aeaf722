// ConvolutionBias: a convolution with its bias, a residual sum and ReLU as one oneDNN
// convolution (formed by pass/fuse_convolution_bias_relu.cpp and
// pass/fuse_convolution_sum_relu.cpp; kernel in convolution_kernels.cpp). Backend-internal.
#pragma once

#include "ngraph/node.hpp"
#include "ngraph/ops/convolution.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// ConvolutionBias(x, w, bias[, summand]): a forward convolution (f32, undilated data,
// non-negative padding) plus a bias per output channel (bias has C_out elements), plus a
// summand of the result's shape when given (a residual connection: oneDNN's sum post-op), then
// optionally ReLU: one oneDNN convolution with a bias and post-ops.
class ConvolutionBias : public Op<ConvolutionBias> {
 public:
  static constexpr const char* type_name = "CPUConvolutionBias";
  static constexpr size_t INPUT_SUMMAND = 3;
  ConvolutionBias() = default;
  ConvolutionBias(const Output& x, const Output& w, const Output& bias,
                  const op::ConvolutionWindow& window, bool relu, const Output& summand = {});
  void validate_and_infer_types() override;
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  void visit_attributes(AttributeVisitor& v) override {
    m_window.visit(v);
    v.on("relu", m_relu);
  }
  const op::ConvolutionWindow& get_window() const { return m_window; }
  bool get_relu() const { return m_relu; }
  bool has_summand() const { return get_input_size() == 4; }

 private:
  op::ConvolutionWindow m_window;
  bool m_relu = false;
};

// True when the CPU backend runs this Convolution (or backprop, or ConvolutionBias) on oneDNN:
// f32, 1-3 spatial axes, undilated data, non-negative padding, no empty tensor
// (convolution_kernels.cpp; the fusions form only what it takes).
bool dnnl_takes_convolution(const Node& node);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
