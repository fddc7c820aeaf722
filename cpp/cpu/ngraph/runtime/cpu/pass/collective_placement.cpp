// Collective placement: which fused allreduces overlap with computation (and where the
// executable waits for them), the contiguous layout of their inputs and outputs, and the
// signatures the ranks must agree on before running.
#include <algorithm>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {

// Elements computed between an allreduce's start and its first use for overlapping to pay:
// Open MPI's non-blocking allreduce is slower than its blocking one.
constexpr size_t kOverlapElements = size_t(1) << 18;

// Lays `values` out end to end, when each is a computed value of no other group, bound to
// nothing, and listed once. True when the values are one range (one value always is).
bool try_group(ExecutionPlan& plan, const std::vector<Output>& values) {
  for (const auto& v : values)
    if (plan.group_of.count(v) || !plan.is_arena_value(v)) return values.size() == 1;
  if (std::set<Output>(values.begin(), values.end()).size() != values.size()) return values.size() == 1;
  ContiguousGroup g;
  for (const auto& v : values) {
    size_t es = v.get_element_type().size();
    g.bytes = (g.bytes + es - 1) / es * es;
    g.offsets.push_back(g.bytes);
    g.bytes += plan.desc(v).bytes();
    g.members.push_back(v);
    plan.group_of[v] = plan.groups.size();
  }
  plan.groups.push_back(std::move(g));
  return true;
}

void add_check(ExecutionPlan& plan, const Node& node) {
  auto* coll = dynamic_cast<const op::Collective*>(&node);
  if (!coll) return;
  std::string sig = coll->collective_signature();
  if (sig.empty()) return;
  // Blocked layouts (oneDNN's choice, which depends on the CPU) are compared too: ranks
  // reducing the same elements in different orders would sum unrelated values.
  for (size_t i = 0; i < node.get_input_size(); ++i)
    if (const TensorDesc& d = plan.desc(node.input_value(i)); !d.is_plain())
      sig += "; input " + std::to_string(i) + " " + d.to_string();
  plan.distributed.add(coll->get_communicator(), sig, node.get_name());
}

}  // namespace

void place_collectives(ExecutionPlan& plan) {
  auto& steps = plan.steps;
  size_t n = steps.size();
  for (size_t s = 0; s < n; ++s) {
    add_check(plan, *steps[s].node);
    if (steps[s].node->get_type_name() != FusedAllReduce::type_name) continue;
    // The first step that reads a result of the collective.
    size_t w = n;
    for (const auto& out : steps[s].node->outputs())
      w = std::min(w, plan.readers.first_after(out, s));
    size_t between = 0;
    for (size_t t = s + 1; t < w; ++t)
      for (const auto& out : steps[t].node->outputs()) between += plan.desc(out).elements();
    bool ins = try_group(plan, steps[s].node->input_values());
    bool outs = try_group(plan, steps[s].node->outputs());
    steps[s].buffers.contiguous = ins && outs;
    if (between < kOverlapElements) continue;
    steps[s].overlap = true;
    if (w < n) steps[w].waits_before.push_back(s);
    // The collective reads its inputs until the executable waits for it.
    size_t hold = std::min(w, n - 1);
    for (const auto& in : steps[s].node->input_values())
      plan.last_use[in] = std::max(plan.last_use[in], hold);
  }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
