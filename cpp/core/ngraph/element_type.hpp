// Element types of tensors. NGRAPH_ELEMENT_TYPES is the one list of the types ops compute in:
// the enum, names, sizes, NumPy dtypes and every kernel's type dispatch come from it.
// NGRAPH_STORAGE_ELEMENT_TYPES lists the storage-only types (f16, bf16): tensors of them are
// stored, moved and converted, but no op computes in them (Node rejects them on any op that
// does not declare admits_storage_only_types()); `dispatch` leaves them out and
// `dispatch_storage` includes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>

#include "ngraph/low_precision.hpp"

namespace ngraph {
namespace element {

// X(enum name, C++ storage type, NumPy name).
#define NGRAPH_ELEMENT_TYPES(X)                                                        \
  X(boolean, char, "bool") X(f32, float, "float32") X(f64, double, "float64")            \
  X(i32, int32_t, "int32") X(i64, int64_t, "int64") X(i8, int8_t, "int8")                 \
  X(i16, int16_t, "int16") X(u8, uint8_t, "uint8") X(u16, uint16_t, "uint16")            \
  X(u32, uint32_t, "uint32") X(u64, uint64_t, "uint64")

// X(enum name, C++ storage type, NumPy name): f16 is NumPy's float16; bfloat16 is ml_dtypes'.
#define NGRAPH_STORAGE_ELEMENT_TYPES(X) \
  X(f16, ::ngraph::float16, "float16") X(bf16, ::ngraph::bfloat16, "bfloat16")

#define NGRAPH_ALL_ELEMENT_TYPES(X) NGRAPH_ELEMENT_TYPES(X) NGRAPH_STORAGE_ELEMENT_TYPES(X)

#define NGRAPH_ELEMENT_ENUM(name, ctype, numpy) name,
enum class Type_t { undefined, NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_ENUM) };
#undef NGRAPH_ELEMENT_ENUM

class Type {
 public:
  constexpr Type() = default;
  constexpr Type(Type_t t) : m_type(t) {}  // NOLINT: implicit like nGraph's

  constexpr Type_t get_type_enum() const { return m_type; }
  size_t size() const;
  bool is_real() const {
    return m_type == Type_t::f32 || m_type == Type_t::f64 || is_storage_only();
  }
  // f16 and bf16: stored, moved and converted, never computed in.
  bool is_storage_only() const { return m_type == Type_t::f16 || m_type == Type_t::bf16; }
  bool is_integral() const { return is_numeric() && !is_real(); }
  bool is_signed() const { return is_real() || m_type == Type_t::i8 || m_type == Type_t::i16 ||
                                  m_type == Type_t::i32 || m_type == Type_t::i64; }
  bool is_boolean() const { return m_type == Type_t::boolean; }
  bool is_numeric() const { return m_type != Type_t::undefined && m_type != Type_t::boolean; }
  const std::string& get_type_name() const;
  const char* c_type_string() const;

  constexpr bool operator==(const Type& o) const { return m_type == o.m_type; }
  constexpr bool operator!=(const Type& o) const { return m_type != o.m_type; }
  constexpr bool operator<(const Type& o) const { return m_type < o.m_type; }

  // Accepts the short names ("f32", "u8", "boolean"), the NumPy names ("float32", "uint8",
  // "bool", "float16", "bfloat16"), "float", "double" and "half".
  static Type from_name(const std::string& name);

 private:
  Type_t m_type = Type_t::undefined;
};

inline constexpr Type undefined{Type_t::undefined};
#define NGRAPH_ELEMENT_CONSTANT(name, ctype, numpy) inline constexpr Type name{Type_t::name};
NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_CONSTANT)
#undef NGRAPH_ELEMENT_CONSTANT

// Storage type of boolean tensors: one byte, 0 or 1.
using boolean_t = char;

template <typename T>
constexpr Type from();
#define NGRAPH_ELEMENT_FROM(name, ctype, numpy) \
  template <>                                     \
  constexpr Type from<ctype>() { return name; }
NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_FROM)
#undef NGRAPH_ELEMENT_FROM
template <>
constexpr Type from<bool>() { return boolean; }

std::ostream& operator<<(std::ostream& out, const Type& t);

// The message for computing in a storage-only type: names the op, the type and the fix.
std::string storage_only_message(const std::string& op, Type t);

// Calls f(T{}) with T the C++ storage type of `t`, for the types ops compute in; throws for
// undefined and for the storage-only types (their kernels only move bytes or convert: see
// dispatch_storage).
template <typename F>
decltype(auto) dispatch(Type t, F&& f) {
#define NGRAPH_ELEMENT_CASE(name, ctype, numpy) \
  case Type_t::name: return f(ctype{});
  switch (t.get_type_enum()) {
    NGRAPH_ELEMENT_TYPES(NGRAPH_ELEMENT_CASE)
    default: break;
  }
  if (t.is_storage_only()) throw std::invalid_argument(storage_only_message("", t));
  throw std::invalid_argument("element type 'undefined' has no storage type");
}

// As dispatch, and also for f16 and bf16 (T = float16, bfloat16): for code that copies or
// converts values.
template <typename F>
decltype(auto) dispatch_storage(Type t, F&& f) {
  switch (t.get_type_enum()) {
    NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_ELEMENT_CASE)
    default: break;
  }
  throw std::invalid_argument("element type 'undefined' has no storage type");
}
#undef NGRAPH_ELEMENT_CASE

}  // namespace element
}  // namespace ngraph
