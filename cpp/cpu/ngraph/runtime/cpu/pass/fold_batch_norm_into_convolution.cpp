// Batch-norm inference folded into the convolution before it: the filters are scaled per
// output channel and a bias added, as graph ops that constant folding evaluates when the
// statistics and filters are constants.
#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"
#include "ngraph/runtime/cpu/constant_evaluator.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
std::shared_ptr<Node> scalar_like(const Output& like, double value) {
  return std::make_shared<op::Constant>(like.get_element_type(), Shape{}, std::vector<double>{value});
}
}  // namespace

size_t fold_batch_norm_into_convolution(Function& f) {
  using BN = op::BatchNormBase;
  constexpr auto np = op::AutoBroadcast::numpy;
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    auto* bn = dynamic_cast<op::BatchNormInference*>(node.get());
    if (!bn) continue;
    Output data = bn->input_value(BN::INPUT_DATA);
    auto* conv = dynamic_cast<op::Convolution*>(data.get_node());
    if (!conv || users.single(data) != bn || !dnnl_takes_convolution(*conv)) continue;
    const Shape& out = conv->get_shape();
    Shape channel(out.size(), 1), filter_channel(conv->get_input_shape(1).size(), 1);
    channel[1] = filter_channel[0] = out[1];
    auto reshape = [](const Output& v, const Shape& s) {
      return std::make_shared<op::Reshape>(v, AxisVector{0}, s);
    };
    Output var = bn->input_value(BN::INPUT_VARIANCE);
    auto root = std::make_shared<op::Sqrt>(
        std::make_shared<op::Add>(var, scalar_like(var, bn->get_eps_value()), np));
    auto scale = std::make_shared<op::Divide>(bn->input_value(BN::INPUT_GAMMA), root, np);
    auto filters =
        std::make_shared<op::Multiply>(conv->input_value(1), reshape(scale, filter_channel), np);
    auto bias = std::make_shared<op::Subtract>(
        bn->input_value(BN::INPUT_BETA),
        std::make_shared<op::Multiply>(bn->input_value(BN::INPUT_MEAN), scale, np), np);
    const op::ConvolutionWindow& w = conv->get_window();
    auto folded = std::make_shared<op::Convolution>(conv->input_value(0), filters, w.strides,
                                                    w.dilations, w.padding_below, w.padding_above,
                                                    w.data_dilations, w.groups);
    folded->set_friendly_name(conv->get_friendly_name());
    auto sum = std::make_shared<op::Add>(folded, reshape(bias, channel), np);
    sum->set_friendly_name(bn->get_friendly_name());
    replacements[bn->output(0)] = sum->output(0);
  }
  replace_outputs(f, replacements);
  return replacements.size();
}

namespace pass {

void fold_batch_norm_into_convolution(ExecutionPlan& plan) {
  if (!fusion_enabled(plan) || !cpu::fold_batch_norm_into_convolution(*plan.function)) return;
  ngraph::pass::Manager manager;  // evaluate the folded filters and bias of constant inputs
  manager.register_pass<ngraph::pass::ConstantFolding>(evaluate_constant);
  manager.run_passes(plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
