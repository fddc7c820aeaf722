#include "ngraph/node.hpp"

#include <algorithm>
#include <atomic>
#include <functional>

namespace ngraph {

namespace {
std::atomic<size_t> g_next_instance_id{0};
}

const Shape& Output::get_shape() const { return m_node->get_output_shape(m_index); }
element::Type Output::get_element_type() const {
  return m_node->get_output_element_type(m_index);
}

Node::Node() : m_instance_id(g_next_instance_id++) {}
Node::Node(const char* type_name, const OutputVector& arguments) : Node() {
  check_arguments(type_name, arguments);
  m_inputs = arguments;
}
Node::Node(const Node& other)
    : std::enable_shared_from_this<Node>(),
      m_inputs(other.m_inputs),
      m_outputs(other.m_outputs),
      m_friendly_name(other.m_friendly_name),
      m_instance_id(g_next_instance_id++),
      m_bf16_inputs_stored(other.m_bf16_inputs_stored),
      m_bf16_outputs_stored(other.m_bf16_outputs_stored) {}

void Node::set_bf16_stored(const std::vector<size_t>& sets) {
  std::vector<Bf16Set> all = bf16_sets();
  m_bf16_inputs_stored.clear();
  m_bf16_outputs_stored.clear();
  for (size_t k : sets) {
    if (k >= all.size()) fail(concat_message("has no bf16 set ", k));
    m_bf16_inputs_stored.insert(m_bf16_inputs_stored.end(), all[k].inputs.begin(), all[k].inputs.end());
    m_bf16_outputs_stored.insert(m_bf16_outputs_stored.end(), all[k].outputs.begin(), all[k].outputs.end());
  }
}

bool Node::is_bf16_stored_input(size_t i) const {
  return std::find(m_bf16_inputs_stored.begin(), m_bf16_inputs_stored.end(), i) != m_bf16_inputs_stored.end() &&
         get_input_element_type(i) == element::bf16;
}

bool Node::is_bf16_stored_output(size_t i) const {
  return std::find(m_bf16_outputs_stored.begin(), m_bf16_outputs_stored.end(), i) != m_bf16_outputs_stored.end();
}

const Output& Node::input_value(size_t i) const {
  if (i >= m_inputs.size())
    throw NodeValidationFailure(concat_message("[", get_type_name(), "] input index ", i,
                                               " out of range (node has ", m_inputs.size(),
                                               " inputs)"));
  return m_inputs[i];
}

void Node::set_argument(size_t i, const Output& value) {
  if (i >= m_inputs.size()) m_inputs.resize(i + 1);
  m_inputs[i] = value;
}

void Node::check_arguments(const std::string& type_name, const OutputVector& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i])
      throw NodeValidationFailure(concat_message("[", type_name, "] input ", i,
                                                 " is a null node"));
    const Node& arg = *values[i].get_node();
    if (values[i].get_index() >= arg.get_output_size())
      throw NodeValidationFailure(concat_message(
          "[", type_name, "] input ", i, " refers to output ", values[i].get_index(), " of ",
          arg.get_name(), " (", arg.get_type_name(), "), which has ", arg.get_output_size(),
          " output", arg.get_output_size() == 1 ? "" : "s"));
  }
}

void Node::set_arguments(const OutputVector& values) {
  check_arguments(get_type_name(), values);
  m_inputs = values;
}

const Shape& Node::get_output_shape(size_t i) const {
  if (i >= m_outputs.size())
    fail(concat_message("output index ", i, " out of range (", m_outputs.size(), " outputs)"));
  return m_outputs[i].shape;
}

element::Type Node::get_output_element_type(size_t i) const {
  if (i >= m_outputs.size())
    fail(concat_message("output index ", i, " out of range (", m_outputs.size(), " outputs)"));
  return m_outputs[i].type;
}

const Shape& Node::get_shape() const {
  if (m_outputs.size() != 1)
    fail(concat_message("get_shape() needs a single-output node; this one has ",
                        m_outputs.size(), " outputs"));
  return m_outputs[0].shape;
}

element::Type Node::get_element_type() const {
  if (m_outputs.size() != 1)
    fail(concat_message("get_element_type() needs a single-output node; this one has ",
                        m_outputs.size(), " outputs"));
  return m_outputs[0].type;
}

Output Node::output(size_t i) {
  if (i >= m_outputs.size())
    fail(concat_message("output index ", i, " out of range (", m_outputs.size(), " outputs)"));
  return Output(shared_from_this(), i);
}

