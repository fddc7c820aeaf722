#include "ngraph/function.hpp"

#include "ngraph/ops/variable.hpp"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace ngraph {

NodeVector topological_sort(const NodeVector& roots) {
  NodeVector order;
  std::unordered_set<Node*> done, on_stack;
  // Iterative DFS: (node, next input index to visit).
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;
  for (const auto& root : roots) {
    if (!root || done.count(root.get())) continue;
    stack.emplace_back(root, 0);
    on_stack.insert(root.get());
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->get_input_size()) {
        auto input = node->input_value(next++).get_node_shared_ptr();
        if (!done.count(input.get())) {
          if (on_stack.count(input.get()))
            throw ngraph_error("graph has a cycle through " + input->get_name());
          on_stack.insert(input.get());
          stack.emplace_back(input, 0);
        }
      } else {
        done.insert(node.get());
        on_stack.erase(node.get());
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  return order;
}

namespace {
ResultVector make_results(const OutputVector& results) {
  ResultVector out;
  for (const auto& r : results) {
    if (!r) throw std::invalid_argument("[Function] a result is a null node");
    auto as_result = std::dynamic_pointer_cast<op::Result>(r.get_node_shared_ptr());
    out.push_back(as_result ? as_result : std::make_shared<op::Result>(r));
  }
  return out;
}
OutputVector to_outputs(const NodeVector& nodes) {
  OutputVector out;
  for (const auto& n : nodes) {
    if (!n) throw std::invalid_argument("[Function] a result is a null node");
    if (n->get_output_size() != 1)
      throw std::invalid_argument("[Function] result " + n->get_name() + " has " +
                                  std::to_string(n->get_output_size()) +
                                  " outputs; pass its outputs instead");
    out.push_back(n->output(0));
  }
  return out;
}
}  // namespace

Function::Function(const OutputVector& results, const ParameterVector& parameters,
                   const std::string& name)
    : m_name(name), m_parameters(parameters), m_results(make_results(results)) {
  std::unordered_set<const Node*> seen;
  for (size_t i = 0; i < m_parameters.size(); ++i) {
    if (!m_parameters[i])
      throw std::invalid_argument("[Function] parameter " + std::to_string(i) + " is null");
    if (!seen.insert(m_parameters[i].get()).second)
      throw std::invalid_argument("[Function] parameter " + m_parameters[i]->get_name() +
                                  " is listed twice");
  }
  validate();
}

Function::Function(const NodeVector& results, const ParameterVector& parameters,
                   const std::string& name)
    : Function(to_outputs(results), parameters, name) {}

Function::Function(const OutputVector& results, const NodeVector& sinks,
                   const ParameterVector& parameters, const std::string& name)
    : Function(results, parameters, name) {
  std::unordered_set<const void*> states;
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (!sinks[i] || sinks[i]->get_output_size() != 0)
      throw std::invalid_argument("[Function] sink " + std::to_string(i) + " (" +
                                  (sinks[i] ? sinks[i]->get_name() : std::string("null")) +
                                  ") is not a node without outputs (Assign, Send)");
    auto assign = std::dynamic_pointer_cast<op::Assign>(sinks[i]);
    if (assign && !states.insert(assign->get_state().get()).second)
      throw std::invalid_argument("[Function] variable " + assign->get_state()->get_name() +
                                  " is updated twice");
  }
  m_sinks = sinks;
  validate();
}

size_t Function::get_parameter_index(const op::Parameter* p) const {
  for (size_t i = 0; i < m_parameters.size(); ++i)
    if (m_parameters[i].get() == p) return i;
  throw std::invalid_argument("[Function] " + p->get_name() + " is not a parameter of " +
                              (m_name.empty() ? std::string("the function") : m_name));
}

void Function::validate() const {
  std::unordered_set<const Node*> params;
  for (const auto& p : m_parameters) params.insert(p.get());
  for (const auto& node : get_ordered_ops())
    if (node->get_type_name() == "Parameter" && !params.count(node.get()))
      throw std::invalid_argument(
          "[Function] the results depend on parameter " + node->get_name() + " (" +
          node->get_element_type().get_type_name() + to_braces(node->get_shape()) +
          ") which is not among the function's parameters");
}

NodeVector Function::get_ordered_ops() const {
  NodeVector roots(m_parameters.begin(), m_parameters.end());
  roots.insert(roots.end(), m_results.begin(), m_results.end());
  roots.insert(roots.end(), m_sinks.begin(), m_sinks.end());
  return topological_sort(roots);
}

std::shared_ptr<Function> Function::clone() const {
  std::unordered_map<const Node*, std::shared_ptr<Node>> map;
  for (const auto& node : get_ordered_ops()) {
    OutputVector inputs;
    for (const auto& in : node->input_values())
      inputs.emplace_back(map.at(in.get_node()), in.get_index());
    auto copy = node->clone_with_new_inputs(inputs);
    copy->set_friendly_name(node->get_friendly_name());
    map[node.get()] = copy;
  }
  ParameterVector params;
  for (const auto& p : m_parameters)
    params.push_back(std::static_pointer_cast<op::Parameter>(map.at(p.get())));
  OutputVector results;
  for (const auto& r : m_results) results.push_back(map.at(r.get()));
  NodeVector sinks;
  for (const auto& s : m_sinks) sinks.push_back(map.at(s.get()));
  return std::make_shared<Function>(results, sinks, params, m_name);
}

std::string Function::to_string() const {
  std::ostringstream os;
  os << "Function " << (m_name.empty() ? "<unnamed>" : m_name) << "\n";
  for (const auto& node : get_ordered_ops()) os << "  " << node->description() << "\n";
  return os.str();
}

void replace_outputs(const Function& f, const std::map<Output, Output>& replacements) {
  if (replacements.empty()) return;
  auto resolve = [&](Output o) {
    for (auto it = replacements.find(o); it != replacements.end(); it = replacements.find(o))
      o = it->second;
    return o;
  };
  // Replacement values may themselves use replaced values (new nodes built on old ones):
  // walk again until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& node : f.get_ordered_ops())
      for (size_t i = 0; i < node->get_input_size(); ++i) {
        const Output& old = node->input_value(i);
        Output rep = resolve(old);
        if (rep == old) continue;
        if (rep.get_shape() != old.get_shape() || rep.get_element_type() != old.get_element_type())
          throw ngraph_error("replace_outputs: " + rep.get_node()->get_name() + " (" +
                             rep.get_element_type().get_type_name() + to_braces(rep.get_shape()) +
                             ") cannot replace " + old.get_node()->get_name() + " (" +
                             old.get_element_type().get_type_name() + to_braces(old.get_shape()) +
                             ")");
        node->set_argument(i, rep);
        changed = true;
      }
  }
}

}  // namespace ngraph
