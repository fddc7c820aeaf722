// Shared-memory placement: where both the input group and the output group of a fused
// allreduce formed, they can live in memory the node's ranks share instead of the arena (one
// region per communicator; the executable makes it in its first checked call, see
// shared_memory.hpp). Where nothing reads the inputs after the collective (gradients feed
// only their allreduce), the outputs take the inputs' place: the reduction runs in place,
// with half the memory and a third less traffic (SharedRegion::allreduce). Such an in-place
// allreduce may then carry a sharded update (pass/sharded_update.cpp).
#include <algorithm>
#include <set>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/plan.hpp"
#include "ngraph/runtime/cpu/sharded_update.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
constexpr size_t kAlign = 64;

// The group holding exactly `values`, or null.
ContiguousGroup* whole_group(ExecutionPlan& plan, const std::vector<Output>& values) {
  auto it = plan.group_of.find(values.at(0));
  if (it == plan.group_of.end() || plan.groups[it->second].members != values) return nullptr;
  return &plan.groups[it->second];
}

// Whether step s may write its outputs over its inputs: no later step reads an input, nothing
// copies one out after the steps (a result, an Assign), and both groups have one layout.
bool may_reduce_in_place(const ExecutionPlan& plan, size_t s, const ContiguousGroup& in,
                         const ContiguousGroup& out) {
  if (in.bytes != out.bytes || in.offsets != out.offsets) return false;
  std::set<Output> after = plan.read_after_steps();
  for (const auto& v : in.members)
    if (after.count(v) || plan.readers.read_after(v, s)) return false;
  return true;
}

// The placement of `comm` (made on first use).
size_t placement_of(ExecutionPlan& plan, const std::shared_ptr<distributed::Communicator>& comm) {
  for (size_t i = 0; i < plan.shared.size(); ++i)
    if (plan.shared[i].comm == comm) return i;
  plan.shared.push_back({});
  plan.shared.back().comm = comm;
  return plan.shared.size() - 1;
}

// Places `group` at the next 64-byte boundary of placement p's slot.
void place(ExecutionPlan& plan, size_t p, ContiguousGroup& group) {
  auto& placement = plan.shared[p];
  size_t off = (placement.bytes + kAlign - 1) / kAlign * kAlign;
  group.shared_plan = static_cast<int>(p);
  group.shared_offset = off;
  placement.bytes = off + group.bytes;
}

// Places fused allreduce step s's groups in shared memory (the output group over the input
// group when it may reduce in place). Returns whether it does so in place.
bool place_step(ExecutionPlan& plan, size_t s, size_t p, ContiguousGroup& in, ContiguousGroup& out) {
  bool in_place = may_reduce_in_place(plan, s, in, out);
  place(plan, p, in);
  if (in_place) {
    out.shared_plan = in.shared_plan;
    out.shared_offset = in.shared_offset;
  } else {
    place(plan, p, out);
  }
  auto& buffers = plan.steps[s].buffers;
  buffers.shared = plan.shared[p].binding;
  buffers.in_offset = in.shared_offset;
  buffers.out_offset = out.shared_offset;
  return in_place;
}

bool sharding_enabled() { return settings::flag("NGRAPH_SHM_SHARDED_UPDATE"); }
}  // namespace

void place_shared_memory(ExecutionPlan& plan) {
  if (!distributed::shared_memory_enabled()) return;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    auto* op = dynamic_cast<FusedAllReduce*>(plan.steps[s].node.get());
    if (!op) continue;
    auto comm = op->get_communicator();
    if (!comm || comm->size() < 2) continue;
    ContiguousGroup* in = whole_group(plan, op->input_values());
    ContiguousGroup* out = whole_group(plan, op->outputs());
    if (!in || !out) continue;
    size_t p = placement_of(plan, comm);
    bool in_place = place_step(plan, s, p, *in, *out);
    bool sharded = in_place && sharding_enabled() && plan_sharded_update(plan, s, p);
    // The ranks must agree on both (in place moves every later buffer of the region; a
    // sharded update changes what the allreduce does): part of the signature the agreement
    // check compares.
    if (std::string* sig = plan.distributed.last_signature(*comm, op->get_name()))
      *sig += std::string(in_place ? "; shared memory in place" : "; shared memory apart") +
              (sharded ? ", sharded update" : "");
  }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
