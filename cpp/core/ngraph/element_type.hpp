// Element types of tensors: the five the core supports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace ngraph {
namespace element {

enum class Type_t { undefined, boolean, f32, f64, i32, i64 };

class Type {
 public:
  constexpr Type() = default;
  constexpr Type(Type_t t) : m_type(t) {}  // NOLINT: implicit like nGraph's

  constexpr Type_t get_type_enum() const { return m_type; }
  size_t size() const;
  bool is_real() const { return m_type == Type_t::f32 || m_type == Type_t::f64; }
  bool is_integral() const { return m_type == Type_t::i32 || m_type == Type_t::i64; }
  bool is_boolean() const { return m_type == Type_t::boolean; }
  bool is_numeric() const { return is_real() || is_integral(); }
  const std::string& get_type_name() const;
  const char* c_type_string() const;

  constexpr bool operator==(const Type& o) const { return m_type == o.m_type; }
  constexpr bool operator!=(const Type& o) const { return m_type != o.m_type; }
  constexpr bool operator<(const Type& o) const { return m_type < o.m_type; }

  // Accepts "f32", "float32", "float", "f64", "float64", "double", "i32", "int32",
  // "i64", "int64", "boolean", "bool".
  static Type from_name(const std::string& name);

 private:
  Type_t m_type = Type_t::undefined;
};

inline constexpr Type undefined{Type_t::undefined};
inline constexpr Type boolean{Type_t::boolean};
inline constexpr Type f32{Type_t::f32};
inline constexpr Type f64{Type_t::f64};
inline constexpr Type i32{Type_t::i32};
inline constexpr Type i64{Type_t::i64};

// Storage type of boolean tensors: one byte, 0 or 1.
using boolean_t = char;

template <typename T>
constexpr Type from();
template <>
constexpr Type from<float>() { return f32; }
template <>
constexpr Type from<double>() { return f64; }
template <>
constexpr Type from<int32_t>() { return i32; }
template <>
constexpr Type from<int64_t>() { return i64; }
template <>
constexpr Type from<char>() { return boolean; }
template <>
constexpr Type from<bool>() { return boolean; }

std::ostream& operator<<(std::ostream& out, const Type& t);

// Calls f(T{}) with T the C++ storage type of `t`; throws for undefined.
template <typename F>
decltype(auto) dispatch(Type t, F&& f) {
  switch (t.get_type_enum()) {
    case Type_t::boolean: return f(boolean_t{});
    case Type_t::f32: return f(float{});
    case Type_t::f64: return f(double{});
    case Type_t::i32: return f(int32_t{});
    case Type_t::i64: return f(int64_t{});
    default: break;
  }
  throw std::invalid_argument("element type 'undefined' has no storage type");
}

}  // namespace element
}  // namespace ngraph
