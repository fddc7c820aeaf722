// Shared-memory placement: where both the input group and the output group of a fused
// allreduce formed, they can live in memory the node's ranks share instead of the arena (one
// region per communicator; whether it is used is decided per call, see the executable).
#include <algorithm>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
constexpr size_t kAlign = 64;

// The group holding exactly `values`, or -1.
long whole_group(const ExecutionPlan& plan, const std::vector<Output>& values) {
  auto it = plan.group_of.find(values.at(0));
  if (it == plan.group_of.end() || plan.groups[it->second].members != values) return -1;
  return static_cast<long>(it->second);
}
}  // namespace

void place_shared_memory(ExecutionPlan& plan) {
  if (!distributed::shared_memory_enabled()) return;
  for (const auto& step : plan.steps) {
    auto* op = dynamic_cast<FusedAllReduce*>(step.node.get());
    if (!op) continue;
    auto comm = op->get_communicator();
    if (!comm || comm->size() < 2) continue;
    long gin = whole_group(plan, op->input_values()), gout = whole_group(plan, op->outputs());
    if (gin < 0 || gout < 0) continue;
    auto placement = std::find_if(plan.shared.begin(), plan.shared.end(),
                                  [&](const SharedPlacement& p) { return p.comm == comm; });
    if (placement == plan.shared.end()) placement = plan.shared.insert(plan.shared.end(), {comm, 0});
    for (long g : {gin, gout}) {
      auto& group = plan.groups[static_cast<size_t>(g)];
      size_t off = (placement->bytes + kAlign - 1) / kAlign * kAlign;
      group.shared_plan = static_cast<int>(placement - plan.shared.begin());
      group.shared_offset = off;
      placement->bytes = off + group.bytes;
    }
  }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
