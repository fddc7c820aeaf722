#include "ngraph/low_precision.hpp"

#include <cmath>
#include <cstring>

namespace ngraph {
namespace low_precision {

namespace {

template <typename To, typename From>
To bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

// A NaN of the target format from a NaN's sign and fraction: the fraction's top bits, or the
// quiet bit where they are all zero (so the result is still a NaN).
uint16_t nan_bits(uint16_t sign, uint64_t fraction, int fraction_bits_in, int exponent_bits,
                  int fraction_bits) {
  auto kept = static_cast<uint16_t>(fraction >> (fraction_bits_in - fraction_bits));
  if (kept == 0) kept = static_cast<uint16_t>(1u << (fraction_bits - 1));
  return static_cast<uint16_t>(sign | (((1u << exponent_bits) - 1) << fraction_bits) | kept);
}

// float16 from a float's bits (not NaN), in integer arithmetic: the same result as
// round_from_double, without the double.
uint16_t float16_from_float_bits(uint32_t bits) {
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7FFFFFFF;
  if (magnitude >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // >= 65520: inf
  if (magnitude >= 0x38800000) {  // a float16 normal (>= 2^-14)
    // Rebias the exponent (127 -> 15), add just under half an ulp plus the kept lowest bit
    // (ties to even), and drop the 13 extra fraction bits; a carry moves the exponent up.
    const uint32_t odd = (magnitude >> 13) & 1;
    return static_cast<uint16_t>(sign | ((magnitude - (112u << 23) + 0xFFF + odd) >> 13));
  }
  const int exponent = static_cast<int>(magnitude >> 23);
  if (exponent < 102) return sign;  // below 2^-25: rounds to zero
  // A subnormal: the significand with its leading 1, shifted to units of 2^-24.
  const uint32_t significand = (magnitude & 0x7FFFFF) | 0x800000;
  const int shift = 126 - exponent;  // 14 ... 24
  uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  return static_cast<uint16_t>(sign | kept);
}

}  // namespace

uint16_t round_from_double(double value, int exponent_bits, int fraction_bits) {
  const auto bits = bit_cast<uint64_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 63) << (exponent_bits + fraction_bits));
  const int exponent = static_cast<int>((bits >> 52) & 0x7FF);
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  const auto infinity = static_cast<uint16_t>(((1u << exponent_bits) - 1) << fraction_bits);
  if (exponent == 0x7FF)
    return fraction == 0 ? static_cast<uint16_t>(sign | infinity)
                         : nan_bits(sign, fraction, 52, exponent_bits, fraction_bits);
  if (exponent == 0) return sign;  // zero or a double subnormal: far below either format
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int unbiased = exponent - 1023;
  if (unbiased > bias) return static_cast<uint16_t>(sign | infinity);
  // The significand with its leading 1; keep fraction_bits after it (fewer for subnormals).
  const uint64_t significand = fraction | (uint64_t{1} << 52);
  const int min_exponent = 1 - bias;
  int shift = 52 - fraction_bits;
  if (unbiased < min_exponent) shift += min_exponent - unbiased;
  if (shift > 53) return sign;  // below half the smallest subnormal
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  // A normal's kept value carries its leading 1 at bit fraction_bits: adding it to the
  // exponent field minus one gives the encoding, and a carry from rounding moves the exponent
  // up by one as it should (to infinity past the largest finite value).
  uint64_t encoded = unbiased < min_exponent
                         ? kept
                         : (static_cast<uint64_t>(unbiased + bias - 1) << fraction_bits) + kept;
  if (encoded >= infinity) encoded = infinity;
  return static_cast<uint16_t>(sign | encoded);
}

uint16_t round_from_float(float value, int exponent_bits, int fraction_bits) {
  if (std::isnan(value)) {  // from the bits: converting a signalling NaN to double quiets it
    const auto bits = bit_cast<uint32_t>(value);
    const auto sign = static_cast<uint16_t>((bits >> 31) << (exponent_bits + fraction_bits));
    return nan_bits(sign, bits & 0x7FFFFF, 23, exponent_bits, fraction_bits);
  }
  const auto bits = bit_cast<uint32_t>(value);
  if (exponent_bits == 8 && fraction_bits == 7)  // bfloat16: round the float's bits
    return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
  if (exponent_bits == 5 && fraction_bits == 10) return float16_from_float_bits(bits);
  return round_from_double(static_cast<double>(value), exponent_bits, fraction_bits);
}

float decode_to_float(uint16_t bits, int exponent_bits, int fraction_bits) {
  const uint32_t sign = static_cast<uint32_t>(bits >> (exponent_bits + fraction_bits)) << 31;
  const int max_exponent = (1 << exponent_bits) - 1;
  const int exponent = (bits >> fraction_bits) & max_exponent;
  const uint32_t fraction = bits & ((1u << fraction_bits) - 1);
  if (exponent == max_exponent)  // infinity or NaN, payload kept bit for bit
    return bit_cast<float>(sign | 0x7F800000u | (fraction << (23 - fraction_bits)));
  if (exponent_bits == 8) return bit_cast<float>(static_cast<uint32_t>(bits) << 16);  // bfloat16
  const int bias = (1 << (exponent_bits - 1)) - 1;
  if (exponent != 0)  // a normal: rebias the exponent, widen the fraction
    return bit_cast<float>(sign | (static_cast<uint32_t>(exponent - bias + 127) << 23) |
                           (fraction << (23 - fraction_bits)));
  // Zero and subnormals: fraction * 2^(1 - bias - fraction_bits), a float normal. Exact.
  const float scale = bit_cast<float>(static_cast<uint32_t>(1 - bias - fraction_bits + 127) << 23);
  return bit_cast<float>(sign | bit_cast<uint32_t>(static_cast<float>(fraction) * scale));
}

namespace {
double sticky_magnitude(uint64_t m) {
  const int width = 64 - __builtin_clzll(m | 1);
  if (width <= 53) return static_cast<double>(m);
  const int shift = width - 53;
  const bool lost = (m & ((uint64_t{1} << shift) - 1)) != 0;
  return std::ldexp(static_cast<double>((m >> shift) | static_cast<uint64_t>(lost)), shift);
}
}  // namespace

double sticky_double(uint64_t value) { return sticky_magnitude(value); }
double sticky_double(int64_t value) {
  // The magnitude as unsigned: -INT64_MIN does not fit int64_t.
  uint64_t m = value < 0 ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  double d = sticky_magnitude(m);
  return value < 0 ? -d : d;
}

}  // namespace low_precision
}  // namespace ngraph
