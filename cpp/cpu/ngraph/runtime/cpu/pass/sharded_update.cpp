// Planning the sharded update (see sharded_update.hpp) and building its step kinds' kernels.
#include "ngraph/runtime/cpu/sharded_update.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "ngraph/ops/variable.hpp"
#include "ngraph/settings.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
constexpr size_t kAlign = 64;

VariableState* state_of(const Output& v) {
  auto* var = dynamic_cast<const op::Variable*>(v.get_node());
  return var ? var->get_state().get() : nullptr;
}

// Which update steps of fused allreduce step s can sum their own piece of its sums.
class ShardedUpdateFinder {
 public:
  ShardedUpdateFinder(const ExecutionPlan& plan, size_t s)
      : m_plan(plan), m_s(s), m_op(static_cast<FusedAllReduce&>(*plan.steps[s].node)),
        m_after(plan.read_after_steps()) {
    for (size_t i = 0; i < m_op.get_output_size(); ++i) m_member[m_op.output(i)] = i;
    for (const auto& r : plan.function->get_results()) m_results.insert(r->input_value(0));
    for (const auto& [v, steps] : plan.readers)
      if (auto* state = state_of(v))
        for (size_t q : steps)
          if (q >= s) m_variable_readers[state].insert(q);
  }

  // The update steps (empty: none qualifies) and the members still reduced whole.
  std::vector<size_t> updates;
  std::set<size_t> whole;

  void find() {
    auto reduce = m_op.get_reduce_op();
    element::Type t = m_op.get_output_element_type(0);
    if ((reduce != distributed::ReduceOp::sum && reduce != distributed::ReduceOp::mean) ||
        (t != element::f32 && t != element::f64))
      return;
    for (const auto& v : m_after)
      if (m_member.count(v)) whole.insert(m_member.at(v));
    std::map<size_t, std::set<VariableState*>> candidates;  // step -> the variables it writes
    for (const auto& [v, i] : m_member)  // the steps reading a sum
      for (size_t r : m_plan.readers.of(v))
        if (r > m_s && !candidates.count(r)) candidates[r] = writes_of(r, t);
    // Until nothing changes: a step that cannot sum its piece needs its sums whole, and a step
    // reading a sum needed whole, or writing a variable another step reads or writes, cannot.
    while (prune(candidates)) {
    }
    for (const auto& [r, writes] : candidates)
      if (!writes.empty()) updates.push_back(r);
  }

 private:

  // The variables update step r writes, or empty when it cannot sum its own piece.
  std::set<VariableState*> writes_of(size_t r, element::Type t) const {
    Node& reader = *m_plan.steps[r].node;
    if (reader.get_type_name() != std::string(FusedElementwise::type_name) || reader.get_output_element_type(0) != t)
      return {};
    size_t elements = m_plan.desc(reader.output(0)).elements();
    std::set<VariableState*> writes;
    for (const auto& o : reader.outputs())
      if (!writes_in_place(o, elements, writes)) return {};
    for (const auto& v : reader.input_values())
      if (!readable_by_piece(v, elements, writes)) return {};
    return writes;
  }
  // Output o is an in-place update of a variable of `elements` elements, returned by no result,
  // read by no later step, and the first output writing it.
  bool writes_in_place(const Output& o, size_t elements, std::set<VariableState*>& writes) const {
    auto bound = m_plan.update_binding.find(o);
    if (bound == m_plan.update_binding.end() || !m_plan.in_place.count(bound->second) || m_results.count(o))
      return false;
    const TensorDesc& d = m_plan.desc(o);
    return d.elements() == elements && bound->second->byte_size() == d.bytes() &&
           writes.insert(bound->second).second && !m_plan.readers.read_after(o, m_s);
  }
  // Input v can be read piece by piece: a scalar (the same for every piece; a scalar sum is
  // splatted, so reduced whole), or of `elements` elements and a sum, a constant, or a
  // variable the step writes.
  bool readable_by_piece(const Output& v, size_t elements, const std::set<VariableState*>& writes) const {
    bool member = m_member.count(v) > 0;
    if (v.get_shape().empty()) return !member;
    if (m_plan.desc(v).elements() != elements) return false;
    if (member || dynamic_cast<const op::Constant*>(v.get_node())) return true;
    auto* state = state_of(v);
    return state && writes.count(state);
  }

