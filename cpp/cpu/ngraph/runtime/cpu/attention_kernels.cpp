// Attention's softmax, forward and backward, row by row (AttentionSoftmax and
// AttentionSoftmaxBackprop): one pass for the maximum, one for the exponentials and their sum,
// one to normalise, with the scale and the mask applied as the rows are read, so the scaled and
// masked scores never go to memory. The loops vectorise: f32's exponential is scalar_ops.hpp's
// exp_f32 (a polynomial GCC vectorises), and the loops are compiled twice in portable builds
// (the build's instruction set, and AVX2 + FMA, chosen at run time as the fused elementwise
// loops are); f32 rows have a third version in AVX-512 intrinsics (16 lanes, masked tails),
// chosen where the CPU has AVX-512. A row with a per-key mask only works on the span of its
// allowed keys (a causal row: the keys up to its query), writing 0 around it. Rows are shared
// out among the backend's threads (parallel_for). The plain Softmax over its innermost axes
// runs the same row loop (softmax_rows_kernel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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
// the row's n mask bytes; otherwise every element is allowed). False for the NaN row (a NaN, or
// nothing but -inf).
template <typename T, bool Masked>
NGRAPH_CPU_ROW bool forward_row(const T* __restrict__ x, T* __restrict__ y,
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
    return false;
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
  return true;
}

// One row of the backward: scale * select(allowed, y * (d - sum(d * y)), 0). The sum runs over
// the whole row (a masked position's y is 0, but a non-finite d there still reaches it); the
// output only over [lo, hi), the span that holds the row's allowed keys (0 outside it).
template <typename T, bool Masked>
NGRAPH_CPU_ROW void backward_row(const T* __restrict__ d, const T* __restrict__ y,
                                 T* __restrict__ out, const element::boolean_t* __restrict__ allowed,
                                 size_t n, T scale, size_t lo, size_t hi) {
  using V = typename Vec<T>::V;
  constexpr size_t N = Vec<T>::N;
  const size_t full = n / N * N;
  V acc = V{};
  for (size_t j = 0; j < full; j += N) acc += vload(d + j) * vload(y + j);
  T dot = hsum<T>(acc);
  for (size_t j = full; j < n; ++j) dot += d[j] * y[j];
  for (size_t j = 0; j < lo; ++j) out[j] = T(0);
  for (size_t j = lo; j < hi; ++j) {
    T g = y[j] * (d[j] - dot);
    if (Masked) g = allowed[j] != 0 ? g : T(0);
    out[j] = g * scale;
  }
  for (size_t j = hi; j < n; ++j) out[j] = T(0);
}

// The span [first, end) of a mask row's nonzero bytes, eight bytes at a time: a causal mask
// allows the keys up to the query's position, so the rest of the row (half the scores) is
// neither exponentiated nor normalised; it is 0. Empty (first == end) where nothing is allowed.
NGRAPH_CPU_ROW size_t first_allowed(const element::boolean_t* a, size_t n) {
  size_t j = 0;
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; j + 8 <= n; j += 8) {
    uint64_t w;
    std::memcpy(&w, a + j, sizeof w);
    if (w) return j + static_cast<size_t>(__builtin_ctzll(w)) / 8;
  }
#endif
  while (j < n && a[j] == 0) ++j;
  return j;
}
NGRAPH_CPU_ROW size_t end_allowed(const element::boolean_t* a, size_t n) {
  size_t j = n;
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; j >= 8; j -= 8) {
    uint64_t w;
    std::memcpy(&w, a + j - 8, sizeof w);
    if (w) return j - 8 + static_cast<size_t>(63 - __builtin_clzll(w)) / 8 + 1;
  }
#endif
  while (j > 0 && a[j - 1] == 0) --j;
  return j;
}

