// MaxPool, AvgPool, LRN and their backprops: for f32 and bf16 max pooling on plain or
// channel-blocked data our own vectorised loops; otherwise oneDNN's pooling and LRN primitives for f32 (in
// the layouts they choose from their input's: a blocked input stays blocked), loops for f64
// and for what oneDNN rejects. MaxPool's gradient reads the forward's workspace when the
// fusion pass paired them (MaxPoolWithWorkspace); alone, it runs the forward into scratch.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/bf16_convert.hpp"
#include "ngraph/runtime/cpu/op/max_pool_with_workspace.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;
using dims = dnnl::memory::dims;
using md = dnnl::memory::desc;

bool is_max_with_workspace(const Node& n) { return n.get_type_name() == MaxPoolWithWorkspace::type_name; }
bool is_max_backprop_with_workspace(const Node& n) {
  return n.get_type_name() == MaxPoolBackpropWithWorkspace::type_name;
}

// ------------------------------------------------------------------------ the geometry

// One pooling problem: data (N, C, spatial) pooled into `out`; `above` includes the cells
// ceil_mode adds, so floor division gives `out` (how oneDNN takes ceil_mode).
struct Pool {
  Shape data, out, window, below, above;
  Strides strides;
  algorithm alg = algorithm::pooling_max;
};

algorithm avg_algorithm(bool include_padding) {
  return include_padding ? algorithm::pooling_avg_include_padding
                         : algorithm::pooling_avg_exclude_padding;
}

// The problem of any pooling node: forward ops pool input 0 into output 0, backprops pool the
// forward argument into delta's shape.
Pool pool_of(const Node& node) {
  auto& p = dynamic_cast<const op::PoolingAttributes&>(node);
  const std::string& t = node.get_type_name();
  Pool pool;
  if (t == "AvgPoolBackprop") {
    auto& a = static_cast<const op::AvgPoolBackprop&>(node);
    pool.data = a.get_forward_arg_shape();
    pool.out = node.get_input_shape(0);
    pool.alg = avg_algorithm(a.get_include_padding_in_avg_computation());
  } else if (t == "MaxPoolBackprop" || is_max_backprop_with_workspace(node)) {
    pool.data = node.get_input_shape(0);
    pool.out = node.get_input_shape(1);
  } else {
    pool.data = node.get_input_shape(0);
    pool.out = node.get_output_shape(0);
    if (t == "AvgPool")
      pool.alg = avg_algorithm(static_cast<const op::AvgPool&>(node).get_include_padding_in_avg_computation());
  }
  pool.window = p.get_window_shape();
  pool.strides = p.get_window_movement_strides();
  pool.below = p.get_padding_below();
  pool.above = op::effective_padding_above(pool.data, p);
  return pool;
}

dims dims_of(const std::vector<size_t>& v) { return dims(v.begin(), v.end()); }

// A window with no data cell (only possible for max pooling, whose result there is -inf).
bool has_empty_window(const Pool& p) {
  for (size_t i = 0; i < p.window.size(); ++i) {
    size_t in = p.data[i + 2], last_start = (p.out[i + 2] - 1) * p.strides[i];
    if (in == 0 || p.below[i] >= p.window[i] || last_start >= in + p.below[i]) return true;
  }
  return false;
}

// ----------------------------------------------------------------- oneDNN primitives

