// Shared-memory placement: where both the input group and the output group of a fused
// allreduce formed, they can live in memory the node's ranks share instead of the arena (one
// region per communicator; whether it is used is decided per call, see the executable). Where
// nothing reads the inputs after the collective (gradients feed only their allreduce), the
// outputs take the inputs' place: the reduction runs in place, with half the memory and a
// third less traffic (SharedRegion::allreduce).
//
// Sharded update: where the sums of an in-place fused allreduce are read only by fused
// elementwise kernels that write nothing but in-place updates of variables read by nothing
// after the allreduce (an optimizer's step), those variables are planned into the region's
// common memory (one copy per node) and, in calls the ranks agree to run so, local rank l
// sums piece l of every rank's gradients straight from the slots and updates piece l of them
// (see the executable and docs/distributed.md).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/plan.hpp"
#include "ngraph/settings.hpp"

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

// Whether step s may write its outputs over its inputs: no later step reads an input, nothing
// copies one out after the steps (a result, an Assign), and both groups have one layout.
bool may_reduce_in_place(const ExecutionPlan& plan, size_t s, const ContiguousGroup& in,
                         const ContiguousGroup& out) {
  if (in.bytes != out.bytes || in.offsets != out.offsets) return false;
  std::set<Output> inputs(in.members.begin(), in.members.end());
  for (const auto& v : plan.read_after_steps())
    if (inputs.count(v)) return false;
  for (size_t t = s + 1; t < plan.steps.size(); ++t)
    for (const auto& v : plan.steps[t].node->input_values())
      if (inputs.count(v)) return false;
  return true;
}
bool sharding_enabled() { return settings::flag("NGRAPH_SHM_SHARDED_UPDATE"); }

// A sharded update of fused allreduce step s (in place): the update steps that sum their
// piece of the gradients themselves, the variables they update, and the members (outputs)
// that are still reduced whole because something else reads them. An update step qualifies
// when it is a fused elementwise kernel whose outputs are all in-place updates of variables
// (returned by no result, read by no later step) and whose other inputs are those variables,
// scalars, constants, or sums no other step needs whole, all of one size; no step after s but the
// update reads those variables, nothing reads them after the steps, and nothing else writes
// them.
struct Sharding {
  std::vector<size_t> readers;
  std::vector<VariableState*> states;
  std::set<size_t> reduced;
};

Sharding sharded_update(const ExecutionPlan& plan, size_t s) {
  Sharding none;
  auto& op = static_cast<FusedAllReduce&>(*plan.steps[s].node);
  auto reduce = op.get_reduce_op();
  element::Type t = op.get_output_element_type(0);
  if ((reduce != distributed::ReduceOp::sum && reduce != distributed::ReduceOp::mean) ||
      (t != element::f32 && t != element::f64))
    return none;
  std::map<Output, size_t> member;
  for (size_t i = 0; i < op.get_output_size(); ++i) member[op.output(i)] = i;
  auto after = plan.read_after_steps();
  std::set<Output> results;
  for (const auto& r : plan.function->get_results()) results.insert(r->input_value(0));
  Sharding found;
  for (const auto& v : after)
    if (member.count(v)) found.reduced.insert(member[v]);
  auto state_of = [](const Output& v) -> VariableState* {
    auto* var = dynamic_cast<const op::Variable*>(v.get_node());
    return var ? var->get_state().get() : nullptr;
  };
  // The variables an update step writes, or empty when it cannot sum its own piece.
  auto writes_of = [&](size_t r) {
    Node& reader = *plan.steps[r].node;
    std::set<VariableState*> writes, no;
    if (reader.get_type_name() != std::string(FusedElementwise::type_name) || reader.get_output_element_type(0) != t)
      return no;
    size_t elements = plan.desc(reader.output(0)).elements();
    for (const auto& o : reader.outputs()) {
      auto bound = plan.update_binding.find(o);
      if (bound == plan.update_binding.end() || !plan.in_place.count(bound->second) || results.count(o) ||
          plan.desc(o).elements() != elements || bound->second->byte_size() != plan.desc(o).bytes() ||
          !writes.insert(bound->second).second)
        return no;
      for (size_t q = s + 1; q < plan.steps.size(); ++q)
        for (const auto& v : plan.steps[q].node->input_values())
          if (v == o) return no;
    }
    for (const auto& v : reader.input_values()) {
      if (member.count(v) && v.get_shape().empty()) return no;  // splatted, not summed: reduced whole
      if (v.get_shape().empty()) continue;  // a scalar: the same for every piece
      if (plan.desc(v).elements() != elements) return no;
      if (member.count(v) || dynamic_cast<const op::Constant*>(v.get_node())) continue;
      auto* state = state_of(v);
      if (!state || !writes.count(state)) return no;
    }
    return writes;
  };
  std::map<size_t, std::set<VariableState*>> candidates;  // step -> the variables it writes
  for (size_t r = s + 1; r < plan.steps.size(); ++r) {
    bool reads = false;
    for (const auto& v : plan.steps[r].node->input_values()) reads = reads || member.count(v) > 0;
    if (reads) candidates[r] = writes_of(r);
  }
  // Until nothing changes: a step that cannot sum its piece needs its sums whole, and a step
  // reading a sum needed whole, or writing a variable another step reads or writes, cannot.
  for (bool changed = true; changed;) {
    changed = false;
    std::map<VariableState*, int> writers;
    for (const auto& [r, writes] : candidates)
      for (auto* state : writes) ++writers[state];
    for (auto& [r, writes] : candidates) {
      bool ok = !writes.empty();
      for (const auto& v : plan.steps[r].node->input_values())
        if (member.count(v) && found.reduced.count(member[v])) ok = false;
      for (auto* state : writes) ok = ok && writers[state] == 1;
      for (size_t q = s; ok && q < plan.steps.size(); ++q) {
        if (q == r) continue;
        for (const auto& v : plan.steps[q].node->input_values())
          if (auto* state = state_of(v); state && writes.count(state)) ok = false;
      }
      for (const auto& v : after)
        if (auto* state = state_of(v); state && writes.count(state)) ok = false;
      for (const auto& sink : plan.function->get_sinks())
        if (auto* assign = dynamic_cast<const op::Assign*>(sink.get());
            assign && writes.count(assign->get_state().get()) &&
            assign->input_value(0).get_node() != plan.steps[r].node.get())
          ok = false;
      if (ok) continue;
      for (const auto& v : plan.steps[r].node->input_values())
        if (member.count(v) && found.reduced.insert(member[v]).second) changed = true;
      if (!writes.empty()) {
        writes.clear();
        changed = true;
      }
    }
  }
  for (const auto& [r, writes] : candidates)
    if (!writes.empty()) {
      found.readers.push_back(r);
      for (const auto& o : plan.steps[r].node->outputs()) found.states.push_back(plan.update_binding.at(o));
    }
  return found.readers.empty() ? none : found;
}
}  // namespace

