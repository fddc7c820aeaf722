// The scalar math of every elementwise op, written once: the loop kernels, the oneDNN choice
// and the fused elementwise kernel (FusedElementwise) all read it from here, and the lists at
// the end generate the kernel registrations and the fusion table. Adding an elementwise op to
// the CPU backend is one functor and one list entry.
//
// A functor's traits:
//   real_only        - defined for f32/f64 only (else every numeric type)
//   fusible          - FusedElementwise may evaluate it (f32/f64)
//   zero_preserving  - f(0) == 0 (f(0, 0) == 0): it may run over the padding of a blocked
//                      layout, which must stay zero
//   dnnl / alpha     - the oneDNN eltwise (unary) or binary algorithm for large f32 tensors,
//                      or dnnl::algorithm::undef for none
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <dnnl.hpp>
#include <limits>
#include <type_traits>

namespace ngraph {
namespace runtime {
namespace cpu {
namespace scalar {

using dnnl::algorithm;

template <bool Real, bool Fusible, bool ZeroPreserving, algorithm Alg = algorithm::undef>
struct Traits {
  static constexpr bool real_only = Real;
  static constexpr bool fusible = Fusible;
  static constexpr bool zero_preserving = ZeroPreserving;
  static constexpr algorithm dnnl = Alg;
  static constexpr float alpha = 0.f;
};

// f32 exp and erf in plain arithmetic and selects, which GCC vectorises inside the elementwise
// and fused loops (std::exp and std::erf stay scalar calls there: GELU's gradient, an erf and
// an exp per element, ran at 7 ns per element). f64 keeps the C library's.
//
// exp: Cephes' expf (range reduction by ln 2 in two parts, a degree-6 polynomial), within 2 ulp
// of std::exp; results below 2^-126 (x < -87.34) are 0 instead of subnormal, above 88.72 +inf.
inline float exp_f32(float x) {
  const float lo = -87.33654f, hi = 88.72283f;
  // Below lo the result is 0 (selected at the end); the polynomial then runs on -80 instead,
  // whose power of two is normal: at lo itself it could round to a subnormal product, which
  // costs a microcode assist per element on x86 (GELU's gradient ran 3x slower). NaN goes the
  // same way and is returned at the end.
  float c = x >= lo ? x : -80.0f;
  c = c < hi ? c : hi;
  float n = c * 1.44269504088896341f + 12582912.0f;  // round(c / ln 2) via 1.5 * 2^23
  n -= 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * r * r + r + 1.0f;
  // 2^n in two normal halves: n reaches 128 near the top of the range (2^128 is not a float).
  auto k = static_cast<int32_t>(n);
  int32_t half = k >> 1;
  int32_t bits1 = (half + 127) << 23, bits2 = (k - half + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &bits1, sizeof s1);
  std::memcpy(&s2, &bits2, sizeof s2);
  float v = e * s1 * s2;
  v = x >= lo ? v : 0.0f;
  v = x > hi ? std::numeric_limits<float>::infinity() : v;
  return x != x ? x : v;
}

// erf in two pieces, both computed and one selected, without exp or a branch. Below |x| = 1
// x P(x^2) / Q(x^2), the rational minimax of Eigen's and XLA's fast f32 erf; from 1 to 4,
// 1 - erfc(|x|) with erfc a degree-16 polynomial in |x| - 2.5 (a Chebyshev fit, absolute error
// 5e-8), the sign restored; beyond 4 erf rounds to +-1. Within 4 ulp of std::erf (checked by
// a sweep in fast_math_test.cpp), and 1 + erf (GELU below 0) within 1e-7 absolute. 4x faster
// than the Taylor series / Numerical Recipes' erfc through exp_f32 it replaced (0.61 against
// 0.15 ns per element in AVX-512 loops on Zen 5), which made GELU's gradient (an erf and an
// exp per element) bound by arithmetic.
inline float erf_f32(float x) {
  float c = x < 1.0f ? x : 1.0f;
  c = c > -1.0f ? c : -1.0f;
  float z = c * c;
  float p = -2.72614225801306e-10f;
  p = p * z + 2.77068142495902e-08f;
  p = p * z - 2.10102402082508e-06f;
  p = p * z - 5.69250639462346e-05f;
  p = p * z - 7.34990630326855e-04f;
  p = p * z - 2.95459980854025e-03f;
  p = p * z - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * z - 2.13374055278905e-04f;
  q = q * z - 1.68282697438203e-03f;
  q = q * z - 7.37332916720468e-03f;
  q = q * z - 1.42647390514189e-02f;
  float small = c * (p / q);  // not (c * p) / q: c * p is subnormal for |x| < 1e-37
  float a = std::fabs(x);
  float u = (a < 4.0f ? a : 4.0f) - 2.5f;
  float v = u * u;  // even and odd halves: two chains of half the latency
  float even = -1.127201532e-08f;
  even = even * v - 7.886890216e-07f;
  even = even * v + 1.534835064e-05f;
  even = even * v - 8.039429667e-05f;
  even = even * v - 2.594749094e-04f;
  even = even * v + 2.797981258e-03f;
  even = even * v + 8.622484282e-03f;
  even = even * v + 5.445701536e-03f;
  even = even * v + 4.069521383e-04f;
  float odd = 3.512991498e-07f;
  odd = odd * v - 3.462653694e-06f;
  odd = odd * v - 7.756445484e-06f;
  odd = odd * v + 2.534241648e-04f;
  odd = odd * v - 5.445338320e-04f;
  odd = odd * v - 6.116587669e-03f;
  odd = odd * v - 8.350212127e-03f;
  odd = odd * v - 2.178278519e-03f;
  float e = even + u * odd;
  float large = 1.0f - e;
  large = large < 1.0f ? large : 1.0f;
  large = x < 0 ? -large : large;
  float r = a < 1.0f ? small : large;
  return x != x ? x : r;  // NaN stays NaN (the clamps would make it erf(4))
}

// x < 0, false for unsigned types (where the comparison would always be false).
template <typename T>
constexpr bool is_negative(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0);
  else return false;
}

// ------------------------------------------------------------------------------------ unary

struct Negative : Traits<false, true, true, algorithm::eltwise_linear> {
  static constexpr float alpha = -1.f;
  template <typename T> T operator()(T x) const { return static_cast<T>(-x); }
};
struct Abs : Traits<false, true, true, algorithm::eltwise_abs> {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else return is_negative(x) ? static_cast<T>(-x) : x;
  }
};
// NaN stays NaN, as in NumPy (the INTERPRETER fuzzer's finding: it was 0).
struct Sign : Traits<false, false, true> {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      if (x != x) return x;  // NaN stays NaN
    return static_cast<T>(static_cast<int>(x > T(0)) - static_cast<int>(is_negative(x)));
  }
};
struct Floor : Traits<false, false, true> {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::floor(x); else return x;
  }
};
struct Ceiling : Traits<false, false, true> {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::ceil(x); else return x;
  }
};
// Not oneDNN's eltwise_relu, which maps NaN to 0 (max(x, 0) with NaN lost): NaN propagates
// here (x < 0 is false for NaN), as in NumPy and PyTorch.
struct Relu : Traits<false, true, true> {
  template <typename T> T operator()(T x) const { return is_negative(x) ? T(0) : x; }
};
// Not oneDNN's eltwise_exp, which gives +inf for NaN (found when exp_f32 made the loops as fast):
// NaN stays NaN, as in NumPy and the INTERPRETER.
struct Exp : Traits<true, true, false> {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return exp_f32(x);
    else return std::exp(x);
  }
};
// Not oneDNN's eltwise_log: near 1 it is off by ~1e-6 absolute (log(1) != 0, 0.1% relative
// error at 0.999), which std::log is not.
struct Log : Traits<true, true, false> {
  template <typename T> T operator()(T x) const { return std::log(x); }
};
struct Sqrt : Traits<true, true, true, algorithm::eltwise_sqrt> {
  template <typename T> T operator()(T x) const { return std::sqrt(x); }
};
struct Sin : Traits<true, false, true> {
  template <typename T> T operator()(T x) const { return std::sin(x); }
};
struct Cos : Traits<true, false, false> {
  template <typename T> T operator()(T x) const { return std::cos(x); }
};
struct Tan : Traits<true, false, true> {
  template <typename T> T operator()(T x) const { return std::tan(x); }
};
struct Asin : Traits<true, false, true> {
  template <typename T> T operator()(T x) const { return std::asin(x); }
};
struct Acos : Traits<true, false, false> {
  template <typename T> T operator()(T x) const { return std::acos(x); }
};
struct Atan : Traits<true, false, true> {
  template <typename T> T operator()(T x) const { return std::atan(x); }
};
struct Sinh : Traits<true, false, true> {
  template <typename T> T operator()(T x) const { return std::sinh(x); }
};
struct Cosh : Traits<true, false, false> {
  template <typename T> T operator()(T x) const { return std::cosh(x); }
};
struct Tanh : Traits<true, true, true, algorithm::eltwise_tanh> {
  template <typename T> T operator()(T x) const { return std::tanh(x); }
};
// exp(-|x|) never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below.
struct Sigmoid : Traits<true, true, false, algorithm::eltwise_logistic> {
  template <typename T> T operator()(T x) const {
    T e = Exp{}(-std::fabs(x));
    return x >= 0 ? T(1) / (T(1) + e) : e / (T(1) + e);
  }
};
struct Erf : Traits<true, true, true> {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return erf_f32(x);
    else return std::erf(x);
  }
};
// The exact GELU, x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))) (oneDNN's eltwise_gelu_erf).
struct Gelu : Traits<true, true, true, algorithm::eltwise_gelu_erf> {
  template <typename T> T operator()(T x) const {
    return x * T(0.5) * (T(1) + Erf{}(x * T(0.70710678118654752440)));
  }
};