// The forward primitive on `src` (its dst and workspace in the layouts it picks), or nothing
// when oneDNN rejects the problem or its results would differ from the loops' (oneDNN's max
// of an empty window is the lowest float, not -inf).
std::optional<dnnl::pooling_forward::primitive_desc> forward_pd(const Pool& p, const md& src,
                                                               prop_kind prop) {
  if (!dnnl_rank_ok(p.data) || shape_size(p.out) == 0) return std::nullopt;
  if (p.alg == algorithm::pooling_max && has_empty_window(p)) return std::nullopt;
  try {
    md dst(to_dims(p.out), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
    dnnl::pooling_forward::desc d(prop, p.alg, src, dst, dims_of(p.strides), dims_of(p.window),
                                  dims_of(p.below), dims_of(p.above));
    return dnnl::pooling_forward::primitive_desc(d, dnnl_attr(), dnnl_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

struct BackwardPds {
  dnnl::pooling_forward::primitive_desc fwd;
  dnnl::pooling_backward::primitive_desc bwd;
};

// The backward primitive (diff layouts its choice, format_tag::any) with its forward hint on
// `src`.
std::optional<BackwardPds> backward_pds(const Pool& p, const md& src) {
  auto fwd = forward_pd(p, src, prop_kind::forward_training);
  if (!fwd) return std::nullopt;
  try {
    auto f32 = dnnl::memory::data_type::f32;
    auto any = dnnl::memory::format_tag::any;
    dnnl::pooling_backward::desc d(p.alg, md(to_dims(p.data), f32, any), md(to_dims(p.out), f32, any),
                                   dims_of(p.strides), dims_of(p.window), dims_of(p.below),
                                   dims_of(p.above));
    return BackwardPds{*fwd, dnnl::pooling_backward::primitive_desc(d, dnnl_attr(), dnnl_engine(), *fwd)};
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// `shape` in the layout of `d` when that is a common activation format of its rank (plain,
// channels last, channels blocked by 8 or 16); otherwise plain. AvgPoolBackprop has no data
// input: its gradient takes the layout of delta this way.
md like_layout(const TensorDesc& d, const Shape& shape) {
  using tag = dnnl::memory::format_tag;
  static const std::vector<std::vector<tag>> tags{{tag::ncw, tag::nwc, tag::nCw8c, tag::nCw16c},
                                                  {tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c},
                                                  {tag::ncdhw, tag::ndhwc, tag::nCdhw8c, tag::nCdhw16c}};
  if (d.is_plain() || shape.size() < 3 || shape.size() > 5) return plain_desc(shape);
  for (tag t : tags[shape.size() - 3])
    if (md(to_dims(d.shape()), dnnl::memory::data_type::f32, t) == d.md())
      return md(to_dims(shape), dnnl::memory::data_type::f32, t);
  return plain_desc(shape);
}

// The data layout a backprop's primitives are built on: its data input's, or delta's.
md backward_src(const Node& node, const Pool& p, const std::vector<const TensorDesc*>& inputs) {
  if (node.get_type_name() == "AvgPoolBackprop") return like_layout(*inputs[0], p.data);
  return inputs[0]->dnnl_desc();
}

// ------------------------------------------------------------------------- loop kernels

// The geometry as three spatial axes (leading ones of size 1 added), with the data cells
// [lo, hi) of every window position along each axis.
struct Grid {
  size_t planes = 0;  // N * C
  std::array<size_t, 3> in{1, 1, 1}, out{1, 1, 1}, window{1, 1, 1};
  std::array<std::vector<std::pair<size_t, size_t>>, 3> cells;
  bool include_padding = false;
  // No data cell in two windows; every data cell in one (max pooling's gradient is then
  // written once per cell).
  bool disjoint = true, covers = true;
  size_t in_plane() const { return in[0] * in[1] * in[2]; }
};

// Sets g.disjoint and g.covers from the windows' cells along each axis.
void find_overlaps(Grid& g) {
  for (size_t k = 0; k < 3; ++k) {
    size_t end = 0;  // where the cells of the windows so far end
    for (auto [lo, hi] : g.cells[k]) {
      if (lo == hi) continue;
      if (lo < end) g.disjoint = false;
      if (lo > end) g.covers = false;
      end = std::max(end, hi);
    }
    if (end < g.in[k]) g.covers = false;
  }
}

Grid grid_of(const Pool& p) {
  Grid g;
  g.planes = p.data[0] * p.data[1];
  g.include_padding = p.alg == algorithm::pooling_avg_include_padding;
  size_t n = p.data.size() - 2, lead = 3 - n;
  for (size_t i = 0; i < n; ++i) {
    g.in[lead + i] = p.data[i + 2];
    g.out[lead + i] = p.out[i + 2];
    g.window[lead + i] = p.window[i];
  }
  for (size_t k = 0; k < 3; ++k) {
    bool spatial = k >= lead;
    auto w = static_cast<std::ptrdiff_t>(g.window[k]), in = static_cast<std::ptrdiff_t>(g.in[k]);
    for (size_t o = 0; o < g.out[k]; ++o) {
      std::ptrdiff_t start = spatial ? static_cast<std::ptrdiff_t>(o * p.strides[k - lead]) -
                                           static_cast<std::ptrdiff_t>(p.below[k - lead])
                                     : 0;
      std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>(start + w, 0, in);
      std::ptrdiff_t lo = std::clamp<std::ptrdiff_t>(start, 0, hi);
      g.cells[k].emplace_back(static_cast<size_t>(lo), static_cast<size_t>(hi));
    }
  }
  find_overlaps(g);
  return g;
}

struct Box {
  std::array<size_t, 3> lo, hi;
  size_t cells() const { return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]); }
};

// f(offset of the window's plane in the data, index of the output cell, the window's cells).
template <typename F>
void for_each_window(const Grid& g, F&& f) {
  size_t o = 0;
  for (size_t plane = 0; plane < g.planes; ++plane)
    for (size_t a = 0; a < g.out[0]; ++a)
      for (size_t b = 0; b < g.out[1]; ++b)
        for (size_t c = 0; c < g.out[2]; ++c, ++o) {
          Box box{{g.cells[0][a].first, g.cells[1][b].first, g.cells[2][c].first},
                  {g.cells[0][a].second, g.cells[1][b].second, g.cells[2][c].second}};
          f(plane * g.in_plane(), o, box);
        }
}

// f(offset in the plane) for every cell of `box`, in row-major order.
template <typename F>
void for_each_cell(const Grid& g, const Box& box, F&& f) {
  for (size_t d = box.lo[0]; d < box.hi[0]; ++d)
    for (size_t h = box.lo[1]; h < box.hi[1]; ++h)
      for (size_t w = box.lo[2]; w < box.hi[2]; ++w) f((d * g.in[1] + h) * g.in[2] + w);
}

size_t divisor(const Grid& g, const Box& box) {
  return g.include_padding ? g.window[0] * g.window[1] * g.window[2] : box.cells();
}

template <typename T>
Kernel loop_forward(const Pool& p) {
  Grid g = grid_of(p);
  bool max = p.alg == algorithm::pooling_max;
  return [g, max](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    for_each_window(g, [&](size_t base, size_t o, const Box& box) {
      T acc = max ? -std::numeric_limits<T>::infinity() : T(0);
      for_each_cell(g, box, [&](size_t i) {
        T v = x[base + i];
        acc = max ? (v > acc || (v != v && acc == acc) ? v : acc) : acc + v;  // NaN propagates
      });
      y[o] = max ? acc : acc / static_cast<T>(divisor(g, box));
    });
  };
}

// Gradients: each delta to the first maximum (or first NaN) of its window, or spread over its
// data cells.
// in[x_input] is the forward argument (max only), in[delta_input] the delta.
template <typename T>
Kernel loop_backward(const Pool& p, size_t x_input, size_t delta_input) {
  Grid g = grid_of(p);
  bool max = p.alg == algorithm::pooling_max;
  size_t n = shape_size(p.data);
  return [g, max, n, x_input, delta_input](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[x_input]);
    const T* delta = static_cast<const T*>(in[delta_input]);
    T* dx = static_cast<T*>(out[0]);
    std::fill(dx, dx + n, T(0));
    for_each_window(g, [&](size_t base, size_t o, const Box& box) {
      if (box.cells() == 0) return;
      if (!max) {
        T share = delta[o] / static_cast<T>(divisor(g, box));
        for_each_cell(g, box, [&](size_t i) { dx[base + i] += share; });
        return;
      }
      size_t best = n;
      for_each_cell(g, box, [&](size_t i) {
        T v = x[base + i];
        if (best == n || (x[best] == x[best] && (v > x[best] || v != v))) best = base + i;
      });
      dx[best] += delta[o];
    });
  };
}

template <typename F>
Kernel by_real_type(const Node& node, F&& f) {
  element::Type t = node.get_output_element_type(0);
  if (t == element::f32) return f(float{});
  if (t == element::f64) return f(double{});
  node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
}

// ------------------------------------------------- our max pooling on f32 and bf16 data
// oneDNN 2.6's max pooling on channel-blocked layouts is several times slower than a direct
// loop (docs/performance.md). These loops take plain data (N, C, spatial) and data whose
// channels are blocked by 8 or 16 (nChw8c, nChw16c and their 1-D and 3-D forms): there a
// block's channels are contiguous, so one window position is one 16-lane vector (AVX-512) or
// one or two 8-lane vectors. The result and the workspace are in the data's layout; the
// workspace holds, per output element, the offset in its plane (the spatial index) of the
// window's first maximum, or -1 for a window without data. NaN propagates: the first NaN of
// a window is its maximum. NGRAPH_CPU_POOL=dnnl (read when a computation is compiled) leaves
// all pooling to oneDNN.
//
// Mixed precision (bf16_sets of MaxPool, MaxPoolBackprop and the workspace pair): the data,
// the result, delta and the gradient are each f32 or bf16, loaded into f32 vectors and
// stored back (a maximum of bf16 values exactly, an f32 rounded to nearest even); the
// gradient of overlapping windows is summed in f32 (in scratch) and rounded once. Disjoint
// windows write each gradient cell once (0 + delta or 0) instead of zeroing and adding.
// With bf16 values our loops run whatever the layout: the layout rule reads other layouts
// plain.

bool own_max_pool_enabled() {
  std::string v = settings::text("NGRAPH_CPU_POOL");
  if (v == "own") return true;
  if (v == "dnnl") return false;
  throw ngraph_error("NGRAPH_CPU_POOL must be 'own' or 'dnnl', not '" + v + "'");
}

// The layout of an activation of rank 3 to 5 with channels blocked by 8 or 16.
dnnl::memory::format_tag blocked_tag(size_t rank, size_t block) {
  using tag = dnnl::memory::format_tag;
  static const std::array<std::array<tag, 2>, 3> tags{{{tag::nCw8c, tag::nCw16c},
                                                       {tag::nChw8c, tag::nChw16c},
                                                       {tag::nCdhw8c, tag::nCdhw16c}}};
  return tags[rank - 3][block == 16];
}

// The channel block of `d`, a value of `shape`: 1 for plain, 8 or 16 for channels blocked by
// 8 or 16; 0 for any other layout.
size_t channel_block(const TensorDesc& d, const Shape& shape) {
  if (d.is_plain()) return 1;
  if (shape.size() < 3 || shape.size() > 5) return 0;
  for (size_t block : {8, 16})
    if (md(to_dims(shape), dnnl_type(d.type()), blocked_tag(shape.size(), block)) == d.md()) return block;
  return 0;
}

// `shape` of `type` (f32, bf16, i32) laid out like a value of channel block `block`.
TensorDesc block_desc(element::Type type, const Shape& shape, size_t block) {
  if (block == 1) return TensorDesc::plain(type, shape);
  auto dt = type == element::i32 ? dnnl::memory::data_type::s32 : dnnl_type(type);
  return TensorDesc::with_layout(type, shape, md(to_dims(shape), dt, blocked_tag(shape.size(), block)));
}

// The channel block our loops pool `data` (f32 or bf16) with, or nothing (oneDNN or the
// generic loops then). Padded blocks (channels not a multiple of the block) are pooled too,
// except where a window has no data: its -inf would break the zeros of the padding.
std::optional<size_t> own_max_block(const Pool& p, const TensorDesc& data) {
  bool real = data.type() == element::f32 || data.type() == element::bf16;
  if (p.alg != algorithm::pooling_max || !real || !own_max_pool_enabled()) return std::nullopt;
  if (p.data.size() < 3 || p.data.size() > 5) return std::nullopt;
  size_t block = channel_block(data, p.data);
  if (block == 0) return std::nullopt;
  if (p.data[1] % block != 0 && has_empty_window(p)) return std::nullopt;
  return block;
}

// The geometry with planes of `block` channels.
Grid block_grid(const Pool& p, size_t block) {
  Grid g = grid_of(p);
  g.planes = p.data[0] * ((p.data[1] + block - 1) / block);
  return g;
}

size_t out_plane(const Grid& g) { return g.out[0] * g.out[1] * g.out[2]; }

using bf16_bits = std::uint16_t;  // a bf16 value stored (mixed precision's bf16 activations)

using MaxForwardFn = void (*)(const Grid&, const void*, void*, int32_t*);
using MaxBackwardFn = void (*)(const Grid&, const void*, const int32_t*, void*, float*);

// The loops (pooling_loops.hpp) for the build's instruction set and as AVX2 and AVX-512
// twins. L lanes, N vectors per cell (a block of L * N channels); L == 0: one lane (plain).
// Always-inline helpers and lambdas: each copy compiled for its instruction set.
#define NGRAPH_POOL_LOOP __attribute__((always_inline)) inline
#define NGRAPH_POOL_LAMBDA __attribute__((always_inline))
namespace loops_base {
#include "ngraph/runtime/cpu/pooling_loops.hpp"
}  // namespace loops_base
#if defined(__x86_64__) && defined(__GNUC__)
#define NGRAPH_POOL_HAVE_TWINS 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace loops_avx2 {
#include "ngraph/runtime/cpu/pooling_loops.hpp"
}  // namespace loops_avx2
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")
namespace loops_avx512 {
#include "ngraph/runtime/cpu/pooling_loops.hpp"
}  // namespace loops_avx512
#pragma GCC pop_options
#endif
#undef NGRAPH_POOL_LOOP
#undef NGRAPH_POOL_LAMBDA

// The loops for a block of 1, 8 or 16 channels of values of types A and B (forward: x and y;
// backward: delta and dx) on this CPU: 16 lanes a cell of 16 channels with AVX-512, else 8.
struct MaxLoops {
  MaxForwardFn forward;
  MaxBackwardFn backward;
};
template <typename A, typename B>
MaxLoops max_loops_typed(size_t block) {
#ifdef NGRAPH_POOL_HAVE_TWINS
  if (use_avx512_twins()) {
    if (block == 1) return {&loops_avx512::max_forward<0, 1, A, B>, &loops_avx512::max_backward<0, 1, A, B>};
    if (block == 8) return {&loops_avx512::max_forward<8, 1, A, B>, &loops_avx512::max_backward<8, 1, A, B>};
    return {&loops_avx512::max_forward<16, 1, A, B>, &loops_avx512::max_backward<16, 1, A, B>};
  }
  if (use_avx2_twins()) {
    if (block == 1) return {&loops_avx2::max_forward<0, 1, A, B>, &loops_avx2::max_backward<0, 1, A, B>};
    if (block == 8) return {&loops_avx2::max_forward<8, 1, A, B>, &loops_avx2::max_backward<8, 1, A, B>};
    return {&loops_avx2::max_forward<8, 2, A, B>, &loops_avx2::max_backward<8, 2, A, B>};
  }
#endif
  if (block == 1) return {&loops_base::max_forward<0, 1, A, B>, &loops_base::max_backward<0, 1, A, B>};
  if (block == 8) return {&loops_base::max_forward<8, 1, A, B>, &loops_base::max_backward<8, 1, A, B>};
  return {&loops_base::max_forward<8, 2, A, B>, &loops_base::max_backward<8, 2, A, B>};
}
MaxLoops max_loops(size_t block, element::Type a, element::Type b) {
  bool a16 = a == element::bf16, b16 = b == element::bf16;
  if (a16) return b16 ? max_loops_typed<bf16_bits, bf16_bits>(block) : max_loops_typed<bf16_bits, float>(block);
  return b16 ? max_loops_typed<float, bf16_bits>(block) : max_loops_typed<float, float>(block);
}

// MaxPool, MaxPoolWithWorkspace: the result (out[0]) and the workspace (out[1], or scratch).
Kernel own_max_forward_kernel(KernelContext& ctx, const Pool& p, size_t block) {
  Grid g = block_grid(p, block);
  size_t ws = is_max_with_workspace(ctx.node) ? 1 : ctx.scratch(g.planes * out_plane(g) * block * sizeof(int32_t));
  MaxForwardFn forward = max_loops(block, ctx.input(0).type(), ctx.output(0).type()).forward;
  return [g, ws, forward](const void* const* in, void* const* out) {
    forward(g, in[0], out[0], static_cast<int32_t*>(out[ws]));
  };
}

// Whether a backprop's bf16 values make it run our loops whatever the layouts (the layout
// rule then reads plain data where the layout is not one they take).
bool takes_bf16(const Node& node) {
  for (size_t i = 0; i < std::min<size_t>(node.get_input_size(), 2); ++i)
    if (node.get_input_element_type(i) == element::bf16) return true;
  return node.get_output_element_type(0) == element::bf16;
}

// MaxPoolBackpropWithWorkspace reads the forward's workspace (in[2]); MaxPoolBackprop runs the
// forward first, into scratch, and so does a backprop with bf16 values whose forward's
// workspace is oneDNN's (its forward kept f32 data in a layout our loops do not take).
Kernel own_max_backward_kernel(KernelContext& ctx, const Pool& p, size_t block) {
  Grid g = block_grid(p, block);
  MaxBackwardFn backward = max_loops(block, ctx.input(1).type(), ctx.output(0).type()).backward;
  // f32 sums of a bf16 gradient of overlapping windows (scratch; 0: none, dx or no sums).
  size_t acc = ctx.output(0).type() == element::f32 || g.disjoint ? 0 : ctx.scratch(ctx.output(0).elements() * sizeof(float));
  if (is_max_backprop_with_workspace(ctx.node)) {
    bool ours = ctx.input(2).same_layout(block_desc(element::i32, p.out, block));
    if (!ours && !takes_bf16(ctx.node))
      throw ngraph_error("[CPU] internal: the workspace of " + ctx.node.get_name() +
                         " is not the one its forward's loops write");
    if (ours)
      return [g, acc, backward](const void* const* in, void* const* out) {
        backward(g, in[1], static_cast<const int32_t*>(in[2]), out[0], acc ? static_cast<float*>(out[acc]) : nullptr);
      };
  }
  MaxForwardFn forward = max_loops(block, ctx.input(0).type(), element::f32).forward;
  size_t cells = g.planes * out_plane(g) * block;
  size_t y = ctx.scratch(cells * sizeof(float)), ws = ctx.scratch(cells * sizeof(int32_t));
  return [g, y, ws, acc, forward, backward](const void* const* in, void* const* out) {
    auto* w = static_cast<int32_t*>(out[ws]);
    forward(g, in[0], out[y], w);
    backward(g, in[1], w, out[0], acc ? static_cast<float*>(out[acc]) : nullptr);
  };
}

// --------------------------------------------------------------------------- layout rules

TensorDesc f32_desc(const Shape& shape, const md& m) { return TensorDesc::with_layout(element::f32, shape, m); }

// Forward: the data as produced (oneDNN pools any layout; a blocked input gives a blocked
// result), the result (and workspace) in the layouts the primitive picks.
// Max pooling with bf16 values (mixed precision) runs our loops whatever the data's layout:
// where they do not take it, they read the data plain.
TensorDesc loops_data(const Pool& p, const TensorDesc& produced, bool bf16) {
  if (!bf16 || own_max_block(p, produced)) return produced;
  return TensorDesc::plain(produced.type(), p.data);
}

void pool_forward_layout(LayoutContext& lc) {
  const Node& node = lc.node;
  element::Type type = node.get_output_element_type(0);
  if (type != element::f32 && type != element::bf16) return;
  Pool p = pool_of(node);
  bool ws = is_max_with_workspace(node);
  TensorDesc data = loops_data(p, lc.produced[0], type == element::bf16 || lc.produced[0].type() == element::bf16);
  if (auto block = own_max_block(p, data)) {
    lc.wanted[0] = data;
    lc.outputs[0] = block_desc(type, p.out, *block);
    if (ws) lc.outputs[1] = block_desc(element::i32, p.out, *block);
    return;
  }
  auto pd = forward_pd(p, lc.produced[0].dnnl_desc(),
                       ws ? prop_kind::forward_training : prop_kind::forward_inference);
  if (!pd) return;
  lc.wanted[0] = lc.produced[0];
  lc.outputs[0] = f32_desc(p.out, pd->dst_desc());
  if (ws) lc.outputs[1] = TensorDesc::with_layout(element::i32, p.out, pd->workspace_desc());
}

// Whether `ws` is the workspace our loops write (forced by a bf16 result, the forward may have
// run them on data in a layout they read plain): then the backprop runs them too.
bool loops_wrote(const Pool& p, const TensorDesc& ws) {
  if (ws.same_layout(block_desc(element::i32, p.out, 1))) return true;
  if (p.out.size() < 3 || p.out.size() > 5) return false;
  for (size_t block : {8, 16})
    if (ws.same_layout(block_desc(element::i32, p.out, block))) return true;
  return false;
}

// Backward: data and workspace as produced, delta and the gradient as the primitive picks.
void pool_backward_layout(LayoutContext& lc) {
  const Node& node = lc.node;
  // The workspace is read as its producer wrote it, or not at all (the loops do not need it).
  if (is_max_backprop_with_workspace(node)) lc.wanted[2] = lc.produced[2];
  element::Type type = node.get_output_element_type(0);
  if (type != element::f32 && type != element::bf16) return;
  Pool p = pool_of(node);
  bool avg = node.get_type_name() == "AvgPoolBackprop";
  bool ours = takes_bf16(node) || (is_max_backprop_with_workspace(node) && loops_wrote(p, lc.produced[2]));
  TensorDesc data = avg ? lc.produced[0] : loops_data(p, lc.produced[0], ours);
  if (auto block = avg ? std::nullopt : own_max_block(p, data)) {
    lc.wanted[0] = data;
    lc.wanted[1] = block_desc(lc.produced[1].type(), p.out, *block);
    lc.outputs[0] = block_desc(type, p.data, *block);
    return;
  }
  std::vector<const TensorDesc*> produced;
  for (const auto& d : lc.produced) produced.push_back(&d);
  auto pds = backward_pds(p, backward_src(node, p, produced));
  if (!pds) return;
  size_t delta = node.get_type_name() == "AvgPoolBackprop" ? 0 : 1;
  if (delta == 1) lc.wanted[0] = lc.produced[0];
  lc.wanted[delta] = f32_desc(p.out, pds->bwd.diff_dst_desc());
  lc.outputs[0] = f32_desc(p.data, pds->bwd.diff_src_desc());
}

// ------------------------------------------------------------------------------ builders

Kernel pool_forward_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  Pool p = pool_of(node);
  bool ws = is_max_with_workspace(node);
  if (auto block = own_max_block(p, ctx.input(0))) return own_max_forward_kernel(ctx, p, *block);
  if (node.get_output_element_type(0) == element::f32) {
    md src = ctx.input(0).dnnl_desc();
    if (auto pd = forward_pd(p, src, ws ? prop_kind::forward_training : prop_kind::forward_inference)) {
      std::vector<DnnlArg> args{{DNNL_ARG_SRC, src, true, 0}, {DNNL_ARG_DST, pd->dst_desc(), false, 0}};
      if (ws) args.push_back({DNNL_ARG_WORKSPACE, pd->workspace_desc(), false, 1});
      return dnnl_kernel(ctx, dnnl::pooling_forward(*pd), pd->scratchpad_desc(), args);
    }
  }
  // No workspace: its consumer, MaxPoolBackpropWithWorkspace, makes the same choice and loops.
  return by_real_type(node, [&](auto tag) { return loop_forward<decltype(tag)>(p); });
}

// The workspace input of a paired backprop was made by the forward's primitive, which is the
// hint built here from the same data layout and geometry.
void check_workspace(const KernelContext& ctx, const dnnl::pooling_forward::primitive_desc& fwd) {
  const TensorDesc& ws = ctx.input(2);
  if (ws.is_plain() || ws.md() != fwd.workspace_desc())
    throw ngraph_error("[CPU] internal: the workspace of " + ctx.node.get_name() +
                       " is not the one its forward primitive writes");
}

Kernel pool_backward_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  Pool p = pool_of(node);
  bool avg = node.get_type_name() == "AvgPoolBackprop", paired = is_max_backprop_with_workspace(node);
  size_t delta = avg ? 0 : 1;
  if (!avg)
    if (auto block = own_max_block(p, ctx.input(0))) return own_max_backward_kernel(ctx, p, *block);
  std::vector<const TensorDesc*> inputs;
  for (size_t i = 0; i < node.get_input_size(); ++i) inputs.push_back(&ctx.input(i));
  std::optional<BackwardPds> pds;
  if (node.get_output_element_type(0) == element::f32) pds = backward_pds(p, backward_src(node, p, inputs));
  if (!pds) return by_real_type(node, [&](auto tag) { return loop_backward<decltype(tag)>(p, 0, delta); });
  auto& fwd = pds->fwd;
  auto& bwd = pds->bwd;
  std::vector<DnnlArg> args{{DNNL_ARG_DIFF_DST, bwd.diff_dst_desc(), true, delta},
                            {DNNL_ARG_DIFF_SRC, bwd.diff_src_desc(), false, 0}};
  if (avg) return dnnl_kernel(ctx, dnnl::pooling_backward(bwd), bwd.scratchpad_desc(), args);
  if (paired) {
    check_workspace(ctx, fwd);
    args.push_back({DNNL_ARG_WORKSPACE, fwd.workspace_desc(), true, 2});
    return dnnl_kernel(ctx, dnnl::pooling_backward(bwd), bwd.scratchpad_desc(), args);
  }
  // Alone: the forward runs again into scratch for its workspace.
  size_t dst = ctx.scratch(fwd.dst_desc().get_size()), ws = ctx.scratch(fwd.workspace_desc().get_size());
  Kernel forward = dnnl_kernel(ctx, dnnl::pooling_forward(fwd), fwd.scratchpad_desc(),
                               {{DNNL_ARG_SRC, ctx.input(0).dnnl_desc(), true, 0},
                                {DNNL_ARG_DST, fwd.dst_desc(), false, dst},
                                {DNNL_ARG_WORKSPACE, fwd.workspace_desc(), false, ws}});
  args.push_back({DNNL_ARG_WORKSPACE, fwd.workspace_desc(), false, ws});
  Kernel backward = dnnl_kernel(ctx, dnnl::pooling_backward(bwd), bwd.scratchpad_desc(), args);
  return [forward, backward](const void* const* in, void* const* out) {
    forward(in, out);
    backward(in, out);
  };
}

