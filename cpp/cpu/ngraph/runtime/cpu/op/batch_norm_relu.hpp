// BatchNormRelu and its gradient BatchNormReluBackprop: batch normalisation with ReLU applied
// inside oneDNN's primitive (formed by pass/fuse_batch_norm_relu.cpp; kernels in
// batch_norm_kernels.cpp). Backend-internal.
#pragma once

#include "ngraph/node.hpp"
#include "ngraph/ops/batch_norm.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// BatchNormRelu: BatchNormTraining or BatchNormInference (same inputs and outputs) with ReLU
// applied to the normalized output: oneDNN's fuse_norm_relu. Formed where ReLU is the only use
// of the normalized value (ReLU's gradient reads its output, so nothing else needs the value
// before it). In training, when the ReLU's gradient feeds a BatchNormTrainingBackprop of the same
// data, a fourth output is the ReLU's mask for BatchNormReluBackprop: typed u8 with the data's
// shape; its bytes and layout are the primitive's workspace (a bit per element for oneDNN's
// fast implementations), or one byte per element, plain, where the reference loops run.
class BatchNormRelu : public Op<BatchNormRelu>, public op::BatchNormBase {
 public:
  static constexpr const char* type_name = "CPUBatchNormRelu";
  static constexpr size_t OUTPUT_MASK = 3;
  BatchNormRelu() = default;
  // `bn` is a BatchNormTraining or BatchNormInference; the new node reads its inputs.
  BatchNormRelu(const Node& bn, bool mask);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return forward_bf16_sets(); }
  void visit_attributes(AttributeVisitor& v) override {
    v.on("epsilon", m_epsilon);
    v.on("training", m_training);
    v.on("mask", m_mask);
  }
  bool is_training() const { return m_training; }
  bool has_mask() const { return m_mask; }

 private:
  bool m_training = false;
  bool m_mask = false;
};

// BatchNormReluBackprop(gamma, beta, input, mean, variance, delta, mask): the gradient of
// BatchNormRelu's training output: BatchNormTrainingBackprop of delta where the mask (the
// forward's output 3) says the normalized value was positive, zero elsewhere. ReLU's gradient
// (Select(y > 0, delta, 0)) runs inside oneDNN's backward pass instead of as a pass of its own
// over three tensors. Outputs as BatchNormTrainingBackprop's.
class BatchNormReluBackprop : public Op<BatchNormReluBackprop>, public op::BatchNormBase {
 public:
  static constexpr const char* type_name = "CPUBatchNormReluBackprop";
  static constexpr size_t INPUT_MASK = 6;
  BatchNormReluBackprop() = default;
  // `backprop` is a BatchNormTrainingBackprop; its delta is replaced by `delta` (before the
  // ReLU's gradient) and `mask`.
  BatchNormReluBackprop(const Node& backprop, const Output& delta, const Output& mask);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return backprop_bf16_sets(); }
  void visit_attributes(AttributeVisitor& v) override { v.on("epsilon", m_epsilon); }
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
