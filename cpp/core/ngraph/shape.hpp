// Shapes, axis sets and coordinates. Distinct types (not aliases) so that overloads and
// printing can tell them apart, as in nGraph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ngraph {

#define NGRAPH_SIZE_VECTOR(Name, Elem)                     \
  class Name : public std::vector<Elem> {                  \
   public:                                                 \
    using std::vector<Elem>::vector;                       \
    Name() = default;                                      \
    Name(const std::vector<Elem>& v) : std::vector<Elem>(v) {} \
  };

NGRAPH_SIZE_VECTOR(Shape, size_t)
NGRAPH_SIZE_VECTOR(AxisVector, size_t)
NGRAPH_SIZE_VECTOR(Coordinate, size_t)
NGRAPH_SIZE_VECTOR(Strides, size_t)
NGRAPH_SIZE_VECTOR(CoordinateDiff, std::ptrdiff_t)
#undef NGRAPH_SIZE_VECTOR

class AxisSet : public std::set<size_t> {
 public:
  using std::set<size_t>::set;
  AxisSet() = default;
  AxisSet(const std::vector<size_t>& v) : std::set<size_t>(v.begin(), v.end()) {}
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
};

size_t shape_size(const Shape& s);
// The bytes of a row-major tensor of `s` with elements of `element_size` bytes; false (and
// `bytes` unchanged) when the element count or the byte size does not fit in size_t.
bool checked_byte_size(const Shape& s, size_t element_size, size_t& bytes);
// Row-major strides in elements.
Strides row_major_strides(const Shape& s);

template <typename C>
std::string join(const C& c, const char* sep = ",") {
  std::ostringstream os;
  bool first = true;
  for (const auto& v : c) {
    if (!first) os << sep;
    os << v;
    first = false;
  }
  return os.str();
}

template <typename C>
std::string to_braces(const C& c) {
  return "{" + join(c) + "}";
}

inline std::ostream& operator<<(std::ostream& o, const Shape& s) { return o << to_braces(s); }
inline std::ostream& operator<<(std::ostream& o, const AxisSet& s) { return o << to_braces(s); }
inline std::ostream& operator<<(std::ostream& o, const AxisVector& s) { return o << to_braces(s); }
inline std::ostream& operator<<(std::ostream& o, const Coordinate& s) { return o << to_braces(s); }
inline std::ostream& operator<<(std::ostream& o, const Strides& s) { return o << to_braces(s); }
inline std::ostream& operator<<(std::ostream& o, const CoordinateDiff& s) {
  return o << to_braces(s);
}

}  // namespace ngraph
