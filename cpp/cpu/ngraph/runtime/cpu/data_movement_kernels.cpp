// Kernels that move data: views (Broadcast, Reshape, Slice, Reverse) are one strided copy;
// Concat copies blocks; Pad and OneHot map indices. None depend on the element type beyond
// its size, except OneHot which reads values.
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/block_cast.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

Kernel noop() {
  return [](const void* const*, void* const*) {};
}

NGRAPH_CPU_KERNEL("Broadcast", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& b = static_cast<const op::Broadcast&>(node);
  const Shape& out = b.get_shape();
  Strides in_strides = row_major_strides(b.get_input_shape(0));
  std::vector<std::ptrdiff_t> strides(out.size(), 0);
  size_t k = 0;
  for (size_t d = 0; d < out.size(); ++d)
    if (!b.get_broadcast_axes().count(d)) strides[d] = static_cast<std::ptrdiff_t>(in_strides[k++]);
  return make_view_copy(out, strides, 0, b.get_element_type().size());
});

NGRAPH_CPU_KERNEL("Reshape", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& r = static_cast<const op::Reshape&>(node);
  const Shape& in = r.get_input_shape(0);
  size_t es = r.get_element_type().size();
  if (!r.is_transpose()) {
    size_t bytes = ctx.output(0).bytes();
    return [bytes](const void* const* i, void* const* o) {
      if (bytes) std::memcpy(o[0], i[0], bytes);
    };
  }
  // Walk arg in the permuted axis order; the row-major result is then already reshaped.
  Strides in_strides = row_major_strides(in);
  Shape permuted;
  std::vector<std::ptrdiff_t> strides;
  for (auto a : r.get_input_order()) {
    permuted.push_back(in[a]);
    strides.push_back(static_cast<std::ptrdiff_t>(in_strides[a]));
  }
  return make_view_copy(permuted, strides, 0, es);
});

NGRAPH_CPU_KERNEL("Slice", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& s = static_cast<const op::Slice&>(node);
  Strides in_strides = row_major_strides(s.get_input_shape(0));
  std::vector<std::ptrdiff_t> strides;
  std::ptrdiff_t offset = 0;
  for (size_t d = 0; d < in_strides.size(); ++d) {
    offset += static_cast<std::ptrdiff_t>(s.get_lower_bounds()[d] * in_strides[d]);
    strides.push_back(static_cast<std::ptrdiff_t>(s.get_strides()[d] * in_strides[d]));
  }
  if (ctx.output(0).elements() == 0) return noop();
  return make_view_copy(s.get_shape(), strides, offset, s.get_element_type().size());
});

NGRAPH_CPU_KERNEL("Reverse", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& r = static_cast<const op::Reverse&>(node);
  const Shape& shape = r.get_shape();
  Strides in_strides = row_major_strides(shape);
  std::vector<std::ptrdiff_t> strides = to_signed(in_strides);
  std::ptrdiff_t offset = 0;
  for (auto a : r.get_reversed_axes()) {
    if (shape[a] == 0) continue;
    offset += static_cast<std::ptrdiff_t>((shape[a] - 1) * in_strides[a]);
    strides[a] = -strides[a];
  }
  if (ctx.output(0).elements() == 0) return noop();
  return make_view_copy(shape, strides, offset, r.get_element_type().size());
});

NGRAPH_CPU_KERNEL("Concat", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& c = static_cast<const op::Concat&>(node);
  size_t axis = c.get_concatenation_axis();
  const Shape& out = c.get_shape();
  size_t es = c.get_element_type().size();
  size_t outer = 1, inner = es;
  for (size_t d = 0; d < axis; ++d) outer *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  std::vector<size_t> chunk;  // bytes per outer index, per input
  for (size_t i = 0; i < c.get_input_size(); ++i) chunk.push_back(c.get_input_shape(i)[axis] * inner);
  size_t row = out[axis] * inner;
  return [outer, chunk, row](const void* const* in, void* const* o) {
    char* dst = static_cast<char*>(o[0]);
    size_t col = 0;
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (chunk[i] == 0) continue;
      const char* src = static_cast<const char*>(in[i]);
      for (size_t r = 0; r < outer; ++r) std::memcpy(dst + r * row + col, src + r * chunk[i], chunk[i]);
      col += chunk[i];
    }
  };
});