void place_shared_memory(ExecutionPlan& plan) {
  if (!distributed::shared_memory_enabled()) return;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    auto& step = plan.steps[s];
    auto* op = dynamic_cast<FusedAllReduce*>(step.node.get());
    if (!op) continue;
    auto comm = op->get_communicator();
    if (!comm || comm->size() < 2) continue;
    long gin = whole_group(plan, op->input_values()), gout = whole_group(plan, op->outputs());
    if (gin < 0 || gout < 0) continue;
    auto placement = std::find_if(plan.shared.begin(), plan.shared.end(),
                                  [&](const SharedPlacement& p) { return p.comm == comm; });
    if (placement == plan.shared.end()) placement = plan.shared.insert(plan.shared.end(), {comm, 0, {}, 0});
    auto& in = plan.groups[static_cast<size_t>(gin)];
    auto& out = plan.groups[static_cast<size_t>(gout)];
    bool in_place = may_reduce_in_place(plan, s, in, out);
    for (auto* group : {&in, &out}) {
      if (group == &out && in_place) {
        out.shared_plan = in.shared_plan;
        out.shared_offset = in.shared_offset;
        continue;
      }
      size_t off = (placement->bytes + kAlign - 1) / kAlign * kAlign;
      group->shared_plan = static_cast<int>(placement - plan.shared.begin());
      group->shared_offset = off;
      placement->bytes = off + group->bytes;
    }
    if (in_place && sharding_enabled()) {
      auto sharding = sharded_update(plan, s);
      if (!sharding.readers.empty()) {
        step.sharded = true;
        step.reduced_whole.assign(sharding.reduced.begin(), sharding.reduced.end());
        for (size_t r : sharding.readers) plan.steps[r].sharded = true;
        // In the order the steps update them, so the ranks lay them out alike.
        for (auto* state : sharding.states) {
          size_t off = (placement->common + kAlign - 1) / kAlign * kAlign;
          placement->node_shared.emplace_back(state, off);
          placement->common = off + state->byte_size();
        }
      }
    }
    // The ranks must agree on both (in place moves every later buffer of the region; a
    // sharded update changes what the allreduce does): part of the signature the agreement
    // check compares.
    for (auto& check : plan.checks)
      if (check.comm == comm)
        for (size_t i = 0; i < check.labels.size(); ++i)
          if (check.labels[i] == step.node->get_name())
            check.signature[i] += std::string(in_place ? "; shared memory in place" : "; shared memory apart") +
                                  (step.sharded ? ", sharded update" : "");
  }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