// ----------------------------------------------------------------------------------- binary

struct Add : Traits<false, true, true, algorithm::binary_add> {
  template <typename T> T operator()(T a, T b) const { return static_cast<T>(a + b); }
};
struct Subtract : Traits<false, true, true, algorithm::binary_sub> {
  template <typename T> T operator()(T a, T b) const { return static_cast<T>(a - b); }
};
struct Multiply : Traits<false, true, true, algorithm::binary_mul> {
  template <typename T> T operator()(T a, T b) const { return static_cast<T>(a * b); }
};
// Reals only here: integer division has its own kernel (Python's rounding, division by zero).
struct Divide : Traits<true, true, false, algorithm::binary_div> {
  template <typename T> T operator()(T a, T b) const { return a / b; }
};
// NaN in either argument gives NaN, as NumPy's maximum/minimum and the Max/Min reductions do
// (oneDNN's binary_max/min return the other argument when the first is NaN: not used).
struct Maximum : Traits<false, true, true> {
  template <typename T> T operator()(T a, T b) const { return a < b || b != b ? b : a; }
};
struct Minimum : Traits<false, true, true> {
  template <typename T> T operator()(T a, T b) const { return b < a || b != b ? b : a; }
};
template <typename T>
T int_power(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp % 2) ? -1 : 1) : 0;
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exp = static_cast<T>(exp >> 1);
  }
  return result;
}
struct Power : Traits<false, true, false> {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return std::pow(a, b);
    else return int_power<T>(a, b);
  }
};

