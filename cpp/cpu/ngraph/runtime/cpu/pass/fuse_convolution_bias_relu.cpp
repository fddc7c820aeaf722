// Convolution + a per-channel bias (+ ReLU) as one oneDNN convolution (ConvolutionBias).
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
// A value that holds one number per channel of an [N, C, ...] result: [C], or [1, C, 1, ...].
bool is_channel_bias(const Output& v, const Shape& out) {
  const Shape& s = v.get_shape();
  if (s == Shape{out[1]}) return true;
  if (s.size() != out.size() || s[1] != out[1]) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (i != 1 && s[i] != 1) return false;
  return true;
}

}  // namespace

size_t fuse_convolution_bias_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  auto single_user = [&](const Output& v) { return users.single(v); };
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    auto* conv = dynamic_cast<op::Convolution*>(node.get());
    if (!conv || !dnnl_takes_convolution(*conv)) continue;
    Node* add = single_user(conv->output(0));
    if (!add || add->get_type_name() != "Add" || add->get_shape() != conv->get_shape()) continue;
    Output bias = add->input_value(add->input_value(0) == conv->output(0) ? 1 : 0);
    if (!is_channel_bias(bias, conv->get_shape())) continue;
    Output value = add->output(0);
    bool relu = false;
    if (Node* r = single_user(value); r && r->get_type_name() == "Relu") {
      relu = true;
      value = r->output(0);
    }
    auto fused = std::make_shared<ConvolutionBias>(conv->input_value(0), conv->input_value(1), bias,
                                                   conv->get_window(), relu);
    fused->set_friendly_name(conv->get_friendly_name());
    replacements[value] = fused->output(0);
  }
  replace_outputs(f, replacements);
  return replacements.size();
}

namespace pass {

void fuse_convolution_bias_relu(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_convolution_bias_relu(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
