#include "ngraph/element_type.hpp"

#include <stdexcept>

namespace ngraph {
namespace element {

#define NGRAPH_ELEMENT_SIZE(name, ctype, numpy) \
  case Type_t::name: return sizeof(ctype);
size_t Type::size() const {
  switch (m_type) {
    NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_SIZE)
    default: return 0;
  }
}
#undef NGRAPH_ELEMENT_SIZE

#define NGRAPH_ELEMENT_NAME(name, ctype, numpy) #name,
#define NGRAPH_ELEMENT_CTYPE(name, ctype, numpy) #ctype,
#define NGRAPH_STORAGE_CTYPE(name, ctype, numpy) numpy,  // nGraph's "float16", "bfloat16"
const std::string& Type::get_type_name() const {
  static const std::string names[] = {"undefined", NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_NAME)};
  return names[static_cast<int>(m_type)];
}

const char* Type::c_type_string() const {
  static const char* names[] = {"undefined", NGRAPH_ELEMENT_TYPES(NGRAPH_ELEMENT_CTYPE)
                                    NGRAPH_STORAGE_ELEMENT_TYPES(NGRAPH_STORAGE_CTYPE)};
  return names[static_cast<int>(m_type)];
}
#undef NGRAPH_ELEMENT_NAME
#undef NGRAPH_ELEMENT_CTYPE
#undef NGRAPH_STORAGE_CTYPE

Type Type::from_name(const std::string& name) {
  if (name == "float") return f32;
  if (name == "double") return f64;
  if (name == "half") return f16;
#define NGRAPH_ELEMENT_FROM_NAME(t, ctype, numpy) \
  if (name == #t || name == numpy) return t;
  NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_FROM_NAME)
#undef NGRAPH_ELEMENT_FROM_NAME
  throw std::invalid_argument("unknown element type '" + name +
                              "' (expected one of boolean, f32, f64, i8, i16, i32, i64, u8, "
                              "u16, u32, u64, f16, bf16)");
}

std::string storage_only_message(const std::string& op, Type t) {
  std::string who = op.empty() ? "this op" : op;
  return (op.empty() ? "" : "[" + op + "] ") + "element type " + t.get_type_name() +
         " is storage-only in ngraph: " + who + " does not compute in it (only parameters, "
         "constants, variables, results, Convert and data-movement ops take " +
         t.get_type_name() + "). Convert to f32 first, e.g. ng.convert(x, np.float32), and back "
         "with ng.convert(y, \"" + t.get_type_name() + "\") to store the result";
}

std::ostream& operator<<(std::ostream& out, const Type& t) { return out << t.get_type_name(); }

}  // namespace element
}  // namespace ngraph
