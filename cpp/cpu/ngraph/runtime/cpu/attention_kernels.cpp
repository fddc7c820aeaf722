// Attention's softmax, forward and backward, row by row (AttentionSoftmax and
// AttentionSoftmaxBackprop): one pass for the maximum, one for the exponentials and their sum,
// one to normalise, with the scale and the mask applied as the rows are read, so the scaled and
// masked scores never go to memory. The loops vectorise: f32's exponential is scalar_ops.hpp's
// exp_f32 (a polynomial GCC vectorises), and the loops are compiled twice in portable builds
// (the build's instruction set, and AVX2 + FMA, chosen at run time as the fused elementwise
// loops are). Rows are shared out among the backend's threads (parallel_for). The plain
// Softmax over its innermost axes runs the same row loop (softmax_rows_kernel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/attention_softmax.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/row_softmax.hpp"
#include "ngraph/runtime/cpu/scalar_ops.hpp"

// The vector helpers are inlined into their callers (NGRAPH_CPU_ROW); no 32-byte vector crosses
// a call boundary, so GCC's note that such calls change ABI without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

#define NGRAPH_CPU_ROW __attribute__((always_inline)) inline

NGRAPH_CPU_ROW float exp_of(float x) { return scalar::exp_f32(x); }
NGRAPH_CPU_ROW double exp_of(double x) { return std::exp(x); }

// The row loops run on GCC's vector extensions, 32 bytes at a time (8 floats or 4 doubles;
// two SSE registers in the baseline build, one AVX register in its AVX2 twin): the maximum and
// the sums are reductions, which GCC does not vectorise from plain loops without -ffast-math.
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  static constexpr size_t N = 8;
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t M __attribute__((vector_size(32)));
  typedef int8_t B __attribute__((vector_size(8)));
};
template <>
struct Vec<double> {
  static constexpr size_t N = 4;
  typedef double V __attribute__((vector_size(32)));
  typedef int64_t M __attribute__((vector_size(32)));
  typedef int8_t B __attribute__((vector_size(4)));
};

