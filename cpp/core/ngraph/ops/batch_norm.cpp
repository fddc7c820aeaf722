#include "ngraph/ops/batch_norm.hpp"

#include <cmath>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"
#include "ngraph/ops/reduction.hpp"
#include "ngraph/ops/shape_ops.hpp"

namespace ngraph {
namespace op {

namespace {
const char* const kInputNames[] = {"gamma", "beta", "input", "mean", "variance", "delta"};
}  // namespace

void BatchNormBase::check_inputs(const Node& node, size_t count) const {
  using B = BatchNormBase;
  element::Type t = node.get_input_compute_type(B::INPUT_DATA);
  if (!t.is_real())
    node.fail_type(concat_message("input has element type ", t, "; expected f32 or f64"));
  for (size_t i = 0; i < count; ++i)
    if (node.get_input_compute_type(i) != t)
      node.fail_type(concat_message("element type of ", kInputNames[i], " (",
                                    node.get_input_element_type(i), ") does not match input (", t,
                                    ")"));
  const Shape& in = node.get_input_shape(B::INPUT_DATA);
  if (in.size() < 2)
    node.fail(concat_message("input shape ", in,
                             " must have rank >= 2 (axis 1 is the channel axis)"));
  if (in[1] == 0)
    node.fail(concat_message("input shape ", in, " has no channels (axis 1 is empty)"));
  const Shape channels{in[1]};
  for (size_t i : {B::INPUT_GAMMA, B::INPUT_BETA, B::INPUT_MEAN, B::INPUT_VARIANCE}) {
    if (i >= count) continue;
    const Shape& s = node.get_input_shape(i);
    if (s != channels)
      node.fail(concat_message(kInputNames[i], " shape ", s, " must be ", channels,
                               ", the channel count of input shape ", in));
  }
  if (count > B::INPUT_DELTA && node.get_input_shape(B::INPUT_DELTA) != in)
    node.fail(concat_message("delta shape ", node.get_input_shape(B::INPUT_DELTA),
                             " must equal input shape ", in));
  if (!(m_epsilon >= 0) || std::isinf(m_epsilon))
    node.fail(concat_message("epsilon must be finite and >= 0, got ", m_epsilon));
}

BatchNormTraining::BatchNormTraining(const Output& input, const Output& gamma,
                                     const Output& beta, double epsilon)
    : Op<BatchNormTraining>({gamma, beta, input}), BatchNormBase(epsilon) {
  constructor_validate_and_infer_types();
}

void BatchNormTraining::validate_and_infer_types() {
  check_input_count(3);
  check_inputs(*this, 3);
  element::Type t = get_input_compute_type(INPUT_DATA);
  const Shape& in = get_input_shape(INPUT_DATA);
  set_output_size(3);
  set_output_type(0, t, in);
  set_output_type(1, t, Shape{in[1]});
  set_output_type(2, t, Shape{in[1]});
}

BatchNormInference::BatchNormInference(const Output& input, const Output& gamma,
                                       const Output& beta, const Output& mean,
                                       const Output& variance, double epsilon)
    : Op<BatchNormInference>({gamma, beta, input, mean, variance}), BatchNormBase(epsilon) {
  constructor_validate_and_infer_types();
}

void BatchNormInference::validate_and_infer_types() {
  check_input_count(5);
  check_inputs(*this, 5);
  set_output_type(0, get_input_compute_type(INPUT_DATA), get_input_shape(INPUT_DATA));
}

BatchNormTrainingBackprop::BatchNormTrainingBackprop(const Output& input, const Output& gamma,
                                                     const Output& beta, const Output& mean,
                                                     const Output& variance, const Output& delta,
                                                     double epsilon)
    : Op<BatchNormTrainingBackprop>({gamma, beta, input, mean, variance, delta}),
      BatchNormBase(epsilon) {
  constructor_validate_and_infer_types();
}

void BatchNormTrainingBackprop::validate_and_infer_types() {
  check_input_count(6);
  check_inputs(*this, 6);
  element::Type t = get_input_compute_type(INPUT_DATA);
  const Shape& in = get_input_shape(INPUT_DATA);
  set_output_size(3);
  set_output_type(0, t, in);
  set_output_type(1, t, Shape{in[1]});
  set_output_type(2, t, Shape{in[1]});
}

// ------------------------------------------------------------------------ gradient rules

namespace {
const std::string np = "numpy";

// Every axis but the channel axis 1: the axes the statistics are taken over.
AxisSet stat_axes(const Shape& shape) {
  AxisSet axes;
  for (size_t i = 0; i < shape.size(); ++i)
    if (i != 1) axes.insert(i);
  return axes;
}
// A per-channel value [C] broadcast to the input's shape.
Output per_channel(const Output& v, const Shape& shape) {
  return std::make_shared<Broadcast>(v, shape, stat_axes(shape));
}
Output mul(const Output& a, const Output& b) { return std::make_shared<Multiply>(a, b, np); }
}  // namespace

// dx from the normalized output goes through BatchNormTrainingBackprop (the batch statistics
// depend on x; it accounts for that). The statistics' own gradients, when they are used: with
// M elements per channel, d mean / dx = 1 / M and d variance / dx = 2 (x - mean) / M (the
// variance's dependence through the mean vanishes, since sum(x - mean) = 0).
void BatchNormTraining::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(INPUT_DATA), gamma = input_value(INPUT_GAMMA);
  Output beta = input_value(INPUT_BETA);
  const Shape& shape = x.get_shape();
  element::Type t = x.get_element_type();
  if (!autodiff::is_zeros(deltas[0])) {
    auto bprop = std::make_shared<BatchNormTrainingBackprop>(x, gamma, beta, output(1), output(2),
                                                             deltas[0], m_epsilon);
    adj.add_delta(x, bprop->output(0));
    adj.add_delta(gamma, bprop->output(1));
    adj.add_delta(beta, bprop->output(2));
  }
  size_t m = shape_size(shape) / shape[1];
  if (m == 0) return;
  double inv_m = 1.0 / static_cast<double>(m);
  if (!autodiff::is_zeros(deltas[1]))
    adj.add_delta(x, per_channel(mul(deltas[1], autodiff::scalar(t, inv_m)), shape));
  if (!autodiff::is_zeros(deltas[2])) {
    auto centered = std::make_shared<Subtract>(x, per_channel(output(1), shape));
    auto scale = per_channel(mul(deltas[2], autodiff::scalar(t, 2 * inv_m)), shape);
    adj.add_delta(x, std::make_shared<Multiply>(scale, centered));
  }
}

// y = gamma * s * (x - mean) + beta with s = 1 / sqrt(variance + epsilon):
// dx = dy * gamma * s, dgamma = sum(dy * (x - mean)) * s, dbeta = sum(dy),
// dmean = -gamma * s * sum(dy), dvariance = -gamma * s^3 / 2 * sum(dy * (x - mean)).
void BatchNormInference::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(INPUT_DATA), gamma = input_value(INPUT_GAMMA);
  Output mean = input_value(INPUT_MEAN), var = input_value(INPUT_VARIANCE);
  const Output& dy = deltas[0];
  const Shape& shape = x.get_shape();
  element::Type t = x.get_element_type();
  AxisSet axes = stat_axes(shape);
  auto s = std::make_shared<Divide>(
      autodiff::scalar(t, 1.0),
      std::make_shared<Sqrt>(std::make_shared<Add>(var, autodiff::scalar(t, m_epsilon), np)), np);
  auto gamma_s = mul(gamma, s);
  auto centered = std::make_shared<Subtract>(x, per_channel(mean, shape));
  auto dy_sum = std::make_shared<Sum>(dy, axes);
  auto dy_centered = std::make_shared<Sum>(mul(dy, centered), axes);
  adj.add_delta(x, mul(dy, per_channel(gamma_s, shape)));
  adj.add_delta(gamma, mul(dy_centered, s));
  adj.add_delta(input_value(INPUT_BETA), dy_sum);
  adj.add_delta(mean, std::make_shared<Negative>(mul(gamma_s, dy_sum)));
  auto s3_half = mul(mul(s, mul(s, s)), autodiff::scalar(t, -0.5));
  adj.add_delta(var, mul(mul(dy_centered, gamma), s3_half));
}

NGRAPH_REGISTER_OP(BatchNormTraining);
NGRAPH_REGISTER_OP(BatchNormInference);
NGRAPH_REGISTER_OP(BatchNormTrainingBackprop);

}  // namespace op
}  // namespace ngraph
