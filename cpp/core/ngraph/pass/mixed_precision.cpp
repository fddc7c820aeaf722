#include "ngraph/pass/mixed_precision.hpp"

#include <algorithm>
#include <map>

namespace ngraph {
namespace pass {

namespace {
bool converts(const Node& node) {
  if (node.bf16_inputs().empty() || node.get_output_size() != 1 || node.get_element_type() != element::f32)
    return false;
  for (size_t i : node.bf16_inputs())
    if (node.get_input_element_type(i) != element::f32) return false;
  return true;
}
}  // namespace

std::vector<std::shared_ptr<Node>> insert_bf16_casts(
    Function& function, const std::function<bool(const Node&)>& eligible,
    const std::function<std::shared_ptr<Node>(const Output&)>& make_cast) {
  std::vector<std::shared_ptr<Node>> casts;
  std::map<Output, Output> cast_of;  // one per source value
  for (const auto& node : function.get_ordered_ops()) {
    if (!converts(*node) || !eligible(*node)) continue;
    for (size_t i : node->bf16_inputs()) {
      Output source = node->input_value(i);
      auto it = cast_of.find(source);
      if (it == cast_of.end()) {
        auto cast = make_cast(source);
        if (cast->get_output_size() != 1 || cast->get_element_type() != element::bf16)
          throw ngraph_error("[mixed precision] internal: a cast must give one bf16 value");
        casts.push_back(cast);
        it = cast_of.emplace(source, cast->output(0)).first;
      }
      node->set_argument(i, it->second);
    }
    node->validate_and_infer_types();
  }
  return casts;
}

namespace {
bool contains(const std::vector<size_t>& v, size_t i) { return std::find(v.begin(), v.end(), i) != v.end(); }

// Each node's bf16 sets and which are still live.
struct LiveSets {
  std::vector<Node::Bf16Set> sets;
  std::vector<bool> live;
  bool holds(bool input, size_t i) const {
    for (size_t k = 0; k < sets.size(); ++k)
      if (live[k] && contains(input ? sets[k].inputs : sets[k].outputs, i)) return true;
    return false;
  }
};

struct Bf16Sets {
  std::map<const Node*, LiveSets> nodes;
  using Port = std::pair<const Node*, size_t>;  // a node's output, or its input
  std::map<Port, std::vector<Port>> readers;      // of each output

  bool holds(const Node* node, bool input, size_t i) const {
    auto it = nodes.find(node);
    return it != nodes.end() && it->second.holds(input, i);
  }
  // Whether set k of `node` can stay: its inputs produced in bf16, its outputs read in bf16.
  bool keeps(const Node& node, const Node::Bf16Set& set) const {
    for (size_t i : set.inputs) {
      const Output& v = node.input_value(i);
      if (!holds(v.get_node(), false, v.get_index())) return false;
    }
    for (size_t o : set.outputs) {
      auto it = readers.find({&node, o});
      if (it == readers.end()) return false;  // read by nothing: leaves the graph
      for (const auto& [reader, j] : it->second)
        if (!holds(reader, true, j)) return false;
    }
    return true;
  }
};

bool f32_set(const Node& node, const Node::Bf16Set& set) {
  for (size_t i : set.inputs)
    if (i >= node.get_input_size() || node.get_input_element_type(i) != element::f32) return false;
  for (size_t o : set.outputs)
    if (o >= node.get_output_size() || node.get_output_element_type(o) != element::f32) return false;
  return true;
}

Bf16Sets candidate_sets(const std::vector<std::shared_ptr<Node>>& ops,
                        const std::function<bool(const Node&, const Node::Bf16Set&)>& eligible) {
  Bf16Sets s;
  for (const auto& node : ops) {
    for (size_t i = 0; i < node->get_input_size(); ++i) {
      const Output& v = node->input_value(i);
      s.readers[{v.get_node(), v.get_index()}].emplace_back(node.get(), i);
    }
    LiveSets live{node->bf16_sets(), {}};
    for (const auto& set : live.sets) live.live.push_back(f32_set(*node, set) && eligible(*node, set));
    if (std::find(live.live.begin(), live.live.end(), true) != live.live.end()) s.nodes.emplace(node.get(), live);
  }
  return s;
}
}  // namespace

size_t store_bf16(Function& function, const std::function<bool(const Node&, const Node::Bf16Set&)>& eligible,
                  const std::function<bool(const Node&)>& is_cast) {
  auto ops = function.get_ordered_ops();
  Bf16Sets s = candidate_sets(ops, eligible);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [node, live] : s.nodes)
      for (size_t k = 0; k < live.sets.size(); ++k)
        if (live.live[k] && !s.keeps(*node, live.sets[k])) live.live[k] = false, changed = true;
  }
  size_t retyped = 0;
  for (const auto& node : ops) {
    auto it = s.nodes.find(node.get());
    if (it == s.nodes.end()) continue;
    std::vector<size_t> stored;
    for (size_t k = 0; k < it->second.sets.size(); ++k)
      if (it->second.live[k]) stored.push_back(k), retyped += it->second.sets[k].outputs.size();
    if (stored.empty()) continue;
    node->set_bf16_stored(stored);
    node->validate_and_infer_types();
    if (!is_cast(*node) || node->get_input_element_type(0) != element::bf16) continue;
    for (const auto& [reader, j] : s.readers[{node.get(), 0}])
      const_cast<Node*>(reader)->set_argument(j, node->input_value(0));
  }
  return retyped;
}

}  // namespace pass
}  // namespace ngraph