template <typename T>
NGRAPH_CPU_ROW typename Vec<T>::V vload(const T* p) {
  typename Vec<T>::V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
NGRAPH_CPU_ROW void vstore(T* p, typename Vec<T>::V v) {
  std::memcpy(p, &v, sizeof v);
}
// Lanes of a boolean mask: all ones where the byte is nonzero.
template <typename T>
NGRAPH_CPU_ROW typename Vec<T>::M vmask(const element::boolean_t* p) {
  typename Vec<T>::B b;
  std::memcpy(&b, p, sizeof b);
  return __builtin_convertvector(b, typename Vec<T>::M) != 0;
}
template <typename T>
NGRAPH_CPU_ROW typename Vec<T>::V vsplat(T x) {
  return typename Vec<T>::V{} + x;
}

template <typename T>
NGRAPH_CPU_ROW T hmax(typename Vec<T>::V v) {
  T m = v[0];
  for (size_t k = 1; k < Vec<T>::N; ++k) m = v[k] > m ? v[k] : m;
  return m;
}
template <typename T>
NGRAPH_CPU_ROW T hsum(typename Vec<T>::V v) {
  T s = 0;
  for (size_t k = 0; k < Vec<T>::N; ++k) s += v[k];
  return s;
}

// One row of the forward: y = softmax(select(allowed, x * scale, -inf)) (Masked: allowed holds
// the row's n mask bytes; otherwise every element is allowed).
template <typename T, bool Masked>
NGRAPH_CPU_ROW void forward_row(const T* __restrict__ x, T* __restrict__ y,
                                const element::boolean_t* __restrict__ allowed, size_t n,
                                T scale) {
  using V = typename Vec<T>::V;
  using M = typename Vec<T>::M;
  constexpr size_t N = Vec<T>::N;
  const T ninf = -std::numeric_limits<T>::infinity();
  const size_t full = n / N * N;
  V mx = vsplat(ninf);
  M nan = M{};
  for (size_t j = 0; j < full; j += N) {
    V v = vload(x + j) * scale;
    if constexpr (Masked) {
      M a = vmask<T>(allowed + j);
      V w = a ? v : vsplat(ninf);
      mx = w > mx ? w : mx;
      nan |= (v != v) & a;
    } else {
      mx = v > mx ? v : mx;
      nan |= v != v;
    }
  }
  T m = hmax<T>(mx);
  bool any_nan = false;
  for (size_t k = 0; k < N; ++k) any_nan = any_nan || nan[k] != 0;
  for (size_t j = full; j < n; ++j) {
    T v = x[j] * scale;
    bool a = Masked ? allowed[j] != 0 : true;
    if (a && v > m) m = v;
    if (a && v != v) any_nan = true;
  }
  if (any_nan || m == ninf) {  // a NaN, or nothing but -inf: the composition's NaN row
    for (size_t j = 0; j < n; ++j) y[j] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  // The exponentials: a plain loop over exp_of (scalar_ops.hpp's exp_f32), which GCC
  // vectorises (no reduction in it); then their sum in vector lanes.
  for (size_t j = 0; j < n; ++j) {
    T e = exp_of(x[j] * scale - m);
    if constexpr (Masked) e = allowed[j] != 0 ? e : T(0);
    y[j] = e;
  }
  V acc = V{};
  for (size_t j = 0; j < full; j += N) acc += vload(y + j);
  T sum = hsum<T>(acc);
  for (size_t j = full; j < n; ++j) sum += y[j];
  T inv = T(1) / sum;
  for (size_t j = 0; j < n; ++j) y[j] *= inv;
}

// One row of the backward: scale * select(allowed, y * (d - sum(d * y)), 0).
template <typename T, bool Masked>
NGRAPH_CPU_ROW void backward_row(const T* __restrict__ d, const T* __restrict__ y,
                                 T* __restrict__ out, const element::boolean_t* __restrict__ allowed,
                                 size_t n, T scale) {
  using V = typename Vec<T>::V;
  constexpr size_t N = Vec<T>::N;
  const size_t full = n / N * N;
  V acc = V{};
  for (size_t j = 0; j < full; j += N) acc += vload(d + j) * vload(y + j);
  T dot = hsum<T>(acc);
  for (size_t j = full; j < n; ++j) dot += d[j] * y[j];
  for (size_t j = 0; j < n; ++j) {
    T g = y[j] * (d[j] - dot);
    if (Masked) g = allowed[j] != 0 ? g : T(0);
    out[j] = g * scale;
  }
}

// A row that is masked as a whole (a mask with one value per row): all allowed, or all 0 (the
// forward's NaN row; the backward's zeros).
template <typename T>
NGRAPH_CPU_ROW void masked_row(T* y, size_t n, T value) {
  for (size_t j = 0; j < n; ++j) y[j] = value;
}

// Where each row's mask is: an offset into the mask, and whether it is a whole row (the mask's
// last axis has n elements) or one value for the row (last axis of 1 or a scalar mask).
struct MaskRows {
  std::vector<size_t> offset;
  bool per_element = false;
};

MaskRows mask_rows(const Shape& mask, const Shape& shape) {
  MaskRows m;
  size_t n = shape.back(), rows = shape_size(shape) / std::max<size_t>(n, 1);
  m.per_element = !mask.empty() && mask.back() == n && n != 1;
  Shape leading(shape.begin(), shape.end() - 1);
  // The mask's strides seen from the scores' leading axes (0 where it broadcasts).
  std::vector<std::ptrdiff_t> strides = broadcast_strides(mask, shape);
  m.offset.resize(rows);
  std::vector<size_t> idx(leading.size(), 0);
  for (size_t r = 0; r < rows; ++r) {
    std::ptrdiff_t off = 0;
    for (size_t d = 0; d < leading.size(); ++d) off += static_cast<std::ptrdiff_t>(idx[d]) * strides[d];
    m.offset[r] = static_cast<size_t>(off);
    for (size_t d = leading.size(); d-- > 0;) {
      if (++idx[d] < leading[d]) break;
      idx[d] = 0;
    }
  }
  return m;
}

struct RowProblem {
  size_t rows = 0, n = 0;
  double scale = 1;
  bool masked = false;
  MaskRows mask;
};

#define NGRAPH_CPU_DEFINE_ROWS(Name, Attributes)                                                  \
  template <typename T>                                                                           \
  Attributes void Name##_forward(const RowProblem& p, size_t begin, size_t end, const T* x, T* y, \
                                 const element::boolean_t* mask) {                                \
    for (size_t r = begin; r < end; ++r) {                                                        \
      const element::boolean_t* row = p.masked ? mask + p.mask.offset[r] : nullptr;               \
      auto s = static_cast<T>(p.scale);                                                           \
      if (p.masked && p.mask.per_element)                                                         \
        forward_row<T, true>(x + r * p.n, y + r * p.n, row, p.n, s);                              \
      else if (!p.masked || *row != 0)                                                            \
        forward_row<T, false>(x + r * p.n, y + r * p.n, nullptr, p.n, s);                         \
      else                                                                                        \
        masked_row<T>(y + r * p.n, p.n, std::numeric_limits<T>::quiet_NaN());                     \
    }                                                                                             \
  }                                                                                               \
  template <typename T>                                                                           \
  Attributes void Name##_backward(const RowProblem& p, size_t begin, size_t end, const T* d,      \
                                  const T* y, T* out, const element::boolean_t* mask) {           \
    for (size_t r = begin; r < end; ++r) {                                                        \
      const element::boolean_t* row = p.masked ? mask + p.mask.offset[r] : nullptr;               \
      auto s = static_cast<T>(p.scale);                                                           \
      if (p.masked && p.mask.per_element)                                                         \
        backward_row<T, true>(d + r * p.n, y + r * p.n, out + r * p.n, row, p.n, s);              \
      else if (!p.masked || *row != 0)                                                            \
        backward_row<T, false>(d + r * p.n, y + r * p.n, out + r * p.n, nullptr, p.n, s);         \
      else                                                                                        \
        masked_row<T>(out + r * p.n, p.n, T(0));                                                  \
    }                                                                                             \
  }
