// The 16-bit floating-point storage types: float16 (IEEE 754 binary16: 1 sign, 5 exponent,
// 10 fraction bits) and bfloat16 (the top 16 bits of an IEEE binary32: 1 sign, 8 exponent,
// 7 fraction bits). Each is a 2-byte value with explicit conversions; there is no arithmetic on
// them (ngraph stores and converts these types; see element::Type::is_storage_only).
//
// Every conversion to float16/bfloat16 rounds once, to nearest with ties to even: from float
// and double through the bits of the double, from 64-bit integers through a double that keeps
// a sticky bit (so that no value is rounded twice). Values beyond the largest finite value
// become infinity, values below the smallest subnormal become (signed) zero, NaN stays NaN
// (its payload's top bits are kept; a payload that would vanish becomes the quiet bit).
// Conversions to float are exact and keep NaN payloads bit for bit, so every float16 and
// bfloat16 bit pattern survives a round trip through float.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ngraph {

namespace low_precision {
// Round to nearest even from a double / exact decode to float, for a binary format with
// `exponent_bits` and `fraction_bits` (float16: 5, 10; bfloat16: 8, 7).
uint16_t round_from_double(double value, int exponent_bits, int fraction_bits);
uint16_t round_from_float(float value, int exponent_bits, int fraction_bits);
float decode_to_float(uint16_t bits, int exponent_bits, int fraction_bits);
// A double equal to `value`, or (64-bit integers beyond 2^53) one that rounds like it: the bits
// shifted out are ORed into the lowest kept bit (round to odd), so rounding it again to fewer
// than 52 bits gives the correctly rounded value.
double sticky_double(int64_t value);
double sticky_double(uint64_t value);
}  // namespace low_precision

template <int ExponentBits, int FractionBits>
class BinaryFloat16 {
 public:
  constexpr BinaryFloat16() = default;
  // From any arithmetic value (bool: 0 or 1), rounded to nearest even.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  explicit BinaryFloat16(T value) : m_bits(round(value)) {}
  // From the other 16-bit format: through float (exact), so rounded once.
  template <int E, int F>
  explicit BinaryFloat16(BinaryFloat16<E, F> other) : BinaryFloat16(static_cast<float>(other)) {}

  static constexpr BinaryFloat16 from_bits(uint16_t bits) {
    BinaryFloat16 v;
    v.m_bits = bits;
    return v;
  }
  constexpr uint16_t bits() const { return m_bits; }

  float to_float() const {
    return low_precision::decode_to_float(m_bits, ExponentBits, FractionBits);
  }
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  explicit operator T() const {
    if constexpr (std::is_same_v<T, bool>) return to_float() != 0.0f;
    else return static_cast<T>(to_float());
  }
  bool is_nan() const {
    constexpr uint16_t exponent = ((1u << ExponentBits) - 1) << FractionBits;
    return (m_bits & exponent) == exponent && (m_bits & ((1u << FractionBits) - 1)) != 0;
  }

  // Numeric comparison (NaN unequal to everything, -0 == +0), as for float.
  friend bool operator==(BinaryFloat16 a, BinaryFloat16 b) { return a.to_float() == b.to_float(); }
  friend bool operator!=(BinaryFloat16 a, BinaryFloat16 b) { return !(a == b); }

 private:
  template <typename T>
  static uint16_t round(T value) {
    if constexpr (std::is_same_v<T, float>)
      return low_precision::round_from_float(value, ExponentBits, FractionBits);
    else if constexpr (std::is_integral_v<T> && sizeof(T) == 8)
      return low_precision::round_from_double(
          low_precision::sticky_double(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(value)),
          ExponentBits, FractionBits);
    else
      return low_precision::round_from_double(static_cast<double>(value), ExponentBits,
                                              FractionBits);
  }

  uint16_t m_bits = 0;
};

using float16 = BinaryFloat16<5, 10>;
using bfloat16 = BinaryFloat16<8, 7>;
static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "16-bit storage types");
static_assert(std::is_trivially_copyable_v<float16>, "float16 must be copyable as bytes");

template <typename T>
inline constexpr bool is_low_precision_v =
    std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

}  // namespace ngraph