// A masked row of the forward: the softmax over its allowed span, 0 around it (NaN where
// nothing is allowed, as forward_row gives).
template <typename T>
NGRAPH_CPU_ROW void forward_masked_row(const T* __restrict__ x, T* __restrict__ y,
                                       const element::boolean_t* __restrict__ allowed, size_t n,
                                       T scale) {
  size_t lo = first_allowed(allowed, n);
  size_t hi = lo == n ? n : end_allowed(allowed, n);
  if (lo == hi) {
    for (size_t j = 0; j < n; ++j) y[j] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  if (!forward_row<T, true>(x + lo, y + lo, allowed + lo, hi - lo, scale)) {
    // A NaN score in the span: the whole row is NaN.
    for (size_t j = 0; j < n; ++j) y[j] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  for (size_t j = 0; j < lo; ++j) y[j] = T(0);
  for (size_t j = hi; j < n; ++j) y[j] = T(0);
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX512F__)
// The f32 rows in AVX-512, 16 lanes, a row's tail in masked loads and stores (GCC's
// vectorised loops left up to 15 elements a row to scalar code, as much work as the vector part
// on a causal row's average 64 keys). The exponential is exp_f32's, lane for lane.
#define NGRAPH_CPU_HAVE_AVX512_F32_ROWS 1
// GCC 12's avx512fintrin.h initialises its undefined vectors from themselves (_mm512_undefined_*),
// which -Wmaybe-uninitialized flags once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define NGRAPH_CPU_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))
#define NGRAPH_CPU_AVX512_ROW NGRAPH_CPU_AVX512 __attribute__((always_inline)) inline

// scalar::exp_f32 on 16 lanes.
NGRAPH_CPU_AVX512_ROW __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f), hi = _mm512_set1_ps(88.72283f);
  __mmask16 in_range = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  __m512 c = _mm512_mask_blend_ps(in_range, _mm512_set1_ps(-80.0f), x);
  c = _mm512_min_ps(c, hi);
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  __m512 n = _mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f), shifter);
  n = _mm512_sub_ps(n, shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), c);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  __m512i k = _mm512_cvttps_epi32(n);
  __m512i half = _mm512_srai_epi32(k, 1);
  const __m512i bias = _mm512_set1_epi32(127);
  __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half, bias), 23));
  __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(k, half), bias), 23));
  __m512 v = _mm512_maskz_mov_ps(in_range, _mm512_mul_ps(_mm512_mul_ps(e, s1), s2));
  v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), v, _mm512_set1_ps(INFINITY));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), v, x);
}

// The lanes of elements [j, min(j + 16, n)).
NGRAPH_CPU_AVX512_ROW __mmask16 lanes(size_t j, size_t n) {
  return n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
}
// Of those, the ones whose mask byte is nonzero (all of them without a mask).
NGRAPH_CPU_AVX512_ROW __mmask16 allowed16(const element::boolean_t* a, size_t j, __mmask16 k) {
  if (!a) return k;
  __m128i b = _mm_maskz_loadu_epi8(k, a + j);
  return _mm_test_epi8_mask(b, b);
}

// forward_row<float, Masked> (allowed null: unmasked).
NGRAPH_CPU_AVX512_ROW bool forward_row_avx512(const float* __restrict__ x, float* __restrict__ y,
                                              const element::boolean_t* __restrict__ allowed,
                                              size_t n, float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (size_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(j, n), a = allowed16(allowed, j, k);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), vs);
    mx = _mm512_mask_max_ps(mx, a, mx, v);
    nan |= _mm512_mask_cmp_ps_mask(a, v, v, _CMP_UNORD_Q);
  }
  float m = _mm512_reduce_max_ps(mx);
  if (nan || m == -INFINITY) {
    for (size_t j = 0; j < n; ++j) y[j] = std::numeric_limits<float>::quiet_NaN();
    return false;
  }
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  for (size_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(j, n), a = allowed16(allowed, j, k);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), vs);
    __m512 e = _mm512_maskz_mov_ps(a, exp16(_mm512_sub_ps(v, vm)));
    _mm512_mask_storeu_ps(y + j, k, e);
    acc = _mm512_add_ps(acc, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(acc));
  for (size_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(j, n);
    _mm512_mask_storeu_ps(y + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + j), inv));
  }
  return true;
}

NGRAPH_CPU_AVX512_ROW void fill_avx512(float* y, size_t n, float value) {
  for (size_t j = 0; j < n; j += 16) _mm512_mask_storeu_ps(y + j, lanes(j, n), _mm512_set1_ps(value));
}