NGRAPH_CPU_KERNEL("MaxPool", pool_forward_kernel, pool_forward_layout);
NGRAPH_CPU_KERNEL("AvgPool", pool_forward_kernel, pool_forward_layout);
NGRAPH_CPU_KERNEL(MaxPoolWithWorkspace::type_name, pool_forward_kernel, pool_forward_layout);
NGRAPH_CPU_KERNEL("MaxPoolBackprop", pool_backward_kernel, pool_backward_layout);
NGRAPH_CPU_KERNEL("AvgPoolBackprop", pool_backward_kernel, pool_backward_layout);
NGRAPH_CPU_KERNEL(MaxPoolBackpropWithWorkspace::type_name, pool_backward_kernel, pool_backward_layout);

// ----------------------------------------------------------------------------------- LRN

struct Lrn {
  size_t batch = 0, channels = 0, inner = 0;  // N, C, the product of the spatial axes
  double alpha = 0, beta = 0, bias = 0;
  size_t size = 1;
};

Lrn lrn_of(const Node& node) {
  auto& a = dynamic_cast<const op::LRNAttributes&>(node);
  const Shape& s = node.get_input_shape(0);
  Lrn l;
  l.batch = s[0];
  l.channels = s[1];
  l.inner = shape_size(s) / std::max<size_t>(s[0] * s[1], 1);
  l.alpha = a.get_alpha();
  l.beta = a.get_beta();
  l.bias = a.get_bias();
  l.size = a.get_nsize();
  return l;
}

