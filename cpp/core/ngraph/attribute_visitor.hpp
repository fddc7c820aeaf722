// Attributes of an op are visited by name. One visitor prints them, one hashes them for
// common-subexpression elimination, the Python bindings load them from keyword arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ngraph/element_type.hpp"
#include "ngraph/shape.hpp"

namespace ngraph {

class AttributeVisitor {
 public:
  virtual ~AttributeVisitor() = default;

  virtual void on(const std::string& name, bool& value) = 0;
  virtual void on(const std::string& name, int64_t& value) = 0;
  virtual void on(const std::string& name, double& value) = 0;
  virtual void on(const std::string& name, std::string& value) = 0;
  virtual void on(const std::string& name, element::Type& value) = 0;
  virtual void on(const std::string& name, std::vector<int64_t>& value) = 0;

  // Adapters for the size-vector types: visited as integer lists.
  void on(const std::string& name, Shape& v) { on_sizes(name, v); }
  void on(const std::string& name, AxisVector& v) { on_sizes(name, v); }
  void on(const std::string& name, Coordinate& v) { on_sizes(name, v); }
  void on(const std::string& name, Strides& v) { on_sizes(name, v); }
  void on(const std::string& name, CoordinateDiff& v);
  void on(const std::string& name, AxisSet& v);
  void on(const std::string& name, size_t& v);

  // An enum attribute (distributed::ReduceOp, op::AutoBroadcast), visited as its name: every
  // visitor sees a string ("sum", "numpy"), so printing, CSE keys and loading from Python
  // keywords need nothing per enum. `to_string(E)` is found by argument-dependent lookup;
  // `from_string` throws std::invalid_argument, naming the attribute and the value, for a
  // name that is none of E's (whoever catches it adds the op's name).
  template <typename E>
  void on_enum(const std::string& name, E& value, E (*from_string)(const std::string&)) {
    std::string text = to_string(value);
    on(name, text);
    value = from_string(text);
  }

 private:
  template <typename V>
  void on_sizes(const std::string& name, V& v);
};

// "name=value, name=value" in visiting order; used for printing and CSE keys.
class AttributeStringWriter : public AttributeVisitor {
 public:
  using AttributeVisitor::on;
  void on(const std::string& name, bool& value) override;
  void on(const std::string& name, int64_t& value) override;
  void on(const std::string& name, double& value) override;
  void on(const std::string& name, std::string& value) override;
  void on(const std::string& name, element::Type& value) override;
  void on(const std::string& name, std::vector<int64_t>& value) override;
  const std::string& str() const { return m_out; }

 private:
  void add(const std::string& name, const std::string& value);
  std::string m_out;
};

}  // namespace ngraph