// backward_row<float, Masked> over [lo, hi).
NGRAPH_CPU_AVX512_ROW void backward_row_avx512(const float* __restrict__ d, const float* __restrict__ y,
                                               float* __restrict__ out,
                                               const element::boolean_t* __restrict__ allowed,
                                               size_t n, float scale, size_t lo, size_t hi) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t j = 0; j < n; j += 16) {
    __mmask16 k = lanes(j, n);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, d + j), _mm512_maskz_loadu_ps(k, y + j), acc);
  }
  const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(acc)), vs = _mm512_set1_ps(scale);
  fill_avx512(out, lo, 0.0f);
  for (size_t j = lo; j < hi; j += 16) {
    __mmask16 k = lanes(j, hi), a = allowed16(allowed, j, k);
    __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + j), _mm512_sub_ps(_mm512_maskz_loadu_ps(k, d + j), dot));
    _mm512_mask_storeu_ps(out + j, k, _mm512_maskz_mov_ps(a, _mm512_mul_ps(g, vs)));
  }
  fill_avx512(out + hi, n - hi, 0.0f);
}
NGRAPH_CPU_AVX512 void rows_avx512_f32_forward(const RowProblem& p, size_t begin, size_t end,
                                                const float* x, float* y,
                                                const element::boolean_t* mask) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), s = static_cast<float>(p.scale);
  const size_t n = p.n;
  for (size_t r = begin; r < end; ++r) {
    const element::boolean_t* row = p.masked ? mask + p.mask.offset[r] : nullptr;
    const float* xr = x + r * n;
    float* yr = y + r * n;
    if (p.masked && p.mask.per_element) {
      size_t lo = first_allowed(row, n), hi = lo == n ? lo : end_allowed(row, n);
      if (lo == hi || !forward_row_avx512(xr + lo, yr + lo, row + lo, hi - lo, s)) {
        fill_avx512(yr, n, nan);  // nothing allowed, or a NaN score
      } else {
        fill_avx512(yr, lo, 0.0f);
        fill_avx512(yr + hi, n - hi, 0.0f);
      }
    } else if (!p.masked || *row != 0) {
      forward_row_avx512(xr, yr, nullptr, n, s);
    } else {
      fill_avx512(yr, n, nan);
    }
  }
}

NGRAPH_CPU_AVX512 void rows_avx512_f32_backward(const RowProblem& p, size_t begin, size_t end,
                                                 const float* d, const float* y, float* out,
                                                 const element::boolean_t* mask) {
  const float s = static_cast<float>(p.scale);
  const size_t n = p.n;
  for (size_t r = begin; r < end; ++r) {
    const element::boolean_t* row = p.masked ? mask + p.mask.offset[r] : nullptr;
    size_t o = r * n;
    if (p.masked && p.mask.per_element) {
      size_t lo = first_allowed(row, n), hi = lo == n ? lo : end_allowed(row, n);
      backward_row_avx512(d + o, y + o, out + o, row, n, s, lo, hi);
    } else if (!p.masked || *row != 0) {
      backward_row_avx512(d + o, y + o, out + o, nullptr, n, s, 0, n);
    } else {
      fill_avx512(out + o, n, 0.0f);
    }
  }
}
#pragma GCC diagnostic pop
#undef NGRAPH_CPU_AVX512_ROW
#undef NGRAPH_CPU_AVX512
#endif

#define NGRAPH_CPU_DEFINE_ROWS(Name, Attributes)                                                    \
  template <typename T>                                                                             \
  Attributes void Name##_forward(const RowProblem& p, size_t begin, size_t end, const T* x, T* y,   \
                                 const element::boolean_t* mask) {                                  \
    for (size_t r = begin; r < end; ++r) {                                                          \
      const element::boolean_t* row = p.masked ? mask + p.mask.offset[r] : nullptr;                 \
      auto s = static_cast<T>(p.scale);                                                             \
      if (p.masked && p.mask.per_element)                                                           \
        forward_masked_row<T>(x + r * p.n, y + r * p.n, row, p.n, s);                               \
      else if (!p.masked || *row != 0)                                                              \
        forward_row<T, false>(x + r * p.n, y + r * p.n, nullptr, p.n, s);                           \
      else                                                                                          \
        masked_row<T>(y + r * p.n, p.n, std::numeric_limits<T>::quiet_NaN());                       \
    }                                                                                               \
  }                                                                                                 \
  template <typename T>                                                                             \
  Attributes void Name##_backward(const RowProblem& p, size_t begin, size_t end, const T* d,        \
                                  const T* y, T* out, const element::boolean_t* mask) {             \
    for (size_t r = begin; r < end; ++r) {                                                          \
      const element::boolean_t* row = p.masked ? mask + p.mask.offset[r] : nullptr;                 \
      auto s = static_cast<T>(p.scale);                                                             \
      size_t o = r * p.n;                                                                           \
      if (p.masked && p.mask.per_element) {                                                         \
        size_t lo = first_allowed(row, p.n), hi = lo == p.n ? lo : end_allowed(row, p.n);           \
        backward_row<T, true>(d + o, y + o, out + o, row, p.n, s, lo, hi);                          \
      } else if (!p.masked || *row != 0) {                                                          \
        backward_row<T, false>(d + o, y + o, out + o, nullptr, p.n, s, 0, p.n);                     \
      } else {                                                                                      \
        masked_row<T>(out + o, p.n, T(0));                                                          \
      }                                                                                             \
    }                                                                                               \
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
#ifdef NGRAPH_CPU_HAVE_AVX512_F32_ROWS
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512_twins()) run = &rows_avx512_f32_forward;
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
#ifdef NGRAPH_CPU_HAVE_AVX512_F32_ROWS
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512_twins()) run = &rows_avx512_f32_backward;
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
