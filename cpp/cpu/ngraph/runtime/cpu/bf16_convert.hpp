// Scalar bf16 <-> f32 conversions of the kernels that store values in bf16 (mixed precision,
// Node::bf16_sets) in their own loops: a load is exact (the bits shifted up); a store rounds to
// nearest even, f32 denormals to signed zero and NaN kept quiet, which is what vcvtneps2bf16
// (AVX-512 BF16) and oneDNN's casts give, so a portable loop and its AVX-512 twin agree bit
// for bit (Dropout, the column sum). The fused elementwise loops (fused_kernels.cpp) convert
// blocks the same way.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ngraph {
namespace runtime {
namespace cpu {

inline float bf16_to_f32(std::uint16_t b) {
  return __builtin_bit_cast(float, static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t f32_to_bf16(float f) {
  auto u = __builtin_bit_cast(std::uint32_t, f);
  std::uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  r = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r;  // NaN: quiet
  r = (u & 0x7f800000u) == 0 ? (u >> 16) & 0x8000u : r;          // zero, denormal: signed zero
  return static_cast<std::uint16_t>(r);
}

// A stored value in its compute type (bf16 storage: std::uint16_t, computed in f32), and back.
inline float widen(std::uint16_t b) { return bf16_to_f32(b); }
inline float widen(float f) { return f; }
inline double widen(double d) { return d; }
template <typename Y, typename T>
Y narrow(T v) {
  if constexpr (std::is_same_v<Y, std::uint16_t>) return f32_to_bf16(v);
  else return v;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
