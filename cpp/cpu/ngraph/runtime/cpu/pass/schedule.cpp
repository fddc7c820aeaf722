// The order steps run in, and the removal of Results used inside the graph and of
// GetOutputElements.
#include <set>
#include <unordered_map>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

// A Result used inside the graph (not only as an output) passes its value through, and so
// does every GetOutputElement: its users read output n of the multi-output node directly, so
// it never runs (or copies), with or without the graph optimisations.
void pass_results_through(ExecutionPlan& plan) {
  std::map<Output, Output> through;
  for (const auto& node : plan.function->get_ordered_ops()) {
    const std::string& type = node->get_type_name();
    if (type == "Result" || type == op::GetOutputElement::type_name)
      through[node->output(0)] = node->input_value(0);
  }
  replace_outputs(*plan.function, through);
}

namespace {
// 0: start as early as possible; 2: run as late as possible; 1: in between.
int urgency(const Node& node, const std::set<const Node*>& update_values) {
  const std::string& t = node.get_type_name();
  if (t == "Send" || t == FusedAllReduce::type_name) return 0;
  if (t == "Recv" || update_values.count(&node)) return 2;
  for (const auto& in : node.input_values())
    if (in.get_node()->get_type_name() == FusedAllReduce::type_name) return 2;
  return 1;
}
}  // namespace

// A topological order that starts every Send and fused allreduce as soon as its value is ready
// and runs every Recv, every user of an allreduce's result and every variable update's value
// as late as possible: ranks exchanging values in a ring never all block in Recv,
// communication overlaps computation, and updates can overwrite their variable in place (no
// reader of the old value is left). Ties keep the function's order, so every rank schedules
// the same graph the same way. Then the reader index of the steps, which later passes ask.
void schedule(ExecutionPlan& plan) {
  NodeVector ops = plan.function->get_ordered_ops();
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) index[ops[i].get()] = i;
  std::vector<size_t> missing(ops.size(), 0);
  std::vector<std::vector<size_t>> users(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    for (const auto& in : ops[i]->input_values()) {
      users[index.at(in.get_node())].push_back(i);
      ++missing[i];
    }
  std::set<const Node*> update_values;
  for (const auto& node : ops)
    if (node->get_type_name() == "Assign") update_values.insert(node->input_value(0).get_node());
  std::set<std::pair<int, size_t>> ready;
  for (size_t i = 0; i < ops.size(); ++i)
    if (!missing[i]) ready.emplace(urgency(*ops[i], update_values), i);
  plan.ops.clear();
  plan.steps.clear();
  while (!ready.empty()) {
    size_t i = ready.begin()->second;
    ready.erase(ready.begin());
    plan.ops.push_back(ops[i]);
    if (!is_structural_op(ops[i]->get_type_name())) {
      PlannedStep step;
      step.node = ops[i];
      plan.steps.push_back(std::move(step));
    }
    for (size_t u : users[i])
      if (--missing[u] == 0) ready.emplace(urgency(*ops[u], update_values), u);
  }
  plan.readers.build(plan.steps);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
