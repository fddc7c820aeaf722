#include "ngraph/attribute_visitor.hpp"

#include <sstream>
#include <stdexcept>

namespace ngraph {

template <typename V>
void AttributeVisitor::on_sizes(const std::string& name, V& v) {
  std::vector<int64_t> tmp(v.begin(), v.end());
  on(name, tmp);
  V out;
  for (auto x : tmp) {
    if (x < 0)
      throw std::invalid_argument("attribute '" + name + "' must not be negative (got " +
                                  std::to_string(x) + ")");
    out.push_back(static_cast<size_t>(x));
  }
  v = out;
}

void AttributeVisitor::on(const std::string& name, CoordinateDiff& v) {
  std::vector<int64_t> tmp(v.begin(), v.end());
  on(name, tmp);
  v = CoordinateDiff(tmp.begin(), tmp.end());
}

void AttributeVisitor::on(const std::string& name, AxisSet& v) {
  std::vector<int64_t> tmp(v.begin(), v.end());
  on(name, tmp);
  AxisSet out;
  for (auto x : tmp) {
    if (x < 0)
      throw std::invalid_argument("attribute '" + name + "' must not be negative (got " +
                                  std::to_string(x) + ")");
    out.insert(static_cast<size_t>(x));
  }
  v = out;
}

void AttributeVisitor::on(const std::string& name, size_t& v) {
  int64_t tmp = static_cast<int64_t>(v);
  on(name, tmp);
  if (tmp < 0)
    throw std::invalid_argument("attribute '" + name + "' must not be negative (got " +
                                std::to_string(tmp) + ")");
  v = static_cast<size_t>(tmp);
}

void AttributeStringWriter::add(const std::string& name, const std::string& value) {
  if (!m_out.empty()) m_out += ", ";
  m_out += name + "=" + value;
}
void AttributeStringWriter::on(const std::string& name, bool& value) {
  add(name, value ? "true" : "false");
}
void AttributeStringWriter::on(const std::string& name, int64_t& value) {
  add(name, std::to_string(value));
}
void AttributeStringWriter::on(const std::string& name, double& value) {
  std::ostringstream os;
  os.precision(17);
  os << value;
  add(name, os.str());
}
void AttributeStringWriter::on(const std::string& name, std::string& value) {
  add(name, "'" + value + "'");
}
void AttributeStringWriter::on(const std::string& name, element::Type& value) {
  add(name, value.get_type_name());
}
void AttributeStringWriter::on(const std::string& name, std::vector<int64_t>& value) {
  add(name, to_braces(value));
}

}  // namespace ngraph

namespace ngraph {
template void AttributeVisitor::on_sizes<Shape>(const std::string&, Shape&);
template void AttributeVisitor::on_sizes<AxisVector>(const std::string&, AxisVector&);
template void AttributeVisitor::on_sizes<Coordinate>(const std::string&, Coordinate&);
template void AttributeVisitor::on_sizes<Strides>(const std::string&, Strides&);
}  // namespace ngraph
