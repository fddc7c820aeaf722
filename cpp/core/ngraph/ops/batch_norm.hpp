// Batch normalization, with nGraph's (v0) semantics. The channel axis is axis 1 of the input
// (rank >= 2); statistics are taken per channel over every other axis, with the biased
// variance (divided by the element count M, not M - 1); epsilon (>= 0) is added to the
// variance: y = gamma * (x - mean) / sqrt(variance + epsilon) + beta.
//
// Input order is nGraph's: the constructors take (input, gamma, beta, ...), but the node's
// inputs are gamma (0), beta (1), input (2), then mean (3), variance (4) and delta (5) for the
// ops that have them (the INPUT_* constants). gamma, beta, mean and variance have shape [C];
// all inputs have one floating-point element type.
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// What the three batch-norm ops share: epsilon and the input positions.
class BatchNormBase {
 public:
  static constexpr size_t INPUT_GAMMA = 0;
  static constexpr size_t INPUT_BETA = 1;
  static constexpr size_t INPUT_DATA = 2;
  static constexpr size_t INPUT_MEAN = 3;
  static constexpr size_t INPUT_VARIANCE = 4;
  static constexpr size_t INPUT_DELTA = 5;

  virtual ~BatchNormBase() = default;
  double get_eps_value() const { return m_epsilon; }
  void set_eps_value(double epsilon) { m_epsilon = epsilon; }

 protected:
  explicit BatchNormBase(double epsilon = 0) : m_epsilon(epsilon) {}
  // Checks `count` inputs (named in nGraph's order: gamma, beta, input, mean, variance,
  // delta): input of rank >= 2, every per-channel input of shape [C], delta of the input's
  // shape, one floating-point element type, epsilon >= 0. Messages name the op.
  void check_inputs(const Node& node, size_t count) const;
  // Mixed precision (Node::bf16_sets): the data and the normalized output in bf16 (the forward
  // ops), or the data, delta and d_input (the backprops); statistics, gamma, beta and their
  // gradients stay f32.
  static std::vector<Node::Bf16Set> forward_bf16_sets() { return {{{INPUT_DATA}, {0}}}; }
  static std::vector<Node::Bf16Set> backprop_bf16_sets() { return {{{INPUT_DATA, INPUT_DELTA}, {0}}}; }
  double m_epsilon;
};

// BatchNormTraining(input, gamma, beta, epsilon): normalizes with the batch's own statistics.
// Three outputs: the normalized input, the batch mean [C] and the batch variance [C].
// Gradient: through BatchNormTrainingBackprop for the normalized output; the mean and variance
// outputs pass their gradients on to the input exactly when they are used downstream (nGraph
// ignores those).
class BatchNormTraining : public Op<BatchNormTraining>, public BatchNormBase {
 public:
  static constexpr const char* type_name = "BatchNormTraining";
  BatchNormTraining() = default;
  BatchNormTraining(const Output& input, const Output& gamma, const Output& beta, double epsilon);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return forward_bf16_sets(); }
  void visit_attributes(AttributeVisitor& v) override { v.on("epsilon", m_epsilon); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
};

// BatchNormInference(input, gamma, beta, mean, variance, epsilon): normalizes with given
// statistics. One output, the input's shape. Differentiable with respect to all five inputs.
class BatchNormInference : public Op<BatchNormInference>, public BatchNormBase {
 public:
  static constexpr const char* type_name = "BatchNormInference";
  BatchNormInference() = default;
  BatchNormInference(const Output& input, const Output& gamma, const Output& beta,
                     const Output& mean, const Output& variance, double epsilon);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return forward_bf16_sets(); }
  void visit_attributes(AttributeVisitor& v) override { v.on("epsilon", m_epsilon); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
};

// BatchNormTrainingBackprop(input, gamma, beta, mean, variance, delta, epsilon): the gradient of
// BatchNormTraining's normalized output, given its incoming gradient `delta` (the input's
// shape) and the batch statistics the forward op computed. Three outputs: d_input (the input's
// shape), d_gamma [C] and d_beta [C]. It has no gradient rule of its own.
class BatchNormTrainingBackprop : public Op<BatchNormTrainingBackprop>, public BatchNormBase {
 public:
  static constexpr const char* type_name = "BatchNormTrainingBackprop";
  BatchNormTrainingBackprop() = default;
  BatchNormTrainingBackprop(const Output& input, const Output& gamma, const Output& beta,
                            const Output& mean, const Output& variance, const Output& delta,
                            double epsilon);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return backprop_bf16_sets(); }
  void visit_attributes(AttributeVisitor& v) override { v.on("epsilon", m_epsilon); }
};

}  // namespace op
}  // namespace ngraph
