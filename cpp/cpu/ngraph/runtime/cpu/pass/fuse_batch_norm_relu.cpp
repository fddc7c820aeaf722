// Batch norm + ReLU as one oneDNN primitive (BatchNormRelu), and in training its gradient
// through the ReLU (BatchNormReluBackprop, reading the forward's mask).
#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/batch_norm_relu.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
// The output `v` stands for: itself, or what the GetOutputElements it comes from read.
Output through_get_output_element(const Output& v) {
  Output x = v;
  while (auto* goe = dynamic_cast<op::GetOutputElement*>(x.get_node())) x = goe->input_value(0);
  return x;
}

// The BatchNormTrainingBackprops whose delta is ReLU's gradient read from `relu`'s output,
// Select(Greater(relu, 0), d, 0) (as Relu's gradient rule builds it), read only there, on the
// same data as `bn`, with its epsilon; with each, d.
std::vector<std::pair<Node*, Output>> relu_gradient_backprops(const Node& bn, Node& relu,
                                                             const pass::Users& users) {
  std::vector<std::pair<Node*, Output>> found;
  const auto* greaters = users.of(relu.output(0));
  if (!greaters) return found;
  for (Node* g : *greaters) {
    if (g->get_type_name() != op::Greater::type_name || g->input_value(0) != relu.output(0) ||
        !autodiff::is_zeros(g->input_value(1)) || !users.of(g->output(0)))
      continue;
    for (Node* sel : *users.of(g->output(0))) {
      if (sel->get_type_name() != op::Select::type_name || sel->input_value(0) != g->output(0) ||
          !autodiff::is_zeros(sel->input_value(2)) ||
          sel->input_value(1).get_shape() != relu.get_output_shape(0))
        continue;
      Node* b = users.single(sel->output(0));
      if (!b || b->get_type_name() != op::BatchNormTrainingBackprop::type_name) continue;
      const auto& base = dynamic_cast<const op::BatchNormBase&>(*b);
      if (b->input_value(op::BatchNormBase::INPUT_DELTA) != sel->output(0) ||
          b->input_value(op::BatchNormBase::INPUT_DATA) != bn.input_value(op::BatchNormBase::INPUT_DATA) ||
          base.get_eps_value() != dynamic_cast<const op::BatchNormBase&>(bn).get_eps_value())
        continue;
      found.emplace_back(b, sel->input_value(1));
    }
  }
  return found;
}
}  // namespace

size_t fuse_batch_norm_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::map<Output, Output> replacements;
  size_t fused_count = 0;
  for (const auto& node : ops) {
    if (node->get_type_name() != "Relu") continue;
    Output v = node->input_value(0);
    Output normalized = through_get_output_element(v);
    Node* bn = normalized.get_node();
    const std::string& t = bn->get_type_name();
    if (normalized.get_index() != 0 ||
        (t != op::BatchNormTraining::type_name && t != op::BatchNormInference::type_name))
      continue;
    // The ReLU (through its GetOutputElement, if any) is the normalized value's only reader.
    bool only = users.single(v) == node.get();
    if (v != normalized) only = only && users.single(normalized) == v.get_node();
    if (!only) continue;
    auto backprops = t == op::BatchNormTraining::type_name
                         ? relu_gradient_backprops(*bn, *node, users)
                         : std::vector<std::pair<Node*, Output>>{};
    auto fused = std::make_shared<BatchNormRelu>(*bn, !backprops.empty());
    fused->set_friendly_name(bn->get_friendly_name());
    replacements[node->output(0)] = fused->output(0);
    for (size_t i = 1; i < bn->get_output_size(); ++i) replacements[bn->output(i)] = fused->output(i);
    ++fused_count;
    for (auto& [backprop, delta] : backprops) {
      auto grad = std::make_shared<BatchNormReluBackprop>(*backprop, delta,
                                                          fused->output(BatchNormRelu::OUTPUT_MASK));
      grad->set_friendly_name(backprop->get_friendly_name());
      for (size_t i = 0; i < backprop->get_output_size(); ++i)
        replacements[backprop->output(i)] = grad->output(i);
      ++fused_count;
    }
  }
  replace_outputs(f, replacements);
  return fused_count;
}

namespace pass {

void fuse_batch_norm_relu(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_batch_norm_relu(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
