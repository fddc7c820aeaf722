// GeluFusion: the erf formula of the exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))), written out
// of elementwise ops (as exporters write it: PyTorch's ONNX export gives Div(x, 1.4142135), Erf,
// Add 1, Mul x, Mul 0.5), becomes one Gelu.
#include <cmath>
#include <map>
#include <vector>

#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"

namespace ngraph {
namespace pass {

namespace {

// How many inputs of other nodes (results and sinks included) read each value.
std::map<Output, size_t> reader_counts(const NodeVector& ops) {
  std::map<Output, size_t> n;
  for (const auto& node : ops)
    for (const auto& in : node->input_values()) ++n[in];
  return n;
}

// The value of a constant whose elements are all equal (through Broadcasts of it).
bool uniform_constant(const Output& v, double& value) {
  const Node* node = v.get_node();
  while (node->get_type_name() == std::string(op::Broadcast::type_name))
    node = node->input_value(0).get_node();
  auto* c = dynamic_cast<const op::Constant*>(node);
  if (!c || !c->get_element_type().is_real()) return false;
  auto values = c->get_vector<double>();
  if (values.empty()) return false;
  for (double x : values)
    if (x != values[0]) return false;
  value = values[0];
  return true;
}

// Within the precision of the formula's type: f32 constants written with 8 significant digits
// (1.4142135, 0.70710678) count; in f64 only what rounds the same to about 12 digits.
bool near(double value, double want, element::Type t) {
  double tolerance = t == element::f32 ? 1e-6 : 1e-12;
  return std::fabs(value - want) <= tolerance * std::fabs(want);
}

bool is(const Output& v, const char* type) {
  return v.get_node()->get_type_name() == std::string(type);
}

class Matcher {
 public:
  explicit Matcher(const NodeVector& ops) : m_readers(reader_counts(ops)) {}

  // The x of root = x * 0.5 * (1 + erf(x / sqrt 2)) in any grouping and order of the products,
  // erf's argument x / c or x * c' (c ~ sqrt 2, c' ~ 1/sqrt 2), with every intermediate value
  // read only inside the formula and of root's shape; or a null Output.
  Output gelu_argument(const Output& root) const {
    element::Type t = root.get_element_type();
    if (!is(root, op::Multiply::type_name) || (t != element::f32 && t != element::f64)) return {};
    std::vector<Output> factors;
    collect_factors(root, root, factors);
    if (factors.size() != 3) return {};
    for (size_t a = 0; a < 3; ++a) {  // a: 1 + erf(...); then x and 0.5 among the other two
      Output x = erf_part(factors[a], root);
      if (!x) continue;
      const Output& u = factors[(a + 1) % 3];
      const Output& v = factors[(a + 2) % 3];
      double half = 0;
      if (u == x && uniform_constant(v, half) && near(half, 0.5, t)) return x;
      if (v == x && uniform_constant(u, half) && near(half, 0.5, t)) return x;
    }
    return {};
  }

 private:
  bool inner(const Output& v, const Output& root) const {
    auto it = m_readers.find(v);
    return it != m_readers.end() && it->second == 1 && v.get_shape() == root.get_shape() &&
           v.get_element_type() == root.get_element_type();
  }

  // The operands of a tree of Multiplys whose inner products are read only by it.
  void collect_factors(const Output& v, const Output& root, std::vector<Output>& out) const {
    for (const auto& in : v.get_node()->input_values()) {
      if (is(in, op::Multiply::type_name) && inner(in, root))
        collect_factors(in, root, out);
      else
        out.push_back(in);
    }
  }

  // For v = 1 + erf(x / sqrt 2) (or erf(x * 1/sqrt 2)), read only by the formula: x.
  Output erf_part(const Output& v, const Output& root) const {
    element::Type t = root.get_element_type();
    if (!is(v, op::Add::type_name) || !inner(v, root)) return {};
    const Node& add = *v.get_node();
    for (size_t i = 0; i < 2; ++i) {
      double one = 0;
      const Output& e = add.input_value(1 - i);
      if (!uniform_constant(add.input_value(i), one) || !near(one, 1.0, t)) continue;
      if (!is(e, op::Erf::type_name) || !inner(e, root)) continue;
      const Output& z = e.get_node()->input_value(0);
      if (!inner(z, root)) continue;
      const Node& scale = *z.get_node();
      double c = 0;
      if (is(z, op::Divide::type_name) && uniform_constant(scale.input_value(1), c) &&
          near(c, std::sqrt(2.0), t))
        return scale.input_value(0);
      if (is(z, op::Multiply::type_name))
        for (size_t k = 0; k < 2; ++k)
          if (uniform_constant(scale.input_value(k), c) && near(c, std::sqrt(0.5), t))
            return scale.input_value(1 - k);
    }
    return {};
  }

  std::map<Output, size_t> m_readers;
};

}  // namespace

bool GeluFusion::run_on_function(const std::shared_ptr<Function>& f) {
  NodeVector ops = f->get_ordered_ops();
  Matcher matcher(ops);
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    if (node->get_output_size() != 1) continue;
    Output x = matcher.gelu_argument(node->output(0));
    if (!x || x.get_shape() != node->get_shape()) continue;
    auto gelu = std::make_shared<op::Gelu>(x);
    gelu->set_friendly_name(node->get_friendly_name());
    replacements[node->output(0)] = gelu->output(0);
  }
  replace_outputs(*f, replacements);
  return !replacements.empty();
}

}  // namespace pass
}  // namespace ngraph
