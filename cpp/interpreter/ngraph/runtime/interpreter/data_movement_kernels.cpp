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

// Gather, EmbeddingLookup: data viewed as [outer, n, inner]; output block (o, i) is data block
// (o, indices[i]). Every index is checked before anything is written.
void gather_rows(KernelCall& c, const void* data, const void* indices, element::Type index_type) {
  auto g = op::IndexedAxis::of(c.node);
  size_t es = element_size(c), block = g.inner * es;
  std::vector<size_t> rows(g.count);
  for (size_t i = 0; i < g.count; ++i) rows[i] = op::checked_index(c.node, g, index_type, indices, i);
  auto* src = static_cast<const char*>(data);
  auto* dst = static_cast<char*>(c.out[0]);
  for (size_t o = 0; o < g.outer; ++o)
    for (size_t i = 0; i < g.count; ++i)
      if (block) std::memcpy(dst + (o * g.count + i) * block, src + (o * g.n + rows[i]) * block, block);
}

NGRAPH_INTERPRETER_KERNEL("Gather", [](KernelCall& c) {
  gather_rows(c, c.in[0], c.in[1], c.node.get_input_element_type(1));
});

NGRAPH_INTERPRETER_KERNEL("EmbeddingLookup", [](KernelCall& c) {
  gather_rows(c, c.in[1], c.in[0], c.node.get_input_element_type(0));
});

// out = inputs; out[o, indices[i], j] += updates[o, i, j], accumulated in the accumulator type
// (double for floats) and rounded once.
NGRAPH_INTERPRETER_KERNEL("ScatterAdd", [](KernelCall& c) {
  auto g = op::IndexedAxis::of(c.node);
  element::Type index_type = c.node.get_input_element_type(1);
  std::vector<size_t> rows(g.count);
  for (size_t i = 0; i < g.count; ++i) rows[i] = op::checked_index(c.node, g, index_type, c.in[1], i);
  dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_boolean_v<T>) {
      using A = Accumulator<T>;
      const T* in = c.input<T>(0);
      const T* upd = c.input<T>(2);
      size_t total = g.outer * g.n * g.inner;
      std::vector<A> acc(in, in + total);
      for (size_t o = 0; o < g.outer; ++o)
        for (size_t i = 0; i < g.count; ++i)
          for (size_t j = 0; j < g.inner; ++j)
            acc[(o * g.n + rows[i]) * g.inner + j] += static_cast<A>(upd[(o * g.count + i) * g.inner + j]);
      T* out = c.output<T>(0);
      for (size_t e = 0; e < total; ++e) out[e] = static_cast<T>(acc[e]);
    }
  });
});

// dest copied, then src written over the strided slice.
NGRAPH_INTERPRETER_KERNEL("ReplaceSlice", [](KernelCall& c) {
  auto& r = static_cast<const op::ReplaceSlice&>(c.node);
  size_t es = element_size(c);
  size_t n = shape_size(r.get_shape());
  if (n) std::memcpy(c.out[0], c.in[0], n * es);
  auto strides = signed_strides(r.get_shape());
  std::vector<std::ptrdiff_t> step;
  std::ptrdiff_t offset = 0;
  for (size_t d = 0; d < strides.size(); ++d) {
    offset += static_cast<std::ptrdiff_t>(r.get_lower_bounds()[d]) * strides[d];
    step.push_back(static_cast<std::ptrdiff_t>(r.get_strides()[d]) * strides[d]);
  }
  auto targets = view_offsets(r.get_input_shape(1), step, offset);
  auto* src = static_cast<const char*>(c.in[1]);
  auto* dst = static_cast<char*>(c.out[0]);
  for (size_t i = 0; i < targets.size(); ++i) std::memcpy(dst + targets[i] * es, src + i * es, es);
});

// Output k is rows [start_k, start_k + length_k) of the split axis.
NGRAPH_INTERPRETER_KERNEL("Split", [](KernelCall& c) {
  auto& sp = static_cast<const op::Split&>(c.node);
  const Shape& in = sp.get_input_shape(0);
  size_t axis = sp.get_axis(), outer = 1, inner = sp.get_input_element_type(0).size();
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  auto* src = static_cast<const char*>(c.in[0]);
  size_t start = 0;
  for (size_t k = 0; k < sp.get_output_size(); ++k) {
    size_t len = sp.get_output_shape(k)[axis];
    auto* dst = static_cast<char*>(c.out[k]);
    for (size_t o = 0; o < outer; ++o)
      if (len * inner != 0)
        std::memcpy(dst + o * len * inner, src + (o * in[axis] + start) * inner, len * inner);
    start += len;
  }
});

// out[i] = data[i mod data.shape], axis by axis.
NGRAPH_INTERPRETER_KERNEL("Tile", [](KernelCall& c) {
  auto& t = static_cast<const op::Tile&>(c.node);
  Shape data, repeats;
  t.get_padded(data, repeats);
  const Shape& out = t.get_shape();
  auto in_strides = signed_strides(data);
  size_t es = element_size(c), n = shape_size(out);
  auto* src = static_cast<const char*>(c.in[0]);
  auto* dst = static_cast<char*>(c.out[0]);
  std::vector<size_t> coord(out.size(), 0);
  for (size_t e = 0; e < n; ++e) {
    std::ptrdiff_t offset = 0;
    for (size_t d = 0; d < out.size(); ++d)
      offset += static_cast<std::ptrdiff_t>(coord[d] % data[d]) * in_strides[d];
    std::memcpy(dst + e * es, src + offset * static_cast<std::ptrdiff_t>(es), es);
    for (size_t d = out.size(); d-- > 0;) {
      if (++coord[d] < out[d]) break;
      coord[d] = 0;
    }
  }
});

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
