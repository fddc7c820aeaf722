// Host tensors: typed, shaped memory, owned or borrowed.
#pragma once

#include <memory>

#include "ngraph/element_type.hpp"
#include "ngraph/shape.hpp"

namespace ngraph {
namespace runtime {

class Tensor {
 public:
  // Allocates (64-byte aligned, zeroed) when `memory` is null; otherwise borrows it.
  Tensor(element::Type type, const Shape& shape, void* memory = nullptr);
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  element::Type get_element_type() const { return m_type; }
  const Shape& get_shape() const { return m_shape; }
  size_t get_element_count() const { return shape_size(m_shape); }
  size_t get_size_in_bytes() const { return get_element_count() * m_type.size(); }
  void* data() { return m_data; }
  const void* data() const { return m_data; }
  // Copies n bytes in or out; n must equal get_size_in_bytes().
  void write(const void* src, size_t n);
  void read(void* dst, size_t n) const;

 private:
  element::Type m_type;
  Shape m_shape;
  std::shared_ptr<char> m_owned;
  void* m_data;
};

}  // namespace runtime
}  // namespace ngraph