// [first, last) of the channels that count for channel c.
std::pair<size_t, size_t> lrn_window(const Lrn& l, size_t c) {
  size_t half = (l.size - 1) / 2;
  return {c > half ? c - half : 0, std::min(l.channels, c + half + 1)};
}

// f(offset) for each (n, spatial position): its channels are at offset + c * inner.
template <typename F>
void for_each_column(const Lrn& l, F&& f) {
  for (size_t n = 0; n < l.batch; ++n)
    for (size_t i = 0; i < l.inner; ++i) f(n * l.channels * l.inner + i);
}

// s[c] = bias + alpha / size * (sum of the squares in c's window), for one column.
template <typename T>
void lrn_scale(const Lrn& l, const T* x, size_t offset, double* s) {
  for (size_t c = 0; c < l.channels; ++c) {
    auto [first, last] = lrn_window(l, c);
    double sum = 0;
    for (size_t j = first; j < last; ++j) {
      double v = x[offset + j * l.inner];
      sum += v * v;
    }
    s[c] = l.bias + l.alpha / static_cast<double>(l.size) * sum;
  }
}

template <typename T>
Kernel loop_lrn(KernelContext& ctx, const Lrn& l) {
  size_t scratch = ctx.scratch(std::max<size_t>(l.channels, 1) * sizeof(double));
  return [l, scratch](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    auto* s = static_cast<double*>(out[scratch]);
    for_each_column(l, [&](size_t offset) {
      lrn_scale(l, x, offset, s);
      for (size_t c = 0; c < l.channels; ++c) {
        size_t k = offset + c * l.inner;
        y[k] = static_cast<T>(x[k] * std::pow(s[c], -l.beta));
      }
    });
  };
}