OutputVector Node::outputs() {
  OutputVector out;
  for (size_t i = 0; i < m_outputs.size(); ++i) out.emplace_back(shared_from_this(), i);
  return out;
}

std::string Node::get_name() const {
  if (!m_friendly_name.empty()) return m_friendly_name;
  return get_type_name() + "_" + std::to_string(m_instance_id);
}

std::string Node::attributes_string() const {
  AttributeStringWriter w;
  const_cast<Node*>(this)->visit_attributes(w);
  return w.str();
}

size_t Node::attributes_hash() const { return std::hash<std::string>()(attributes_string()); }

bool Node::attributes_equal(const Node& other) const {
  return get_type_name() == other.get_type_name() &&
         attributes_string() == other.attributes_string();
}

std::string Node::description() const {
  std::ostringstream os;
  os << get_name() << "(";
  for (size_t i = 0; i < m_inputs.size(); ++i) {
    if (i) os << ", ";
    os << m_inputs[i].get_node()->get_name();
    if (m_inputs[i].get_node()->get_output_size() > 1) os << ":" << m_inputs[i].get_index();
  }
  os << ") -> ";
  for (size_t i = 0; i < m_outputs.size(); ++i) {
    if (i) os << ", ";
    os << m_outputs[i].type << m_outputs[i].shape;
  }
  auto attrs = attributes_string();
  if (!attrs.empty()) os << " [" << attrs << "]";
  return os.str();
}

void Node::fail(const std::string& message) const {
  throw NodeValidationFailure("[" + get_type_name() + "] " + message);
}

void Node::fail_type(const std::string& message) const {
  throw ElementTypeError("[" + get_type_name() + "] " + message);
}

void Node::set_output_size(size_t n) { m_outputs.resize(n); }

void Node::check_no_storage_only_types(element::Type output_type) const {
  std::vector<size_t> bf16 = bf16_inputs();
  for (size_t i = 0; i < m_inputs.size(); ++i) {
    const Output& in = m_inputs[i];
    if (!in || !in.get_element_type().is_storage_only()) continue;
    if (in.get_element_type() == element::bf16 && std::find(bf16.begin(), bf16.end(), i) != bf16.end())
      continue;  // a matrix operand of a product in bf16 (the op checks that both are)
    if (is_bf16_stored_input(i)) continue;  // stored in bf16, computed in f32 (bf16_sets)
    throw ElementTypeError(element::storage_only_message(get_type_name(), in.get_element_type()));
  }
  if (output_type.is_storage_only())
    throw ElementTypeError(element::storage_only_message(get_type_name(), output_type));
}

void Node::set_output_type(size_t i, element::Type type, const Shape& shape) {
  // Every value's size is checked where it is made: a count or byte size that wraps around
  // would otherwise compile to a tiny buffer.
  size_t bytes = 0;
  if (!checked_byte_size(shape, type.size(), bytes))
    fail(concat_message("output ", i, " of shape ", shape, " and type ", type.get_type_name(),
                        " has more bytes than fit in 64 bits"));
  if (!admits_storage_only_types()) check_no_storage_only_types(type);
  if (type == element::f32 && is_bf16_stored_output(i)) type = element::bf16;  // bf16_sets
  if (i >= m_outputs.size()) m_outputs.resize(i + 1);
  m_outputs[i] = OutputDesc{type, shape};
}

void Node::check_input_count(size_t expected) const {
  if (m_inputs.size() != expected)
    fail(concat_message("expects ", expected, " input", expected == 1 ? "" : "s", ", got ",
                        m_inputs.size()));
}

std::ostream& operator<<(std::ostream& out, const Node& node) {
  return out << node.description();
}

OpRegistry& OpRegistry::get() {
  static OpRegistry registry;
  return registry;
}

void OpRegistry::add(const std::string& name, Factory factory) {
  for (auto& entry : m_ops)
    if (entry.first == name) {
      entry.second = std::move(factory);
      return;
    }
  m_ops.emplace_back(name, std::move(factory));
}

bool OpRegistry::contains(const std::string& name) const {
  return std::any_of(m_ops.begin(), m_ops.end(), [&](auto& e) { return e.first == name; });
}

std::shared_ptr<Node> OpRegistry::create(const std::string& name) const {
  for (auto& entry : m_ops)
    if (entry.first == name) return entry.second();
  throw std::invalid_argument("unknown op '" + name + "'");
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (auto& entry : m_ops) out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ngraph
