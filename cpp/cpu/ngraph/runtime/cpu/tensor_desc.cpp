#include "ngraph/runtime/cpu/tensor_desc.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "ngraph/node.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

size_t checked_byte_size(element::Type type, const Shape& shape, const std::string& what) {
  size_t n = type.size();
  for (size_t d : shape) {
    if (d != 0 && n > std::numeric_limits<size_t>::max() / d)
      throw std::length_error(concat_message("[CPU] ", what, " of shape ", shape, " and type ",
                                             type, " needs more bytes than fit in 64 bits"));
    n *= d;
  }
  for (size_t d : shape)
    if (d == 0) return 0;
  return n;
}

namespace {
// The data type of this value's oneDNN descriptors: its own for f32, bf16 and f16; f32 for the
// types oneDNN does not compute (their kernels never hand these descriptors to a primitive).
dnnl::memory::data_type md_type(element::Type t) {
  bool dnnl = t == element::f32 || t == element::bf16 || t == element::f16;
  return dnnl ? dnnl_type(t) : dnnl::memory::data_type::f32;
}

// A dense row-major f32 layout of `shape`'s elements: no inner blocks, no padding, row-major
// strides over its own dims (a grouped [G, O/G, I, ...] view of [O, I, ...] counts).
bool is_row_major(const dnnl::memory::desc& md, const Shape& shape, element::Type type) {
  const dnnl_memory_desc_t& c = md.data;
  if (c.format_kind != dnnl_blocked || c.format_desc.blocking.inner_nblks != 0) return false;
  if (c.data_type != static_cast<dnnl_data_type_t>(md_type(type))) return false;
  dnnl_dim_t stride = 1;
  for (int i = c.ndims; i-- > 0;) {
    if (c.padded_dims[i] != c.dims[i]) return false;
    if (c.dims[i] != 1 && c.format_desc.blocking.strides[i] != stride) return false;
    stride *= c.dims[i];
  }
  return static_cast<size_t>(stride) == std::max<size_t>(shape_size(shape), 1);
}
}  // namespace

TensorDesc TensorDesc::plain(element::Type type, const Shape& shape) {
  TensorDesc d;
  d.m_type = type;
  d.m_shape = shape;
  d.m_bytes = checked_byte_size(type, shape, "value");
  return d;
}

TensorDesc TensorDesc::with_layout(element::Type type, const Shape& shape,
                                   const dnnl::memory::desc& md) {
  TensorDesc d = plain(type, shape);
  if (is_row_major(md, shape, type)) return d;  // what the primitive chose is plain after all
  d.m_plain = false;
  d.m_md = md;
  d.m_bytes = md.get_size();
  return d;
}

dnnl::memory::desc TensorDesc::dnnl_desc() const {
  if (!m_plain) return m_md;
  auto dims = to_dims(m_shape);
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, md_type(m_type), strides);
}

dnnl::memory::desc TensorDesc::dnnl_desc_like(const dnnl::memory::desc& other) const {
  if (!m_plain) return m_md;
  auto dims = other.dims();
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, md_type(m_type), strides);
}

bool TensorDesc::same_layout(const TensorDesc& other) const {
  if (m_type != other.m_type || m_shape != other.m_shape || m_plain != other.m_plain) return false;
  return m_plain || m_md == other.m_md;
}

TensorDesc TensorDesc::retyped(element::Type type) const {
  if (m_plain || type == m_type) return m_plain ? plain(type, m_shape) : *this;
  dnnl_memory_desc_t c = m_md.data;
  c.data_type = static_cast<dnnl_data_type_t>(md_type(type));
  return with_layout(type, m_shape, dnnl::memory::desc(c));
}

std::string TensorDesc::to_string() const {
  std::string s = m_type.get_type_name() + to_braces(m_shape);
  if (m_plain) return s + " plain";
  // The blocking: outer strides, then the inner blocks as axis:size (what tells two blocked
  // layouts of one shape apart, e.g. OIhw8i8o from OIhw8o8i).
  const dnnl_memory_desc_t& c = m_md.data;
  const auto& b = c.format_desc.blocking;
  s += " blocked strides{";
  for (int i = 0; i < c.ndims; ++i) s += (i ? "," : "") + std::to_string(b.strides[i]);
  s += "} blocks{";
  for (int i = 0; i < b.inner_nblks; ++i)
    s += (i ? "," : "") + std::to_string(b.inner_idxs[i]) + ":" + std::to_string(b.inner_blks[i]);
  return s + "} (" + std::to_string(m_bytes) + " B)";
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