  // One round: drops the candidates that cannot sum their piece; true when something changed.
  bool prune(std::map<size_t, std::set<VariableState*>>& candidates) {
    std::map<VariableState*, int> writers;
    for (const auto& [r, writes] : candidates)
      for (auto* state : writes) ++writers[state];
    bool changed = false;
    for (auto& [r, writes] : candidates) {
      if (!writes.empty() && qualifies(r, writes, writers)) continue;
      for (const auto& v : m_plan.steps[r].node->input_values())
        if (m_member.count(v) && whole.insert(m_member.at(v)).second) changed = true;
      if (!writes.empty()) {
        writes.clear();
        changed = true;
      }
    }
    return changed;
  }
  bool qualifies(size_t r, const std::set<VariableState*>& writes, std::map<VariableState*, int>& writers) const {
    for (const auto& v : m_plan.steps[r].node->input_values())
      if (m_member.count(v) && whole.count(m_member.at(v))) return false;
    for (auto* state : writes) {
      if (writers[state] != 1) return false;
      auto it = m_variable_readers.find(state);
      if (it != m_variable_readers.end())
        for (size_t q : it->second)
          if (q != r) return false;
    }
    for (const auto& v : m_after)
      if (auto* state = state_of(v); state && writes.count(state)) return false;
    return !assigned_elsewhere(r, writes);
  }
  // An Assign of one of `writes` whose value another step computes.
  bool assigned_elsewhere(size_t r, const std::set<VariableState*>& writes) const {
    for (const auto& sink : m_plan.function->get_sinks())
      if (auto* assign = dynamic_cast<const op::Assign*>(sink.get());
          assign && writes.count(assign->get_state().get()) &&
          assign->input_value(0).get_node() != m_plan.steps[r].node.get())
        return true;
    return false;
  }

  const ExecutionPlan& m_plan;
  size_t m_s;
  FusedAllReduce& m_op;
  std::set<Output> m_after, m_results;
  std::map<Output, size_t> m_member;
  std::map<VariableState*, std::set<size_t>> m_variable_readers;   // steps >= s reading a variable
};
}  // namespace