// ------------------------------------------------------------------- comparisons (boolean)

struct Equal : Traits<false, true, false> {
  template <typename T> bool operator()(T a, T b) const { return a == b; }
};
struct NotEqual : Traits<false, true, false> {
  template <typename T> bool operator()(T a, T b) const { return a != b; }
};
struct Greater : Traits<false, true, false> {
  template <typename T> bool operator()(T a, T b) const { return a > b; }
};
struct GreaterEq : Traits<false, true, false> {
  template <typename T> bool operator()(T a, T b) const { return a >= b; }
};
struct Less : Traits<false, true, false> {
  template <typename T> bool operator()(T a, T b) const { return a < b; }
};
struct LessEq : Traits<false, true, false> {
  template <typename T> bool operator()(T a, T b) const { return a <= b; }
};

// Select(c, a, b) in a fused program (c is a 0/1 mask register).
struct Select : Traits<false, true, false> {
  template <typename T> T operator()(T c, T a, T b) const { return c != T(0) ? a : b; }
};

}  // namespace scalar

// The lists. X(Name) names both the op and its functor in `scalar`.
// Unary ops: kernels registered from this list (elementwise_kernels.cpp).
#define NGRAPH_CPU_UNARY_OPS(X) \
  X(Negative) X(Abs) X(Sign) X(Floor) X(Ceiling) X(Relu) X(Exp) X(Log) X(Sqrt) X(Sin) X(Cos) \
  X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Tanh) X(Sigmoid) X(Erf) X(Gelu)
// Binary arithmetic with NumPy broadcasting (Divide has its own kernel for integers).
#define NGRAPH_CPU_BINARY_OPS(X) X(Add) X(Subtract) X(Multiply) X(Maximum) X(Minimum) X(Power)
// Comparisons: boolean results.
#define NGRAPH_CPU_COMPARE_OPS(X) \
  X(Equal) X(NotEqual) X(Greater) X(GreaterEq) X(Less) X(LessEq)
// Everything FusedElementwise can hold (those whose functor says fusible), by arity.
#define NGRAPH_CPU_FUSED_OPS(UNARY, BINARY, COMPARE, SELECT) \
  NGRAPH_CPU_UNARY_OPS(UNARY)                                \
  NGRAPH_CPU_BINARY_OPS(BINARY) BINARY(Divide)               \
  NGRAPH_CPU_COMPARE_OPS(COMPARE)                            \
  SELECT(Select)

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
