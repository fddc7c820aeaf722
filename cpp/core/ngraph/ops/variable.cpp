#include "ngraph/ops/variable.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace ngraph {

namespace {
std::shared_ptr<char> aligned_buffer(size_t bytes) {
  size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  std::shared_ptr<char> p(static_cast<char*>(std::aligned_alloc(64, rounded)), std::free);
  if (!p) throw std::bad_alloc();
  std::memset(p.get(), 0, rounded);
  return p;
}
}  // namespace

VariableState::VariableState(element::Type type, const Shape& shape, const void* initial)
    : m_type(type), m_shape(shape) {
  if (type == element::undefined) throw std::invalid_argument("[Variable] element type is undefined");
  m_buffers[0] = aligned_buffer(byte_size());
  if (initial && byte_size()) std::memcpy(m_buffers[0].get(), initial, byte_size());
}

void* VariableState::write_buffer() {
  unshare();
  auto& b = m_buffers[m_current ^ 1];
  if (!b) b = aligned_buffer(byte_size());
  return b.get();
}

void VariableState::get(void* dst) const {
  if (m_scattered) throw std::runtime_error(m_scattered_why);
  if (!byte_size()) return;
  if (m_layout) m_layout->to_plain(read_buffer(), dst);
  else std::memcpy(dst, read_buffer(), byte_size());
}

void VariableState::set(const void* src) {
  unshare();
  gathered();  // the whole value is replaced
  ++m_version;
  if (!byte_size()) return;
  if (m_layout) m_layout->from_plain(src, read_buffer());
  else std::memcpy(read_buffer(), src, byte_size());
}

void VariableState::set_layout(std::shared_ptr<const StorageLayout> layout) {
  if (layout == m_layout) return;
  if (layout && m_layout && layout->same_as(*m_layout)) {  // the same bytes: nothing to move
    m_layout = std::move(layout);
    return;
  }
  if (m_scattered) throw std::runtime_error(m_scattered_why);
  unshare();
  std::vector<char> plain(byte_size());
  get(plain.data());
  m_layout = std::move(layout);
  set(plain.data());
}

void VariableState::share(char* shared, std::shared_ptr<void> owner) {
  if (!shared) throw std::invalid_argument("[Variable] share: memory is null");
  m_shared = shared;
  m_shared_owner = std::move(owner);
  ++m_version;  // another backend's copy may have held it: it is to compare before sharing again
}

void VariableState::unshare() {
  if (!m_shared) return;
  if (!m_buffers[m_current]) m_buffers[m_current] = aligned_buffer(byte_size());
  if (byte_size()) std::memcpy(m_buffers[m_current].get(), m_shared, byte_size());
  m_shared = nullptr;
  m_shared_owner.reset();
  ++m_version;
}

void VariableState::release_private() {
  if (!m_shared) return;
  m_buffers[0].reset();
  m_buffers[1].reset();
}

void VariableState::scatter(std::string why, std::function<void()> gather) {
  m_scattered = true;
  m_scattered_why = std::move(why);
  m_gather = std::move(gather);
}

void VariableState::gather() {
  if (!m_scattered) return;
  if (!m_gather) throw std::runtime_error(m_scattered_why);
  auto gather = m_gather;  // it calls gathered(), which drops m_gather
  gather();
}

namespace op {

Variable::Variable(std::shared_ptr<VariableState> state) : m_state(std::move(state)) {
  constructor_validate_and_infer_types();
}

void Variable::validate_and_infer_types() {
  check_input_count(0);
  if (!m_state) fail("has no state (construct it with a VariableState)");
  set_output_type(0, m_state->get_element_type(), m_state->get_shape());
}

void Variable::visit_attributes(AttributeVisitor& v) {
  element::Type t = m_state ? m_state->get_element_type() : element::undefined;
  Shape s = m_state ? m_state->get_shape() : Shape{};
  v.on("element_type", t);
  v.on("shape", s);
}

Assign::Assign(const std::shared_ptr<Variable>& variable, const Output& value)
    : Op<Assign>({value}), m_state(variable ? variable->get_state() : nullptr) {
  if (!variable) fail("variable is null");
  constructor_validate_and_infer_types();
}

void Assign::validate_and_infer_types() {
  check_input_count(1);
  if (!m_state) fail("has no variable");
  const std::string& name = m_state->get_name().empty() ? std::string("variable") : m_state->get_name();
  if (get_input_element_type(0) != m_state->get_element_type())
    fail_type(concat_message("update of ", name, " (", m_state->get_element_type(),
                             to_braces(m_state->get_shape()), ") has element type ",
                             get_input_element_type(0)));
  if (get_input_shape(0) != m_state->get_shape())
    fail(concat_message("update of ", name, " (", m_state->get_element_type(),
                        to_braces(m_state->get_shape()), ") has shape ", get_input_shape(0)));
  set_output_size(0);
}

NGRAPH_REGISTER_OP(Variable);
NGRAPH_REGISTER_OP(Assign);

}  // namespace op
}  // namespace ngraph
