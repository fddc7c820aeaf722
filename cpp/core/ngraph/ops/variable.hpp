// Training state that lives in the runtime between calls: a Variable reads it, an Assign
// (an update of a computation) replaces it at the end of the call. All reads in a call see
// the values from before the call: updates are written to a second buffer that becomes the
// current one when the call ends, so no update is copied.
#pragma once

#include <memory>
#include <mutex>

#include "ngraph/node.hpp"

namespace ngraph {

class VariableState {
 public:
  VariableState(element::Type type, const Shape& shape, const void* initial = nullptr);
  element::Type get_element_type() const { return m_type; }
  const Shape& get_shape() const { return m_shape; }
  size_t byte_size() const { return shape_size(m_shape) * m_type.size(); }
  // The current value.
  const void* read_buffer() const { return m_buffers[m_current].get(); }
  void* read_buffer() { return m_buffers[m_current].get(); }
  // Where an update writes; becomes current at commit().
  void* write_buffer();
  void commit() { m_current ^= 1; }
  // Copies (checked by the caller for size).
  void get(void* dst) const;
  void set(const void* src);
  const std::string& get_name() const { return m_name; }
  void set_name(const std::string& name) { m_name = name; }

 private:
  element::Type m_type;
  Shape m_shape;
  std::shared_ptr<char> m_buffers[2];
  int m_current = 0;
  std::string m_name;
};

namespace op {

class Variable : public Op<Variable> {
 public:
  static constexpr const char* type_name = "Variable";
  bool admits_storage_only_types() const override { return true; }
  Variable() = default;
  explicit Variable(std::shared_ptr<VariableState> state);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override;
  bool is_pure() const override { return false; }
  const std::shared_ptr<VariableState>& get_state() const { return m_state; }
  // A variable's value is a leaf for autodiff, like a Parameter.
  void generate_adjoints(autodiff::Adjoints&, const OutputVector&) override {}

 private:
  std::shared_ptr<VariableState> m_state;
};

// Assign(value) to a variable: a sink of a function, run at the end of each call.
class Assign : public Op<Assign> {
 public:
  static constexpr const char* type_name = "Assign";
  bool admits_storage_only_types() const override { return true; }
  Assign() = default;
  Assign(const std::shared_ptr<Variable>& variable, const Output& value);
  void validate_and_infer_types() override;
  bool is_pure() const override { return false; }
  const std::shared_ptr<VariableState>& get_state() const { return m_state; }

 private:
  std::shared_ptr<VariableState> m_state;
};

}  // namespace op
}  // namespace ngraph