// For each axis, the source index of every output index (-1: the pad value).
std::vector<std::vector<std::ptrdiff_t>> pad_maps(const op::Pad& p) {
  const Shape& in = p.get_input_shape(0);
  const Shape& out = p.get_shape();
  std::vector<std::vector<std::ptrdiff_t>> maps(in.size());
  const std::string& mode = p.get_pad_mode();
  for (size_t d = 0; d < in.size(); ++d) {
    auto n = static_cast<std::ptrdiff_t>(in[d]);
    for (size_t o = 0; o < out[d]; ++o) {
      std::ptrdiff_t i = static_cast<std::ptrdiff_t>(o) - p.get_padding_below()[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") i = -1;
        else if (mode == "edge") i = i < 0 ? 0 : n - 1;
        else if (mode == "reflect") i = i < 0 ? -i : 2 * (n - 1) - i;
        else i = i < 0 ? -i - 1 : 2 * n - 1 - i;  // symmetric
      }
      maps[d].push_back(i);
    }
  }
  return maps;
}

NGRAPH_CPU_KERNEL("Pad", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& p = static_cast<const op::Pad&>(node);
  const Shape& out = p.get_shape();
  size_t es = p.get_element_type().size();
  auto maps = pad_maps(p);
  Strides in_strides = row_major_strides(p.get_input_shape(0));
  size_t total = ctx.output(0).elements();
  size_t rank = out.size();
  return [maps, in_strides, total, rank, es, out](const void* const* in, void* const* o) {
    const char* src = static_cast<const char*>(in[0]);
    const char* value = static_cast<const char*>(in[1]);
    char* dst = static_cast<char*>(o[0]);
    std::vector<size_t> idx(rank, 0);
    for (size_t e = 0; e < total; ++e) {
      std::ptrdiff_t off = 0;
      bool pad = false;
      for (size_t d = 0; d < rank && !pad; ++d) {
        std::ptrdiff_t i = maps[d][idx[d]];
        if (i < 0) pad = true;
        else off += i * static_cast<std::ptrdiff_t>(in_strides[d]);
      }
      std::memcpy(dst + e * es, pad ? value : src + off * static_cast<std::ptrdiff_t>(es), es);
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  };
});

NGRAPH_CPU_KERNEL("OneHot", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& h = static_cast<const op::OneHot&>(node);
  const Shape& out = h.get_shape();
  size_t axis = h.get_one_hot_axis();
  size_t outer = 1, inner = 1, depth = out[axis];
  for (size_t d = 0; d < axis; ++d) outer *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  std::string name = h.get_name();
  return element::dispatch(h.get_element_type(), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [=](const void* const* in, void* const* o) {
      const T* idx = static_cast<const T*>(in[0]);
      T* dst = static_cast<T*>(o[0]);
      std::fill(dst, dst + outer * depth * inner, T(0));
      for (size_t a = 0; a < outer; ++a)
        for (size_t b = 0; b < inner; ++b) {
          T v = idx[a * inner + b];
          auto iv = static_cast<long long>(v);
          if (static_cast<T>(iv) != v || iv < 0 || static_cast<size_t>(iv) >= depth)
            throw std::out_of_range(concat_message("[OneHot] value ", +v, " at index ", a * inner + b,
                                                   " of ", name, " is not an integer in [0, ",
                                                   depth, ")"));
          dst[(a * depth + static_cast<size_t>(iv)) * inner + b] = T(1);
        }
    };
  });
});

// ------------------------------------------------------------- indexing (Gather, ScatterAdd)

// Every index of a Gather, EmbeddingLookup or ScatterAdd, checked and resolved to [0, n)
// before anything is written (an out-of-range index fails the call naming the op).
struct IndexReader {
  const Node* node;
  op::IndexedAxis g;
  element::Type type;
  void read(const void* indices, std::vector<size_t>& rows) const {
    for (size_t i = 0; i < g.count; ++i) rows[i] = op::checked_index(*node, g, type, indices, i);
  }
};

// Output block (o, i) of inner elements is data block (o, indices[i]).
Kernel gather_kernel(KernelContext& ctx, size_t data_input, size_t indices_input) {
  const Node& node = ctx.node;
  IndexReader reader{&node, op::IndexedAxis::of(node), node.get_input_element_type(indices_input)};
  size_t block = reader.g.inner * node.get_element_type().size();
  // Indices are checked even when the result is empty (an axis of size 0 admits none), as the
  // INTERPRETER does.
  auto rows = std::make_shared<std::vector<size_t>>(reader.g.count);
  return [reader, block, rows, data_input, indices_input](const void* const* in, void* const* o) {
    reader.read(in[indices_input], *rows);
    const auto& g = reader.g;
    auto* src = static_cast<const char*>(in[data_input]);
    auto* dst = static_cast<char*>(o[0]);
    if (block == 0) return;
    for (size_t a = 0; a < g.outer; ++a)
      for (size_t i = 0; i < g.count; ++i)
        std::memcpy(dst + (a * g.count + i) * block, src + (a * g.n + (*rows)[i]) * block, block);
  };
}

