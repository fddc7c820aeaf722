#include "ngraph/ops/parameter.hpp"

#include "ngraph/autodiff/adjoints.hpp"

#include <cstdlib>
#include <functional>
#include <string_view>

namespace ngraph {
namespace op {

Parameter::Parameter(element::Type element_type, const Shape& shape)
    : m_element_type(element_type), m_shape(shape) {
  constructor_validate_and_infer_types();
}

void Parameter::validate_and_infer_types() {
  check_input_count(0);
  if (m_element_type == element::undefined) fail_type("element type must be defined");
  set_output_type(0, m_element_type, m_shape);
}

void Parameter::visit_attributes(AttributeVisitor& v) {
  v.on("element_type", m_element_type);
  v.on("shape", m_shape);
}

Result::Result(const Output& arg) : Op<Result>({arg}) { constructor_validate_and_infer_types(); }

void Result::validate_and_infer_types() {
  check_input_count(1);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

Constant::Constant(element::Type type, const Shape& shape)
    : m_element_type(type), m_shape(shape) {
  if (type == element::undefined) fail_type("element type must be defined");
  size_t bytes = shape_size(shape) * type.size();
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  m_data = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(64, rounded)), std::free);
  if (!m_data) throw std::bad_alloc();
  std::memset(m_data.get(), 0, rounded);
  constructor_validate_and_infer_types();
}

Constant::Constant(element::Type type, const Shape& shape, const void* data)
    : Constant(type, shape) {
  if (byte_size()) std::memcpy(m_data.get(), data, byte_size());
}

void Constant::validate_and_infer_types() {
  check_input_count(0);
  if (!m_data) fail("has no data (construct it with a value)");
  set_output_type(0, m_element_type, m_shape);
}

void Constant::visit_attributes(AttributeVisitor& v) {
  v.on("element_type", m_element_type);
  v.on("shape", m_shape);
}

size_t Constant::attributes_hash() const {
  size_t h = Node::attributes_hash();
  return h ^ (std::hash<std::string_view>()(std::string_view(m_data.get(), byte_size())) << 1);
}

bool Constant::attributes_equal(const Node& other) const {
  auto* o = dynamic_cast<const Constant*>(&other);
  return o && o->m_element_type == m_element_type && o->m_shape == m_shape &&
         std::memcmp(o->m_data.get(), m_data.get(), byte_size()) == 0;
}

void Result::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), deltas[0]);
}

NGRAPH_REGISTER_OP(Parameter);
NGRAPH_REGISTER_OP(Result);
NGRAPH_REGISTER_OP(Constant);

}  // namespace op
}  // namespace ngraph
