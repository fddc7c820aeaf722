#include "ngraph/element_type.hpp"

#include <stdexcept>

namespace ngraph {
namespace element {

#define NGRAPH_ELEMENT_SIZE(name, ctype, numpy) \
  case Type_t::name: return sizeof(ctype);
size_t Type::size() const {
  switch (m_type) {
    NGRAPH_ELEMENT_TYPES(NGRAPH_ELEMENT_SIZE)
    default: return 0;
  }
}
#undef NGRAPH_ELEMENT_SIZE

#define NGRAPH_ELEMENT_NAME(name, ctype, numpy) #name,
#define NGRAPH_ELEMENT_CTYPE(name, ctype, numpy) #ctype,
const std::string& Type::get_type_name() const {
  static const std::string names[] = {"undefined", NGRAPH_ELEMENT_TYPES(NGRAPH_ELEMENT_NAME)};
  return names[static_cast<int>(m_type)];
}

const char* Type::c_type_string() const {
  static const char* names[] = {"undefined", NGRAPH_ELEMENT_TYPES(NGRAPH_ELEMENT_CTYPE)};
  return names[static_cast<int>(m_type)];
}
#undef NGRAPH_ELEMENT_NAME
#undef NGRAPH_ELEMENT_CTYPE

Type Type::from_name(const std::string& name) {
  if (name == "float") return f32;
  if (name == "double") return f64;
#define NGRAPH_ELEMENT_FROM_NAME(t, ctype, numpy) \
  if (name == #t || name == numpy) return t;
  NGRAPH_ELEMENT_TYPES(NGRAPH_ELEMENT_FROM_NAME)
#undef NGRAPH_ELEMENT_FROM_NAME
  throw std::invalid_argument("unknown element type '" + name +
                              "' (expected one of boolean, f32, f64, i8, i16, i32, i64, u8, "
                              "u16, u32, u64)");
}

std::ostream& operator<<(std::ostream& out, const Type& t) { return out << t.get_type_name(); }

}  // namespace element
}  // namespace ngraph
