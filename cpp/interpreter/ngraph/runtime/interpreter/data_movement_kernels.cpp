// Reference kernels that move elements: views (Broadcast, Reshape, Slice, Reverse) gather
// from computed source offsets, Concat copies blocks, Pad maps each output coordinate back to
// the input, OneHot compares values with positions.
#include <cmath>
#include <cstring>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {
namespace {

size_t element_size(const KernelCall& c) { return c.node.get_element_type().size(); }

// out[i] = in[offsets[i]], element by element, whatever the element type.
void gather(KernelCall& c, const std::vector<size_t>& offsets) {
  size_t es = element_size(c);
  auto* src = static_cast<const char*>(c.in[0]);
  auto* dst = static_cast<char*>(c.out[0]);
  for (size_t i = 0; i < offsets.size(); ++i) std::memcpy(dst + i * es, src + offsets[i] * es, es);
}

NGRAPH_INTERPRETER_KERNEL("Broadcast", [](KernelCall& c) {
  auto& b = static_cast<const op::Broadcast&>(c.node);
  const Shape& out = b.get_shape();
  auto in_strides = signed_strides(b.get_input_shape(0));
  std::vector<std::ptrdiff_t> strides(out.size(), 0);
  for (size_t d = 0, k = 0; d < out.size(); ++d)
    if (!b.get_broadcast_axes().count(d)) strides[d] = in_strides[k++];
  gather(c, view_offsets(out, strides));
});

// The input's axes in input_order, read row-major, laid out in the output shape.
NGRAPH_INTERPRETER_KERNEL("Reshape", [](KernelCall& c) {
  auto& r = static_cast<const op::Reshape&>(c.node);
  const Shape& in = r.get_input_shape(0);
  auto in_strides = signed_strides(in);
  Shape permuted;
  std::vector<std::ptrdiff_t> strides;
  for (auto a : r.get_input_order()) {
    permuted.push_back(in[a]);
    strides.push_back(in_strides[a]);
  }
  gather(c, view_offsets(permuted, strides));
});

NGRAPH_INTERPRETER_KERNEL("Slice", [](KernelCall& c) {
  auto& s = static_cast<const op::Slice&>(c.node);
  auto in_strides = signed_strides(s.get_input_shape(0));
  std::vector<std::ptrdiff_t> strides;
  std::ptrdiff_t offset = 0;
  for (size_t d = 0; d < in_strides.size(); ++d) {
    offset += static_cast<std::ptrdiff_t>(s.get_lower_bounds()[d]) * in_strides[d];
    strides.push_back(static_cast<std::ptrdiff_t>(s.get_strides()[d]) * in_strides[d]);
  }
  gather(c, view_offsets(s.get_shape(), strides, offset));
});

NGRAPH_INTERPRETER_KERNEL("Reverse", [](KernelCall& c) {
  auto& r = static_cast<const op::Reverse&>(c.node);
  const Shape& shape = r.get_shape();
  auto strides = signed_strides(shape);
  std::ptrdiff_t offset = 0;
  for (auto a : r.get_reversed_axes()) {
    if (shape[a] == 0) continue;
    offset += static_cast<std::ptrdiff_t>(shape[a] - 1) * strides[a];
    strides[a] = -strides[a];
  }
  gather(c, view_offsets(shape, strides, offset));
});

// Row r of the output (the axes before the concatenation axis) is the inputs' rows r, one
// after the other.
NGRAPH_INTERPRETER_KERNEL("Concat", [](KernelCall& c) {
  auto& cat = static_cast<const op::Concat&>(c.node);
  size_t axis = cat.get_concatenation_axis();
  const Shape& out = cat.get_shape();
  size_t rows = 1, inner = element_size(c);
  for (size_t d = 0; d < axis; ++d) rows *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  auto* dst = static_cast<char*>(c.out[0]);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cat.get_input_size(); ++i) {
      size_t bytes = cat.get_input_shape(i)[axis] * inner;
      if (bytes) std::memcpy(dst, static_cast<const char*>(c.in[i]) + r * bytes, bytes);
      dst += bytes;
    }
});

// The input index that output index `o` of an axis of `n` elements shows, or -1 for the pad
// value.
std::ptrdiff_t pad_source(std::ptrdiff_t o, std::ptrdiff_t below, std::ptrdiff_t n,
                          const std::string& mode) {
  std::ptrdiff_t i = o - below;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  if (mode == "reflect") return i < 0 ? -i : 2 * (n - 1) - i;
  return i < 0 ? -i - 1 : 2 * n - 1 - i;  // symmetric
}

NGRAPH_INTERPRETER_KERNEL("Pad", [](KernelCall& c) {
  auto& p = static_cast<const op::Pad&>(c.node);
  const Shape& in = p.get_input_shape(0);
  const Shape& out = p.get_shape();
  auto in_strides = signed_strides(in);
  size_t es = element_size(c), n = shape_size(out);
  auto* src = static_cast<const char*>(c.in[0]);
  auto* value = static_cast<const char*>(c.in[1]);
  auto* dst = static_cast<char*>(c.out[0]);
  std::vector<size_t> coord(out.size(), 0);
  for (size_t e = 0; e < n; ++e) {
    std::ptrdiff_t offset = 0;
    bool padding = false;
    for (size_t d = 0; d < out.size() && !padding; ++d) {
      std::ptrdiff_t i = pad_source(static_cast<std::ptrdiff_t>(coord[d]), p.get_padding_below()[d],
                                    static_cast<std::ptrdiff_t>(in[d]), p.get_pad_mode());
      padding = i < 0;
      offset += i * in_strides[d];
    }
    std::memcpy(dst + e * es, padding ? value : src + offset * static_cast<std::ptrdiff_t>(es), es);
    for (size_t d = out.size(); d-- > 0;) {
      if (++coord[d] < out[d]) break;
      coord[d] = 0;
    }
  }
});

NGRAPH_INTERPRETER_KERNEL("OneHot", [](KernelCall& c) {
  auto& h = static_cast<const op::OneHot&>(c.node);
  const Shape& out = h.get_shape();
  size_t axis = h.get_one_hot_axis(), depth = out[axis], outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  dispatch(c.node, h.get_element_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    T* y = c.output<T>(0);
    for (size_t a = 0; a < outer; ++a)
      for (size_t b = 0; b < inner; ++b) {
        T v = x[a * inner + b];
        bool integral_in_range = false;
        long long k = 0;
        if constexpr (is_real_v<T>) {
          integral_in_range = v >= 0 && v < static_cast<T>(depth) && std::floor(v) == v;
          if (integral_in_range) k = static_cast<long long>(v);
        } else {
          k = static_cast<long long>(v);
          integral_in_range = k >= 0 && static_cast<unsigned long long>(k) < depth;
        }
        if (!integral_in_range)
          throw std::out_of_range(concat_message("[OneHot] value ", +v, " at index ", a * inner + b,
                                                 " of ", h.get_name(), " is not an integer in [0, ",
                                                 depth, ")"));
        for (size_t j = 0; j < depth; ++j)
          y[(a * depth + j) * inner + b] = static_cast<T>(static_cast<size_t>(k) == j);
      }
  });
});

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
