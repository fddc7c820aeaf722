#include "ngraph/runtime/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ngraph {
namespace runtime {

Tensor::Tensor(element::Type type, const Shape& shape, void* memory)
    : m_type(type), m_shape(shape), m_data(memory) {
  if (type == element::undefined) throw std::invalid_argument("[Tensor] element type is undefined");
  if (!m_data) {
    size_t bytes = ((get_size_in_bytes() + 63) / 64) * 64;
    if (bytes == 0) bytes = 64;
    m_owned = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(64, bytes)), std::free);
    if (!m_owned) throw std::bad_alloc();
    std::memset(m_owned.get(), 0, bytes);
    m_data = m_owned.get();
  }
}

void Tensor::write(const void* src, size_t n) {
  if (n != get_size_in_bytes())
    throw std::invalid_argument("[Tensor] write of " + std::to_string(n) + " bytes into a " +
                                m_type.get_type_name() + to_braces(m_shape) + " tensor of " +
                                std::to_string(get_size_in_bytes()) + " bytes");
  if (n) std::memcpy(m_data, src, n);
}

void Tensor::read(void* dst, size_t n) const {
  if (n != get_size_in_bytes())
    throw std::invalid_argument("[Tensor] read of " + std::to_string(n) + " bytes from a " +
                                m_type.get_type_name() + to_braces(m_shape) + " tensor of " +
                                std::to_string(get_size_in_bytes()) + " bytes");
  if (n) std::memcpy(dst, m_data, n);
}

}  // namespace runtime
}  // namespace ngraph
