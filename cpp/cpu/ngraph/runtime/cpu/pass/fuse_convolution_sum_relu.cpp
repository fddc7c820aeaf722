// ConvolutionBias + a residual sum (+ ReLU) as one oneDNN convolution with a sum post-op.
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

size_t fuse_convolution_sum_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    auto* conv = dynamic_cast<ConvolutionBias*>(node.get());
    if (!conv || conv->get_relu() || conv->has_summand()) continue;
    Node* add = users.single(conv->output(0));
    if (!add || add->get_type_name() != "Add" || add->get_shape() != conv->get_shape()) continue;
    Output summand = add->input_value(add->input_value(0) == conv->output(0) ? 1 : 0);
    if (summand.get_shape() != conv->get_shape() || summand == conv->output(0)) continue;
    Output value = add->output(0);
    bool relu = false;
    if (Node* r = users.single(value); r && r->get_type_name() == "Relu") {
      relu = true;
      value = r->output(0);
    }
    auto fused = std::make_shared<ConvolutionBias>(conv->input_value(0), conv->input_value(1),
                                                   conv->input_value(2), conv->get_window(), relu,
                                                   summand);
    fused->set_friendly_name(conv->get_friendly_name());
    replacements[value] = fused->output(0);
  }
  replace_outputs(f, replacements);
  return replacements.size();
}

namespace pass {

void fuse_convolution_sum_relu(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_convolution_sum_relu(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