NGRAPH_CPU_KERNEL("Gather", [](KernelContext& ctx) -> Kernel { return gather_kernel(ctx, 0, 1); });
NGRAPH_CPU_KERNEL("EmbeddingLookup",
                  [](KernelContext& ctx) -> Kernel { return gather_kernel(ctx, 1, 0); });

// out = inputs, then out[o, indices[i], :] += updates[o, i, :] in index order.
NGRAPH_CPU_KERNEL("ScatterAdd", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  IndexReader reader{&node, op::IndexedAxis::of(node), node.get_input_element_type(1)};
  size_t bytes = ctx.output(0).bytes();
  auto rows = std::make_shared<std::vector<size_t>>(reader.g.count);
  element::Type t = node.get_element_type();
  if (!t.is_numeric())
    node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
  return element::dispatch(t, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, element::boolean_t>) {
      return Kernel{};
    } else {
      return [reader, bytes, rows](const void* const* in, void* const* o) {
        reader.read(in[1], *rows);
        if (bytes && o[0] != in[0]) std::memcpy(o[0], in[0], bytes);
        const auto& g = reader.g;
        const T* upd = static_cast<const T*>(in[2]);
        T* out = static_cast<T*>(o[0]);
        for (size_t a = 0; a < g.outer; ++a)
          for (size_t i = 0; i < g.count; ++i) {
            T* dst = out + (a * g.n + (*rows)[i]) * g.inner;
            const T* src = upd + (a * g.count + i) * g.inner;
            for (size_t j = 0; j < g.inner; ++j) dst[j] = static_cast<T>(dst[j] + src[j]);
          }
      };
    }
  });
});

// --------------------------------------------------------- ReplaceSlice, Split, Tile

// dest copied (unless written in place), then src laid over the strided slice.
NGRAPH_CPU_KERNEL("ReplaceSlice", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& r = static_cast<const op::ReplaceSlice&>(node);
  const Shape& slice = r.get_input_shape(1);
  Strides out_strides = row_major_strides(r.get_shape());
  std::vector<std::ptrdiff_t> strides;
  std::ptrdiff_t offset = 0;
  for (size_t d = 0; d < out_strides.size(); ++d) {
    offset += static_cast<std::ptrdiff_t>(r.get_lower_bounds()[d] * out_strides[d]);
    strides.push_back(static_cast<std::ptrdiff_t>(r.get_strides()[d] * out_strides[d]));
  }
  size_t bytes = ctx.output(0).bytes(), es = r.get_element_type().size();
  StridedLoop loop(slice, {std::move(strides), to_signed(row_major_strides(slice))});
  return [loop, bytes, offset, es](const void* const* in, void* const* o) {
    if (bytes && o[0] != in[0]) std::memcpy(o[0], in[0], bytes);
    char* dst = static_cast<char*>(o[0]) + offset * static_cast<std::ptrdiff_t>(es);
    const char* src = static_cast<const char*>(in[1]);
    loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
      auto step = static_cast<std::ptrdiff_t>(es);
      if (inner[0] == 1 && inner[1] == 1) {
        std::memcpy(dst + off[0] * step, src + off[1] * step, n * es);
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        auto k = static_cast<std::ptrdiff_t>(i);
        std::memcpy(dst + (off[0] + k * inner[0]) * step, src + (off[1] + k * inner[1]) * step, es);
      }
    });
  };
});

// Output k is rows [start_k, start_k + length_k) of the split axis, one block per outer index.
NGRAPH_CPU_KERNEL("Split", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& sp = static_cast<const op::Split&>(node);
  const Shape& in = sp.get_input_shape(0);
  size_t axis = sp.get_axis(), outer = 1, inner = sp.get_input_element_type(0).size();
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  std::vector<size_t> lengths;
  for (size_t k = 0; k < sp.get_output_size(); ++k) lengths.push_back(sp.get_output_shape(k)[axis] * inner);
  size_t row = in[axis] * inner;
  return [outer, lengths, row](const void* const* i, void* const* o) {
    auto* src = static_cast<const char*>(i[0]);
    size_t start = 0;
    for (size_t k = 0; k < lengths.size(); ++k) {
      if (lengths[k])
        for (size_t a = 0; a < outer; ++a)
          std::memcpy(static_cast<char*>(o[k]) + a * lengths[k], src + a * row + start, lengths[k]);
      start += lengths[k];
    }
  };
});

