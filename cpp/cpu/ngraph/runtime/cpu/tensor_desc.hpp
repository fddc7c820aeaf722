// The one description of a value in an execution plan: element type, logical shape, the
// layout of its bytes (plain row-major, or a oneDNN memory descriptor a primitive chose) and
// its size in bytes including any padding. The memory planner and every kernel read sizes
// from here; nobody recomputes them.
#pragma once

#include <dnnl.hpp>
#include <string>

#include "ngraph/element_type.hpp"
#include "ngraph/shape.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

class TensorDesc {
 public:
  TensorDesc() = default;
  // Row-major. Throws std::length_error naming the shape when its byte size overflows.
  static TensorDesc plain(element::Type type, const Shape& shape);
  // Laid out as `md` says (a oneDNN-chosen, maybe blocked and padded, layout of `shape`).
  static TensorDesc with_layout(element::Type type, const Shape& shape,
                                const dnnl::memory::desc& md);

  element::Type type() const { return m_type; }
  const Shape& shape() const { return m_shape; }
  bool is_plain() const { return m_plain; }
  // Bytes of storage, padding included; elements() is that in elements of type().
  size_t bytes() const { return m_bytes; }
  size_t elements() const { return m_type.size() ? m_bytes / m_type.size() : 0; }
  // True when the storage holds more elements than the shape (padded blocks).
  bool is_padded() const { return elements() != shape_size(m_shape); }
  // The oneDNN descriptor of a non-plain layout (is_plain() must be false).
  const dnnl::memory::desc& md() const { return m_md; }
  // A oneDNN descriptor of this value whatever its layout (f32, bf16, f16 only).
  dnnl::memory::desc dnnl_desc() const;
  // The same, with the dims of `other` when plain (a row-major view of the same elements:
  // grouped weights [G, O/G, I, ...] of filters [O, I, ...]).
  dnnl::memory::desc dnnl_desc_like(const dnnl::memory::desc& other) const;
  // Same type, shape and byte layout.
  bool same_layout(const TensorDesc& other) const;
  // The same layout (blocking and strides, in elements) of elements of another type: an f32
  // value and a bf16 one an elementwise loop reads together (bf16 activations).
  TensorDesc retyped(element::Type type) const;
  // "f32{2,3} plain", "f32{8,16,4,4} blocked strides{256,128,32,8} blocks{1:8} (2048 B)":
  // for plans printed in tests and logs, and for ranks to compare layouts.
  std::string to_string() const;

 private:
  element::Type m_type = element::f32;
  Shape m_shape;
  bool m_plain = true;
  dnnl::memory::desc m_md;
  size_t m_bytes = 0;
};

// shape_size(shape) * type size, or std::length_error naming `what` and the shape when it
// does not fit in size_t.
size_t checked_byte_size(element::Type type, const Shape& shape, const std::string& what);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
