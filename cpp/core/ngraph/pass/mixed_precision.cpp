#include "ngraph/pass/mixed_precision.hpp"

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

}  // namespace pass
}  // namespace ngraph
