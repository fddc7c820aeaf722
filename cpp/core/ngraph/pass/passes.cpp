#include <unordered_map>

#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"

namespace ngraph {
namespace pass {

bool Manager::run_passes(const std::shared_ptr<Function>& f) {
  bool changed = false;
  for (auto& p : m_passes) {
    bool c = p->run_on_function(f);
    m_log.emplace_back(p->name(), c);
    changed |= c;
  }
  if (changed) f->validate();
  return changed;
}

namespace {

// True when `node` returns its first input unchanged.
bool is_identity(const Node& node) {
  const std::string& t = node.get_type_name();
  if (node.get_input_size() == 0 || node.get_output_size() != 1) return false;
  const Output& in = node.input_value(0);
  if (in.get_shape() != node.get_shape() || in.get_element_type() != node.get_element_type())
    return false;
  if (t == "Reshape") return !static_cast<const op::Reshape&>(node).is_transpose();
  if (t == "Broadcast") return static_cast<const op::Broadcast&>(node).get_broadcast_axes().empty();
  if (t == "Reverse") {
    // Reversing only axes of size <= 1 changes nothing.
    for (auto a : static_cast<const op::Reverse&>(node).get_reversed_axes())
      if (in.get_shape()[a] > 1) return false;
    return true;
  }
  if (t == "Sum" || t == "Product" || t == "Max" || t == "Min" || t == "Convert" ||
      t == "Slice")
    return true;  // same shape and type in and out: no axes reduced / whole range / same type
  if (t == "Pad") {
    auto& p = static_cast<const op::Pad&>(node);
    for (auto v : p.get_padding_below()) if (v != 0) return false;
    for (auto v : p.get_padding_above()) if (v != 0) return false;
    return true;
  }
  if (t == "Concat") return node.get_input_size() == 1;
  if (t == "StopGradient") return true;  // only matters to autodiff
  if (t == "GetOutputElement") return true;  // users read output n of its input directly
  return false;
}

}  // namespace

bool DeadNodeElimination::run_on_function(const std::shared_ptr<Function>& f) {
  std::map<Output, Output> replacements;
  for (const auto& node : f->get_ordered_ops())
    if (is_identity(*node)) replacements[node->output(0)] = node->input_value(0);
  size_t before = f->get_ordered_ops().size();
  replace_outputs(*f, replacements);
  return !replacements.empty() || f->get_ordered_ops().size() != before;
}

bool CommonSubexpressionElimination::run_on_function(const std::shared_ptr<Function>& f) {
  // Inputs are canonical by the time a node is visited (topological order), so one key per
  // (op, attributes, inputs) finds every duplicate.
  std::unordered_multimap<size_t, std::shared_ptr<Node>> seen;
  std::map<Output, Output> replacements;
  bool changed = false;
  for (const auto& node : f->get_ordered_ops()) {
    for (size_t i = 0; i < node->get_input_size(); ++i) {
      auto it = replacements.find(node->input_value(i));
      if (it != replacements.end()) {
        node->set_argument(i, it->second);
        changed = true;
      }
    }
    if (!node->is_pure()) continue;
    size_t h = std::hash<std::string>()(node->get_type_name()) ^ (node->attributes_hash() * 31);
    for (const auto& in : node->input_values())
      h = h * 1000003 ^ (std::hash<const void*>()(in.get_node()) + in.get_index());
    std::shared_ptr<Node> match;
    auto range = seen.equal_range(h);
    for (auto it = range.first; it != range.second && !match; ++it) {
      auto& other = it->second;
      if (other->input_values() == node->input_values() && other->attributes_equal(*node))
        match = other;
    }
    if (match) {
      for (size_t o = 0; o < node->get_output_size(); ++o)
        replacements[node->output(o)] = match->output(o);
    } else {
      seen.emplace(h, node);
    }
  }
  return changed;
}

ConstantFolding::ConstantFolding(Evaluator evaluator, size_t max_elements)
    : m_evaluator(std::move(evaluator)), m_max_elements(max_elements) {
  if (!m_evaluator)
    throw std::invalid_argument(
        "ConstantFolding needs an evaluator that computes a node's value (the core runs no "
        "nodes itself), e.g. runtime::cpu::evaluate_constant from "
        "ngraph/runtime/cpu/constant_evaluator.hpp");
}

bool ConstantFolding::run_on_function(const std::shared_ptr<Function>& f) {
  std::map<Output, Output> replacements;
  for (const auto& node : f->get_ordered_ops()) {
    if (!node->is_pure() || node->get_input_size() == 0 || node->get_output_size() != 1)
      continue;
    bool all_constant = true;
    size_t in_elements = 0;
    for (size_t i = 0; i < node->get_input_size() && all_constant; ++i) {
      Output in = node->input_value(i);
      auto it = replacements.find(in);
      if (it != replacements.end()) in = it->second;
      all_constant = in.get_node()->get_type_name() == "Constant";
      in_elements += shape_size(in.get_shape());
    }
    if (!all_constant) continue;
    size_t out_elements = shape_size(node->get_shape());
    if (out_elements > m_max_elements && out_elements > in_elements) continue;
    // Evaluate on the folded inputs without touching the node itself.
    OutputVector inputs;
    for (const auto& in : node->input_values()) {
      auto it = replacements.find(in);
      inputs.push_back(it != replacements.end() ? it->second : in);
    }
    auto folded = m_evaluator(node->clone_with_new_inputs(inputs));
    folded->set_friendly_name(node->get_friendly_name());
    replacements[node->output(0)] = folded->output(0);
  }
  replace_outputs(*f, replacements);
  return !replacements.empty();
}

}  // namespace pass
}  // namespace ngraph
