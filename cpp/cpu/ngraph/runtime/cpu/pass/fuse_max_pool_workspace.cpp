// Max pooling paired with its backprop: the forward writes oneDNN's workspace (where each
// maximum is) and the backprop reads it instead of running the forward again.
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/max_pool_with_workspace.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
// The same windows over the same data: MaxPoolBackprop has no ceil_mode, its padding above is
// the forward's effective one.
bool same_geometry(const op::MaxPool& f, const op::MaxPoolBackprop& b) {
  const Shape& data = f.get_input_shape(0);
  return f.get_window_shape() == b.get_window_shape() &&
         f.get_window_movement_strides() == b.get_window_movement_strides() &&
         f.get_padding_below() == b.get_padding_below() &&
         op::effective_padding_above(data, f) == b.get_padding_above();
}
}  // namespace

size_t fuse_max_pool_workspace(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  std::map<Output, std::vector<op::MaxPool*>> pools;  // by argument
  for (const auto& node : ops)
    if (auto* m = dynamic_cast<op::MaxPool*>(node.get()); m && max_pool_workspace_supported(*m))
      pools[m->input_value(0)].push_back(m);
  std::map<const Node*, std::shared_ptr<MaxPoolWithWorkspace>> paired;
  std::map<Output, Output> replacements;
  size_t fused = 0;
  for (const auto& node : ops) {
    auto* b = dynamic_cast<op::MaxPoolBackprop*>(node.get());
    if (!b) continue;
    auto it = pools.find(b->input_value(0));
    if (it == pools.end()) continue;
    for (op::MaxPool* m : it->second) {
      if (!same_geometry(*m, *b)) continue;
      auto& forward = paired[m];
      if (!forward) {
        forward = std::make_shared<MaxPoolWithWorkspace>(*m);
        forward->set_friendly_name(m->get_friendly_name());
        replacements[m->output(0)] = forward->output(0);
      }
      auto backward = std::make_shared<MaxPoolBackpropWithWorkspace>(*b, forward->output(1));
      replacements[b->output(0)] = backward->output(0);
      ++fused;
      break;
    }
  }
  replace_outputs(f, replacements);
  return fused;
}

namespace pass {

void fuse_max_pool_workspace(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_max_pool_workspace(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
