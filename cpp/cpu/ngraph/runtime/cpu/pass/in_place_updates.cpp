// In-place variable updates: an update computed by a fused elementwise kernel that reads the
// variable (w - lr * g) may write into the variable's own buffer - element i is read before it
// is written - when it runs after every other reader of the old value and nothing that could
// fail runs after it (a failed call must leave the variables as they were). Then the variable
// keeps one buffer: less memory, and the update reads and writes the same lines. A kernel
// with several outputs (momentum and weights in one pass) may update each of its variables so.
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
bool reads(const Node& node, const Node* value) {
  for (const auto& in : node.input_values())
    if (in.get_node() == value) return true;
  return false;
}
}  // namespace

void plan_in_place_updates(ExecutionPlan& plan) {
  std::map<VariableState*, const Node*> var_node;  // the Variable node of each state
  for (const auto& node : plan.ops)
    if (auto* v = dynamic_cast<op::Variable*>(node.get())) var_node[v->get_state().get()] = v;
  // Values copied out after the steps: what results read, and what updates take as they are
  // (Assign(y, x) copies x's old value into y at the end, so x cannot change in place).
  std::set<const Node*> read_at_end;
  for (const auto& r : plan.function->get_results()) read_at_end.insert(r->input_value(0).get_node());
  for (const auto& sink : plan.function->get_sinks())
    if (sink->get_type_name() == op::Assign::type_name)
      read_at_end.insert(sink->input_value(0).get_node());
  const auto& steps = plan.steps;
  // Only the trailing run of update steps qualifies: nothing after them can fail.
  for (size_t s = steps.size(); s-- > 0;) {
    const Node& node = *steps[s].node;
    if (node.get_type_name() != FusedElementwise::type_name) break;
    std::vector<VariableState*> states;
    for (const auto& out : steps[s].node->outputs()) {
      auto bound = plan.update_binding.find(out);
      if (bound != plan.update_binding.end()) states.push_back(bound->second);
    }
    if (states.empty()) break;
    for (VariableState* state : states) {
      auto vn = var_node.find(state);
      if (vn == var_node.end() || read_at_end.count(vn->second) || !reads(node, vn->second))
        continue;
      bool ok = true;
      for (size_t t = s + 1; ok && t < steps.size(); ++t) ok = !reads(*steps[t].node, vn->second);
      for (const auto& other : steps)  // nor may a Send or collective hold it
        if (ok && (other.node->get_type_name() == "Send" ||
                   other.node->get_type_name() == FusedAllReduce::type_name))
          ok = !reads(*other.node, vn->second);
      if (ok) plan.in_place.insert(state);
    }
  }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