namespace {
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Step s's output group (its members' byte offsets, and the group's in the slot).
const ContiguousGroup& output_group(const ExecutionPlan& plan, size_t s) {
  return plan.groups.at(plan.group_of.at(plan.steps[s].node->output(0)));
}

// The members of `group` that step r reads (the sums it sums its piece of).
std::vector<size_t> summed_members(const ExecutionPlan& plan, const ContiguousGroup& group, size_t r) {
  std::vector<size_t> members;
  for (const auto& v : plan.steps[r].node->input_values()) {
    auto it = std::find(group.members.begin(), group.members.end(), v);
    if (it != group.members.end()) members.push_back(static_cast<size_t>(it - group.members.begin()));
  }
  return members;
}

// The group's byte ranges of the members reduced whole (adjacent ones joined), and between them.
void split_group(const ExecutionPlan& plan, ShardedUpdate& u) {
  const ContiguousGroup& group = output_group(plan, u.allreduce);
  std::vector<std::pair<size_t, size_t>> whole;
  for (size_t i : u.whole) whole.emplace_back(group.offsets[i], plan.desc(group.members[i]).bytes());
  std::sort(whole.begin(), whole.end());
  size_t at = 0;
  for (const auto& [begin, bytes] : whole) {
    if (!u.whole_ranges.empty() && u.whole_ranges.back().first + u.whole_ranges.back().second == begin)
      u.whole_ranges.back().second += bytes;
    else
      u.whole_ranges.emplace_back(begin, bytes);
    if (begin > at) u.sharded_ranges.emplace_back(at, begin - at);
    at = begin + bytes;
  }
  if (group.bytes > at) u.sharded_ranges.emplace_back(at, group.bytes - at);
}

// Whether a step other than update step r reads variable `state`, or a result returns it: its
// weights, which the next forward reads (gathered across nodes), rather than optimizer state
// that only its update step reads (left with its owners across nodes).
bool read_by_others(const ExecutionPlan& plan, const VariableState* state, size_t r) {
  for (const auto& [v, steps] : plan.readers)
    if (state_of(v) == state)
      for (size_t q : steps)
        if (q != r) return true;
  for (const auto& result : plan.function->get_results())
    if (state_of(result->input_value(0)) == state) return true;
  return false;
}

// The variables in the common memory (see ShardedUpdate): in planes where each update step
// reads one sum no other update step reads; any other after the planes (the update then runs
// sharded on one node only). The same on every rank: the ranks lay them out alike.
void lay_out_variables(ExecutionPlan& plan, ShardedUpdate& u) {
  auto& placement = plan.shared[u.placement];
  const ContiguousGroup& group = output_group(plan, u.allreduce);
  for (const auto& [off, bytes] : u.sharded_ranges) {
    u.plane_at.push_back(u.plane_bytes);
    u.plane_bytes = round_up(u.plane_bytes + bytes);
  }
  // Where byte `at` of the group lies in a plane (`at` in a sharded range).
  auto in_plane = [&](size_t at) {
    for (size_t j = 0; j < u.sharded_ranges.size(); ++j)
      if (at >= u.sharded_ranges[j].first && at < u.sharded_ranges[j].first + u.sharded_ranges[j].second)
        return u.plane_at[j] + (at - u.sharded_ranges[j].first);
    throw std::logic_error("[CPU] a sharded update reads a sum reduced whole");
  };
  u.planes_at = round_up(placement.common);
  // Across nodes unless turned off (NGRAPH_SHM_SHARDED_ACROSS_NODES=0), on f32 sums. A
  // compressed exchange (16-bit reduce-scatter, f32 allgather of the weights: 1.5x the
  // compressed allreduce's bytes) only when asked (NGRAPH_SHM_SHARDED_COMPRESSED=1).
  auto fused = std::dynamic_pointer_cast<FusedAllReduce>(plan.steps[u.allreduce].node);
  u.across_nodes = settings::flag("NGRAPH_SHM_SHARDED_ACROSS_NODES") && fused &&
                   (fused->get_compression() == distributed::Wire::f32 ||
                    settings::flag("NGRAPH_SHM_SHARDED_COMPRESSED")) &&
                   plan.steps[u.allreduce].node->get_output_element_type(0) == element::f32;
  // Error feedback's residuals are laid out by the pieces of the range exchanged: the
  // reduce-scatter shares the compressed allreduce's only over the same range, the whole group
  // (no member reduced whole), so a call that goes unsharded carries the same errors.
  if (fused && fused->get_compression() != distributed::Wire::f32 && fused->get_error_feedback() &&
      !u.whole_ranges.empty())
    u.across_nodes = false;
  std::set<size_t> homes;
  std::vector<size_t> apart;  // update steps laid out after the planes
  std::vector<std::pair<size_t, std::vector<VariableState*>>> weights, optimizer;  // per update step in the planes
  for (size_t r : u.updates) {
    auto members = summed_members(plan, group, r);
    if (members.size() != 1 || !homes.insert(members[0]).second) {
      apart.push_back(r);
      continue;
    }
    weights.emplace_back(in_plane(group.offsets[members[0]]), std::vector<VariableState*>{});
    optimizer.emplace_back(weights.back().first, std::vector<VariableState*>{});
    for (const auto& o : plan.steps[r].node->outputs()) {
      VariableState* v = plan.update_binding.at(o);
      (read_by_others(plan, v, r) ? weights : optimizer).back().second.push_back(v);
    }
    u.weight_planes = std::max(u.weight_planes, weights.back().second.size());
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    for (size_t k = 0; k < weights[i].second.size(); ++k)
      placement.node_shared.emplace_back(weights[i].second[k], u.planes_at + k * u.plane_bytes + weights[i].first);
    for (size_t k = 0; k < optimizer[i].second.size(); ++k)
      placement.node_shared.emplace_back(optimizer[i].second[k],
                                         u.planes_at + (u.weight_planes + k) * u.plane_bytes + optimizer[i].first);
    u.planes = std::max(u.planes, u.weight_planes + optimizer[i].second.size());
  }
  placement.common = u.planes_at + u.planes * u.plane_bytes;
  u.across_nodes = u.across_nodes && apart.empty();
  for (size_t r : apart)
    for (const auto& o : plan.steps[r].node->outputs()) {
      VariableState* state = plan.update_binding.at(o);
      size_t off = round_up(placement.common);
      placement.node_shared.emplace_back(state, off);
      placement.common = off + state->byte_size();
    }
}
}  // namespace

bool plan_sharded_update(ExecutionPlan& plan, size_t s, size_t p) {
  ShardedUpdateFinder finder(plan, s);
  finder.find();
  if (finder.updates.empty()) return false;
  ShardedUpdate update;
  update.placement = p;
  update.allreduce = s;
  update.updates = finder.updates;
  update.whole.assign(finder.whole.begin(), finder.whole.end());
  split_group(plan, update);
  lay_out_variables(plan, update);
  plan.sharded.push_back(std::move(update));
  return true;
}

