// In-place variable updates: an update computed by a fused elementwise kernel that reads the
// variable (w - lr * g) may write into the variable's own buffer - element i is read before it
// is written - when it runs after every other reader of the old value and nothing that could
// fail runs after it (a failed call must leave the variables as they were). Then the variable
// keeps one buffer: less memory, and the update reads and writes the same lines. A kernel
// with several outputs (momentum and weights in one pass) may update each of its variables so.
#include <string>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
// Whether a Send or a collective reads v: it may hold the buffer until the end of the call.
bool held_by_communication(const ExecutionPlan& plan, const Output& v) {
  for (size_t r : plan.readers.of(v)) {
    const std::string& type = plan.steps[r].node->get_type_name();
    if (type == "Send" || type == FusedAllReduce::type_name) return true;
  }
  return false;
}
}  // namespace

void plan_in_place_updates(ExecutionPlan& plan) {
  std::map<VariableState*, Output> var_node;  // the Variable node of each state
  for (const auto& node : plan.ops)
    if (auto* v = dynamic_cast<op::Variable*>(node.get())) var_node[v->get_state().get()] = Output(node);
  // Values copied out after the steps (Assign(y, x) copies x's old value into y at the end,
  // so x cannot change in place).
  const std::set<Output> read_at_end = plan.read_after_steps();
  const auto& steps = plan.steps;
  // Only the trailing run of update steps qualifies: nothing after them can fail (a reorder
  // of a gradient into its update's layout moves data between planned buffers: it cannot).
  for (size_t s = steps.size(); s-- > 0;) {
    const Node& node = *steps[s].node;
    if (node.get_type_name() == std::string(Reorder::type_name)) continue;
    if (node.get_type_name() != FusedElementwise::type_name) break;
    std::vector<VariableState*> states;
    for (const auto& out : steps[s].node->outputs()) {
      auto bound = plan.update_binding.find(out);
      if (bound != plan.update_binding.end()) states.push_back(bound->second);
    }
    if (states.empty()) break;
    for (VariableState* state : states) {
      auto vn = var_node.find(state);
      if (vn == var_node.end() || read_at_end.count(vn->second)) continue;
      const Output& variable = vn->second;
      if (plan.readers.reads(s, variable) && !plan.readers.read_after(variable, s) &&
          !held_by_communication(plan, variable))
        plan.in_place.insert(state);
    }
  }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
