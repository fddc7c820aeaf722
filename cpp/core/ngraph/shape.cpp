#include "ngraph/shape.hpp"

namespace ngraph {

size_t shape_size(const Shape& s) {
  size_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

bool checked_byte_size(const Shape& s, size_t element_size, size_t& bytes) {
  size_t n = element_size;
  for (auto d : s)
    if (__builtin_mul_overflow(n, d, &n)) return false;
  bytes = n;
  return true;
}

Strides row_major_strides(const Shape& s) {
  Strides st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

}  // namespace ngraph
