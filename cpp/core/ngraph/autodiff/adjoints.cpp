#include "ngraph/autodiff/adjoints.hpp"

#include <numeric>
#include <unordered_set>

#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"

namespace ngraph {

void Node::generate_adjoints(autodiff::Adjoints&, const OutputVector&) {
  throw autodiff::NoGradientRule("[" + get_type_name() + "] has no gradient rule (node " +
                                 get_name() + ")");
}

namespace autodiff {

Output scalar(element::Type type, double value) {
  return std::make_shared<op::Constant>(type, Shape{}, std::vector<double>{value});
}

Output zeros(element::Type type, const Shape& shape) {
  AxisSet all;
  for (size_t i = 0; i < shape.size(); ++i) all.insert(i);
  return std::make_shared<op::Broadcast>(scalar(type, 0.0), shape, all);
}

bool is_zeros(const Output& v) {
  const Node* node = v.get_node();
  while (node->get_type_name() == "Broadcast") node = node->input_value(0).get_node();
  auto* c = dynamic_cast<const op::Constant*>(node);
  if (!c) return false;
  for (double x : c->get_vector<double>())
    if (x != 0) return false;
  return true;
}

Output reduce_to_shape(const Output& delta, const Shape& shape) {
  const Shape& s = delta.get_shape();
  if (s == shape) return delta;
  if (s.size() < shape.size())
    throw ngraph_error("reduce_to_shape: gradient shape " + to_braces(s) +
                       " has lower rank than " + to_braces(shape));
  size_t lead = s.size() - shape.size();
  AxisSet axes;
  for (size_t i = 0; i < lead; ++i) axes.insert(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && s[lead + i] != 1) axes.insert(lead + i);
  Output summed = std::make_shared<op::Sum>(delta, axes);
  if (summed.get_shape() == shape) return summed;
  AxisVector order(summed.get_shape().size());
  std::iota(order.begin(), order.end(), 0);
  return std::make_shared<op::Reshape>(summed, order, shape);
}

Adjoints::Adjoints(const OutputVector& ys, const OutputVector& seeds) {
  if (ys.size() != seeds.size())
    throw std::invalid_argument("[Adjoints] got " + std::to_string(ys.size()) + " outputs and " +
                                std::to_string(seeds.size()) + " seeds");
  NodeVector roots;
  for (size_t i = 0; i < ys.size(); ++i) {
    if (ys[i].get_shape() != seeds[i].get_shape() ||
        ys[i].get_element_type() != seeds[i].get_element_type())
      throw std::invalid_argument(
          "[Adjoints] seed " + std::to_string(i) + " is " +
          seeds[i].get_element_type().get_type_name() + to_braces(seeds[i].get_shape()) +
          " but output " + ys[i].get_node()->get_name() + " is " +
          ys[i].get_element_type().get_type_name() + to_braces(ys[i].get_shape()));
    add_delta(ys[i], seeds[i]);
    roots.push_back(ys[i].get_node_shared_ptr());
  }
  NodeVector order = topological_sort(roots);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto& node = *it;
    OutputVector deltas;
    bool any = false;
    for (size_t o = 0; o < node->get_output_size(); ++o) {
      auto d = m_deltas.find(node->output(o));
      if (d != m_deltas.end()) {
        deltas.push_back(d->second);
        any = true;
      } else {
        deltas.push_back(zeros(node->get_output_element_type(o), node->get_output_shape(o)));
      }
    }
    if (!any || node->get_input_size() == 0) continue;
    // Only outputs that received a gradient must be real: TopK's indices output (integers)
    // gets none when only its values are differentiated.
    size_t integral = node->get_output_size();
    for (size_t o = 0; o < node->get_output_size(); ++o)
      if (m_deltas.count(node->output(o)) && !node->get_output_element_type(o).is_real()) integral = o;
    if (integral < node->get_output_size()) {
      m_blocked.emplace_back(node, "[" + node->get_type_name() + "] is not differentiable: its output (node " +
                                       node->get_name() + ") has element type " +
                                       node->get_output_element_type(integral).get_type_name());
      continue;
    }
    try {
      m_current = node.get();
      node->generate_adjoints(*this, deltas);
      m_current = nullptr;
    } catch (const NoGradientRule& e) {
      m_current = nullptr;
      m_blocked.emplace_back(node, e.what());
    }
  }
}

void Adjoints::add_delta(const Output& x, const Output& delta) {
  if (x.get_shape() != delta.get_shape() || x.get_element_type() != delta.get_element_type()) {
    std::string who = m_current ? "[" + m_current->get_type_name() + "] gradient rule" : "[Adjoints]";
    throw ngraph_error(who + " produced " + delta.get_element_type().get_type_name() +
                       to_braces(delta.get_shape()) + " for " + x.get_node()->get_name() + " of " +
                       x.get_element_type().get_type_name() + to_braces(x.get_shape()));
  }
  auto it = m_deltas.find(x);
  if (it == m_deltas.end()) {
    m_deltas.emplace(x, delta);
  } else if (element::Type t = delta.get_element_type(); t.is_storage_only()) {
    // f16/bf16 gradients of a value used twice: summed in f32, rounded once to the type.
    auto f32 = [](const Output& v) { return std::make_shared<op::Convert>(v, element::f32); };
    it->second = std::make_shared<op::Convert>(std::make_shared<op::Add>(f32(it->second), f32(delta)), t);
  } else {
    it->second = std::make_shared<op::Add>(it->second, delta);
  }
}

Output Adjoints::backprop_output(const Output& x) {
  if (!x.get_element_type().is_real())
    throw NoGradientRule("[Adjoints] cannot differentiate with respect to " +
                         x.get_node()->get_name() + ": its element type " +
                         x.get_element_type().get_type_name() + " is not floating-point");
  // Blocked nodes downstream of x make its gradient incomplete.
  if (!m_blocked.empty()) {
    for (const auto& [node, why] : m_blocked) {
      NodeVector upstream = topological_sort({node});
      for (const auto& u : upstream)
        if (u.get() == x.get_node() && u != node)
          throw NoGradientRule(why + "; it lies between " + x.get_node()->get_name() +
                               " and the differentiated output");
    }
  }
  auto it = m_deltas.find(x);
  if (it != m_deltas.end()) return it->second;
  return zeros(x.get_element_type(), x.get_shape());
}

std::shared_ptr<Node> Adjoints::backprop_node(const std::shared_ptr<Node>& x) {
  return op::get_output_element(backprop_output(x->output(0)));
}

}  // namespace autodiff
}  // namespace ngraph
