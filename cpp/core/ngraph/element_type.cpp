#include "ngraph/element_type.hpp"

#include <stdexcept>

namespace ngraph {
namespace element {

size_t Type::size() const {
  switch (m_type) {
    case Type_t::boolean: return 1;
    case Type_t::f32: return 4;
    case Type_t::f64: return 8;
    case Type_t::i32: return 4;
    case Type_t::i64: return 8;
    default: return 0;
  }
}

const std::string& Type::get_type_name() const {
  static const std::string names[] = {"undefined", "boolean", "f32", "f64", "i32", "i64"};
  return names[static_cast<int>(m_type)];
}

const char* Type::c_type_string() const {
  static const char* names[] = {"undefined", "char", "float", "double", "int32_t", "int64_t"};
  return names[static_cast<int>(m_type)];
}

Type Type::from_name(const std::string& name) {
  if (name == "f32" || name == "float32" || name == "float") return f32;
  if (name == "f64" || name == "float64" || name == "double") return f64;
  if (name == "i32" || name == "int32") return i32;
  if (name == "i64" || name == "int64") return i64;
  if (name == "boolean" || name == "bool") return boolean;
  throw std::invalid_argument("unknown element type '" + name +
                              "' (expected one of f32, f64, i32, i64, boolean)");
}

std::ostream& operator<<(std::ostream& out, const Type& t) { return out << t.get_type_name(); }

}  // namespace element
}  // namespace ngraph
