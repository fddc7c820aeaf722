// Allreduce layouts: a fused allreduce's sum that only a Reorder reads (a weight gradient a
// matmul writes row-major, whose update keeps the weights in oneDNN's blocked layout) is
// reduced in the layout the Reorder makes: the Reorder moves before the allreduce, onto the
// rank's own gradient. It costs the same there, and the update then reads the sums as the
// allreduce leaves them, so on one node it can sum its piece of them itself (the sharded
// update, pass/sharded_update.cpp) instead of the allreduce reducing that member whole and
// every rank reordering and updating all of it.
//
// Reductions are elementwise and keep zeros zero, so any layout, padded or not, reduces alike.
#include <map>
#include <vector>

#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

void reduce_in_readers_layouts(ExecutionPlan& plan) {
  // Blocked layouts cross between ranks only with this option (the fused allreduce's layout
  // rule passes them through only then).
  if (!plan.options.variable_layouts) return;
  std::map<Output, std::vector<Node*>> readers;
  std::vector<Node*> allreduces;
  for (const auto& node : plan.function->get_ordered_ops()) {
    for (const auto& in : node->input_values()) readers[in].push_back(node.get());
    if (node->get_type_name() == std::string(FusedAllReduce::type_name))
      allreduces.push_back(node.get());
  }
  std::map<Output, Output> replacements;
  for (Node* allreduce : allreduces)
    for (size_t i = 0; i < allreduce->get_output_size(); ++i) {
      const auto& users = readers[allreduce->output(i)];
      if (users.size() != 1 || users[0]->get_type_name() != std::string(Reorder::type_name))
        continue;
      Node& reorder = *users[0];
      const TensorDesc to = plan.desc(reorder.output(0));
      auto moved = std::make_shared<Reorder>(allreduce->input_value(i));
      moved->set_friendly_name(reorder.get_friendly_name());
      plan.descs[moved->output(0)] = to;
      allreduce->set_argument(i, moved->output(0));
      plan.descs[allreduce->output(i)] = to;
      replacements[reorder.output(0)] = allreduce->output(i);
    }
  replace_outputs(*plan.function, replacements);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