NGRAPH_CPU_DEFINE_ROWS(rows, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define NGRAPH_CPU_HAVE_AVX2_ROWS 1
NGRAPH_CPU_DEFINE_ROWS(rows_avx2, __attribute__((target("avx2,fma"))))
#endif
#undef NGRAPH_CPU_DEFINE_ROWS

RowProblem row_problem(const Node& node, size_t data, double scale, bool masked, size_t mask) {
  RowProblem p;
  const Shape& shape = node.get_input_shape(data);
  p.n = shape.back();
  p.rows = p.n ? shape_size(shape) / p.n : 0;
  p.scale = scale;
  p.masked = masked;
  if (masked) p.mask = mask_rows(node.get_input_shape(mask), shape);
  return p;
}

// Rows per thread: at least about 16K elements each, so that small problems stay on one.
size_t row_grain(const RowProblem& p) {
  return std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(p.n, 1));
}

template <typename T>
Kernel forward_kernel(RowProblem p) {
  auto run = &rows_forward<T>;
#ifdef NGRAPH_CPU_HAVE_AVX2_ROWS
  if (use_avx2_twins()) run = &rows_avx2_forward<T>;
#endif
  size_t grain = row_grain(p);
  return [p, run, grain](const void* const* in, void* const* out) {
    auto x = static_cast<const T*>(in[0]);
    auto y = static_cast<T*>(out[0]);
    auto mask = p.masked ? static_cast<const element::boolean_t*>(in[1]) : nullptr;
    parallel_for(p.rows, grain, [&](size_t begin, size_t end) { run(p, begin, end, x, y, mask); });
  };
}

template <typename T>
Kernel backward_kernel(RowProblem p) {
  auto run = &rows_backward<T>;
#ifdef NGRAPH_CPU_HAVE_AVX2_ROWS
  if (use_avx2_twins()) run = &rows_avx2_backward<T>;
#endif
  size_t grain = row_grain(p);
  return [p, run, grain](const void* const* in, void* const* out) {
    auto d = static_cast<const T*>(in[0]);
    auto y = static_cast<const T*>(in[1]);
    auto g = static_cast<T*>(out[0]);
    auto mask = p.masked ? static_cast<const element::boolean_t*>(in[2]) : nullptr;
    parallel_for(p.rows, grain,
                 [&](size_t begin, size_t end) { run(p, begin, end, d, y, g, mask); });
  };
}

NGRAPH_CPU_KERNEL(AttentionSoftmax::type_name, [](KernelContext& ctx) -> Kernel {
  auto& a = static_cast<const AttentionSoftmax&>(ctx.node);
  RowProblem p = row_problem(a, 0, a.get_scale(), a.has_mask(), 1);
  if (p.rows == 0) return [](const void* const*, void* const*) {};
  if (a.get_element_type() == element::f32) return forward_kernel<float>(p);
  return forward_kernel<double>(p);
});

NGRAPH_CPU_KERNEL(AttentionSoftmaxBackprop::type_name, [](KernelContext& ctx) -> Kernel {
  auto& b = static_cast<const AttentionSoftmaxBackprop&>(ctx.node);
  RowProblem p = row_problem(b, 0, b.get_scale(), b.has_mask(), 2);
  if (p.rows == 0) return [](const void* const*, void* const*) {};
  if (b.get_element_type() == element::f32) return backward_kernel<float>(p);
  return backward_kernel<double>(p);
});

}  // namespace

Kernel softmax_rows_kernel(element::Type type, size_t rows, size_t n) {
  if (type != element::f32 && type != element::f64)
    throw ngraph_error(
        concat_message("[Softmax] internal: the row kernel takes f32 or f64, got ", type));
  RowProblem p;
  p.rows = n ? rows : 0;
  p.n = n;
  if (p.rows == 0) return [](const void* const*, void* const*) {};
  if (type == element::f32) return forward_kernel<float>(p);
  return forward_kernel<double>(p);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