// dx_j = delta_j s_j^-beta - 2 alpha beta / size * x_j * sum over the windows i containing j
// of delta_i x_i s_i^(-beta - 1) (the windows are symmetric: i's contains j iff j's contains i).
template <typename T>
Kernel loop_lrn_backprop(KernelContext& ctx, const Lrn& l) {
  size_t scratch = ctx.scratch(2 * std::max<size_t>(l.channels, 1) * sizeof(double));
  return [l, scratch](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    const T* delta = static_cast<const T*>(in[1]);
    T* dx = static_cast<T*>(out[0]);
    auto* s = static_cast<double*>(out[scratch]);
    double* t = s + l.channels;
    double k = 2 * l.alpha * l.beta / static_cast<double>(l.size);
    for_each_column(l, [&](size_t offset) {
      lrn_scale(l, x, offset, s);
      for (size_t c = 0; c < l.channels; ++c) {
        size_t i = offset + c * l.inner;
        t[c] = double(delta[i]) * double(x[i]) * std::pow(s[c], -l.beta - 1);
      }
      for (size_t c = 0; c < l.channels; ++c) {
        auto [first, last] = lrn_window(l, c);
        double sum = 0;
        for (size_t j = first; j < last; ++j) sum += t[j];
        size_t i = offset + c * l.inner;
        dx[i] = static_cast<T>(double(delta[i]) * std::pow(s[c], -l.beta) - k * double(x[i]) * sum);
      }
    });
  };
}