namespace {

Kernel arrive_kernel(const ExecutionPlan& plan, const ShardedUpdate& u) {
  const auto& op = static_cast<const FusedAllReduce&>(*plan.steps[u.allreduce].node);
  const ContiguousGroup& group = output_group(plan, u.allreduce);
  element::Type t = op.get_output_element_type(0);
  return sharded_arrive_kernel(plan.shared[u.placement].binding, group.shared_offset, group.bytes / t.size(),
                               u.whole_ranges, u.sharded_ranges, t, op.get_reduce_op(), op.get_compression(),
                               op.get_error_feedback());
}

// The update step r's kernel in a sharded call; its scratch must be the plain kernel's (the
// memory planner placed that).
Kernel update_kernel(ExecutionPlan& plan, const ShardedUpdate& u, size_t r) {
  auto& step = plan.steps[r];
  Node& node = *step.node;
  const ContiguousGroup& group = output_group(plan, u.allreduce);
  std::vector<SummedInput> summed;
  for (size_t i = 0; i < node.get_input_size(); ++i) {
    auto it = std::find(group.members.begin(), group.members.end(), node.input_value(i));
    if (it != group.members.end())
      summed.push_back({i, group.shared_offset + group.offsets[static_cast<size_t>(it - group.members.begin())]});
  }
  std::vector<const TensorDesc*> in, out;
  for (const auto& v : node.input_values()) in.push_back(&plan.desc(v));
  for (const auto& o : node.outputs()) out.push_back(&plan.desc(o));
  KernelContext ctx(node, std::move(in), std::move(out), *plan.call_state, false);
  bool mean = static_cast<const FusedAllReduce&>(*plan.steps[u.allreduce].node).get_reduce_op() ==
              distributed::ReduceOp::mean;
  // Across nodes: the sharded range its (one) sum lies in.
  std::pair<size_t, size_t> range{0, 0};
  for (const auto& [off, n] : u.sharded_ranges)
    if (!summed.empty() && summed[0].offset >= group.shared_offset + off &&
        summed[0].offset < group.shared_offset + off + n)
      range = {group.shared_offset + off, n};
  Kernel k = sharded_update_kernel(ctx, plan.shared[u.placement].binding, std::move(summed), mean,
                                   range.first, range.second);
  if (ctx.scratch_bytes() != step.scratch_bytes)
    throw std::logic_error("[CPU] the sharded update of " + node.get_name() + " asks for other scratch than its plain kernel");
  return k;
}
}  // namespace

void select_sharded_kernels(ExecutionPlan& plan) {
  for (const auto& u : plan.sharded) {
    plan.steps[u.allreduce].sharded_kernel = arrive_kernel(plan, u);
    for (size_t r : u.updates) plan.steps[r].sharded_kernel = update_kernel(plan, u, r);
  }
}

}  // namespace pass

Kernel sharded_arrive_kernel(std::shared_ptr<const RegionBinding> binding, size_t at, size_t elements,
                             std::vector<std::pair<size_t, size_t>> whole,
                             std::vector<std::pair<size_t, size_t>> sharded, element::Type type,
                             distributed::ReduceOp op, distributed::Wire wire, bool error_feedback) {
  std::string what = "[AllReduce] " + std::to_string(elements) + " x " + type.get_type_name() + " " +
                     to_string(op) + " in shared memory, summed by the sharded update";
  return [binding, at, whole, sharded, type, op, wire, error_feedback, what](const void* const*, void* const*) {
    distributed::SharedRegion& region = *binding->region;
    // Each range's compression, with the residuals its compressed allreduce would carry.
    auto compression = [&](size_t off, size_t count) {
      return distributed::Compression{wire, error_feedback ? binding->residual(at + off, count) : nullptr};
    };
    if (binding->nodes > 1 && wire != distributed::Wire::f32) {  // planned: f32 sums
      for (const auto& [off, n] : sharded)
        region.reduce_scatter_compressed(at + off, n / type.size(), op, compression(off, n / type.size()), what);
      for (const auto& [off, n] : whole)
        region.allreduce_compressed(at + off, at + off, n / type.size(), type, op, compression(off, n / type.size()));
      return;
    }
    if (binding->nodes > 1) {  // this rank's share of each range summed over every rank (planned: f32)
      for (const auto& [off, n] : sharded) region.reduce_scatter(at + off, n / type.size(), op, what);
      for (const auto& [off, n] : whole) region.allreduce(at + off, at + off, n / type.size(), type, op);
      return;
    }
    // Every rank's gradients are written: the update kernels sum them piece by piece.
    region.arrive(what, "before the sharded update");
    for (const auto& [off, n] : whole) region.allreduce(at + off, at + off, n / type.size(), type, op);
  };
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