// The result viewed as [r0, d0, r1, d1, ...] is a view of data with stride 0 on the r axes.
NGRAPH_CPU_KERNEL("Tile", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& t = static_cast<const op::Tile&>(node);
  Shape data, repeats;
  t.get_padded(data, repeats);
  Strides in_strides = row_major_strides(data);
  Shape split;
  std::vector<std::ptrdiff_t> strides;
  for (size_t d = 0; d < data.size(); ++d) {
    split.push_back(repeats[d]);
    split.push_back(data[d]);
    strides.push_back(0);
    strides.push_back(static_cast<std::ptrdiff_t>(in_strides[d]));
  }
  if (ctx.output(0).elements() == 0) return noop();
  return make_view_copy(split, strides, 0, t.get_element_type().size());
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

// GetOutputElement never runs: pass_results_through rewires its users to the output it names
// before layouts are assigned. The kernel is here so that the op has one (a plain copy, should
// a plan ever keep the node).
NGRAPH_CPU_KERNEL(op::GetOutputElement::type_name, [](KernelContext& ctx) -> Kernel {
  size_t bytes = ctx.output(0).bytes();
  return [bytes](const void* const* in, void* const* out) {
    if (bytes) std::memcpy(out[0], in[0], bytes);
  };
});

// Reorder: oneDNN's reorder between the two descriptors the layout pass gave (f32, and bf16
// activations; other types are always plain, so a Reorder between plain layouts is a copy).
// PrecisionCast: the same reorder between two element types (f32 -> bf16), each in its
// layout; a weights cast between two layouts that tile alike is block_cast.hpp's.
Kernel dnnl_reorder(KernelContext& ctx) {
  const TensorDesc& from = ctx.input(0);
  const TensorDesc& to = ctx.output(0);
  bool laid_out = from.type() == element::f32 || from.type() == element::bf16;
  if (from.type() == to.type() && (from.same_layout(to) || !laid_out)) {
    size_t bytes = to.bytes();
    return [bytes](const void* const* in, void* const* out) {
      if (bytes) std::memcpy(out[0], in[0], bytes);
    };
  }
  if (to.bytes() == 0) return [](const void* const*, void* const*) {};
  // A plain side takes the other side's dims (a grouped view of filters has more axes).
  auto src = to.is_plain() ? from.dnnl_desc() : from.dnnl_desc_like(to.md());
  auto dst = from.is_plain() ? to.dnnl_desc() : to.dnnl_desc_like(from.md());
  if (auto k = block_permuting_cast(src, dst)) return *k;
  dnnl::reorder::primitive_desc pd(dnnl_engine(), src, dnnl_engine(), dst, dnnl_attr());
  return dnnl_kernel(ctx, dnnl::reorder(pd), pd.scratchpad_desc(),
                     {{DNNL_ARG_FROM, src, true, 0}, {DNNL_ARG_TO, dst, false, 0}});
}

// A cast keeps its input's layout (in its own element type): an activation a convolution
// wrote blocked is cast where it lies, and the next convolution reads it so. A variable (the
// weights) is read in the layout its update is written in (a convolution's filter gradient's):
// the cast into the convolution's layout is one reorder from it, and the gradient needs none.
void precision_cast_layout(LayoutContext& lc) {
  const TensorDesc& in = lc.produced[0];
  if (lc.free[0]) lc.any_layout[0] = true;
  if (in.is_plain() || lc.free[0]) return;
  dnnl_memory_desc_t c = in.md().data;
  c.data_type = static_cast<dnnl_data_type_t>(dnnl_type(lc.node.get_element_type()));
  lc.wanted[0] = in;
  lc.outputs[0] = TensorDesc::with_layout(lc.node.get_element_type(), in.shape(), dnnl::memory::desc(c));
}

NGRAPH_CPU_KERNEL(Reorder::type_name, dnnl_reorder);
NGRAPH_CPU_KERNEL(PrecisionCast::type_name, dnnl_reorder, precision_cast_layout);
// Its two outputs' layouts were decided (pair_weight_casts) where their pair kernel exists.
NGRAPH_CPU_KERNEL(PrecisionCastPair::type_name, [](KernelContext& ctx) -> Kernel {
  const TensorDesc& from = ctx.input(0);
  auto kernel = block_permuting_cast_pair(from.dnnl_desc_like(ctx.output(0).md()), ctx.output(0).dnnl_desc(),
                                          ctx.output(1).dnnl_desc());
  if (!kernel) ctx.node.fail_type("internal: no kernel casts these layouts at once");
  return *kernel;
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