std::optional<dnnl::lrn_forward::primitive_desc> lrn_forward_pd(const Lrn& l, const Shape& shape,
                                                                const md& src, prop_kind prop) {
  if (!dnnl_rank_ok(shape)) return std::nullopt;
  try {
    dnnl::lrn_forward::desc d(prop, algorithm::lrn_across_channels, src,
                              static_cast<dnnl::memory::dim>(l.size), static_cast<float>(l.alpha),
                              static_cast<float>(l.beta), static_cast<float>(l.bias));
    return dnnl::lrn_forward::primitive_desc(d, dnnl_attr(), dnnl_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

struct LrnBackwardPds {
  dnnl::lrn_forward::primitive_desc fwd;
  dnnl::lrn_backward::primitive_desc bwd;
};

// The gradient in the data's layout (delta is reordered to it).
std::optional<LrnBackwardPds> lrn_backward_pds(const Lrn& l, const Shape& shape, const md& src) {
  auto fwd = lrn_forward_pd(l, shape, src, prop_kind::forward_training);
  if (!fwd) return std::nullopt;
  try {
    dnnl::lrn_backward::desc d(algorithm::lrn_across_channels, src, src,
                               static_cast<dnnl::memory::dim>(l.size), static_cast<float>(l.alpha),
                               static_cast<float>(l.beta), static_cast<float>(l.bias));
    return LrnBackwardPds{*fwd, dnnl::lrn_backward::primitive_desc(d, dnnl_attr(), dnnl_engine(), *fwd)};
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

void lrn_layout(LayoutContext& lc) {
  const Node& node = lc.node;
  if (node.get_output_element_type(0) != element::f32) return;
  Lrn l = lrn_of(node);
  const Shape& shape = node.get_input_shape(0);
  md src = lc.produced[0].dnnl_desc();
  bool backprop = node.get_type_name() == "LRNBackprop";
  md out;
  if (backprop) {
    auto pds = lrn_backward_pds(l, shape, src);
    if (!pds) return;
    lc.wanted[1] = f32_desc(shape, pds->bwd.diff_dst_desc());
    out = pds->bwd.diff_src_desc();
  } else {
    auto pd = lrn_forward_pd(l, shape, src, prop_kind::forward_inference);
    if (!pd) return;
    out = pd->dst_desc();
  }
  lc.wanted[0] = lc.produced[0];
  lc.outputs[0] = f32_desc(shape, out);
}

Kernel lrn_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  Lrn l = lrn_of(node);
  md src = ctx.input(0).dnnl_desc();
  if (node.get_output_element_type(0) == element::f32)
    if (auto pd = lrn_forward_pd(l, node.get_shape(), src, prop_kind::forward_inference))
      return dnnl_kernel(ctx, dnnl::lrn_forward(*pd), pd->scratchpad_desc(),
                         {{DNNL_ARG_SRC, src, true, 0}, {DNNL_ARG_DST, pd->dst_desc(), false, 0}});
  return by_real_type(node, [&](auto tag) { return loop_lrn<decltype(tag)>(ctx, l); });
}

Kernel lrn_backprop_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  Lrn l = lrn_of(node);
  md src = ctx.input(0).dnnl_desc();
  std::optional<LrnBackwardPds> pds;
  if (node.get_output_element_type(0) == element::f32) pds = lrn_backward_pds(l, node.get_shape(), src);
  if (!pds) return by_real_type(node, [&](auto tag) { return loop_lrn_backprop<decltype(tag)>(ctx, l); });
  auto& fwd = pds->fwd;
  auto& bwd = pds->bwd;
  std::vector<DnnlArg> args{{DNNL_ARG_SRC, src, true, 0},
                            {DNNL_ARG_DIFF_DST, bwd.diff_dst_desc(), true, 1},
                            {DNNL_ARG_DIFF_SRC, bwd.diff_src_desc(), false, 0}};
  if (!fwd.workspace_desc().get_size())
    return dnnl_kernel(ctx, dnnl::lrn_backward(bwd), bwd.scratchpad_desc(), args);
  // An implementation with a workspace: the forward runs first, into scratch.
  size_t dst = ctx.scratch(fwd.dst_desc().get_size()), ws = ctx.scratch(fwd.workspace_desc().get_size());
  Kernel forward = dnnl_kernel(ctx, dnnl::lrn_forward(fwd), fwd.scratchpad_desc(),
                               {{DNNL_ARG_SRC, src, true, 0},
                                {DNNL_ARG_DST, fwd.dst_desc(), false, dst},
                                {DNNL_ARG_WORKSPACE, fwd.workspace_desc(), false, ws}});
  args.push_back({DNNL_ARG_WORKSPACE, fwd.workspace_desc(), false, ws});
  Kernel backward = dnnl_kernel(ctx, dnnl::lrn_backward(bwd), bwd.scratchpad_desc(), args);
  return [forward, backward](const void* const* in, void* const* out) {
    forward(in, out);
    backward(in, out);
  };
}

NGRAPH_CPU_KERNEL("LRN", lrn_kernel, lrn_layout);
NGRAPH_CPU_KERNEL("LRNBackprop", lrn_backprop_kernel, lrn_layout);

}  // namespace

bool max_pool_bf16_supported(const Node& node) {
  Pool p = pool_of(node);
  return p.data.size() >= 3 && p.data.size() <= 5 && shape_size(p.out) > 0 && own_max_pool_enabled();
}

bool max_pool_workspace_supported(const Node& max_pool) {
  if (max_pool.get_element_type() != element::f32) return false;
  Pool p = pool_of(max_pool);
  // Our loops write a workspace for any geometry on plain data (and on channel blocks, which
  // they take whenever they take the plain data).
  if (own_max_block(p, TensorDesc::plain(element::f32, p.data))) return true;
  return backward_pds(p, plain_desc(p.data)).has_value();
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
