// AttentionSoftmax and AttentionSoftmaxBackprop: attention's scaled, masked softmax and its
// gradient as row kernels (formed by pass/fuse_attention_softmax.cpp; kernels in
// attention_kernels.cpp). Backend-internal.
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// AttentionSoftmax(scores[, mask]): softmax over the last axis of
// select(mask, scores * scale, -inf), row by row in one pass over the data (attention's
// probabilities: QK^T scaled, causally masked, normalised). mask is boolean and broadcasts
// NumPy-style to scores. A row whose values are all masked or -inf is NaN, and a NaN makes its
// row NaN, as in the composition it replaces.
class AttentionSoftmax : public Op<AttentionSoftmax> {
 public:
  static constexpr const char* type_name = "CPUAttentionSoftmax";
  AttentionSoftmax() = default;
  AttentionSoftmax(const Output& scores, const Output& mask, double scale);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("scale", m_scale); }
  bool has_mask() const { return get_input_size() == 2; }
  double get_scale() const { return m_scale; }

 private:
  double m_scale = 1.0;
};

// AttentionSoftmaxBackprop(delta, y[, mask]): the gradient of AttentionSoftmax's scores given
// its output y and the incoming gradient delta: scale * select(mask, y * (delta -
// sum(delta * y over the last axis)), 0).
class AttentionSoftmaxBackprop : public Op<AttentionSoftmaxBackprop> {
 public:
  static constexpr const char* type_name = "CPUAttentionSoftmaxBackprop";
  AttentionSoftmaxBackprop() = default;
  AttentionSoftmaxBackprop(const Output& delta, const Output& y, const Output& mask, double scale);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("scale", m_scale); }
  bool has_mask() const { return get_input_size() == 3; }
  double get_scale() const { return m_scale; }

 private:
  double m_scale = 1.0;
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
