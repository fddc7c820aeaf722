// The CPU kernels' own f32 exp and erf (scalar_ops.hpp: plain arithmetic the loops vectorise)
// against the C library in double, over a dense sweep of floats: their error bounds in ulp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ngraph/runtime/cpu/scalar_ops.hpp"

using ngraph::runtime::cpu::scalar::erf_f32;
using ngraph::runtime::cpu::scalar::exp_f32;

namespace {

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
// Distance in ulp between got and the float nearest to want (same sign assumed: else huge).
int64_t ulps(float got, double want) {
  auto order = [](float x) {  // floats in order as integers
    auto b = static_cast<int64_t>(bits_of(x));
    return b & 0x80000000ll ? -(b & 0x7FFFFFFFll) : b;
  };
  return std::llabs(order(got) - order(static_cast<float>(want)));
}

struct Worst {
  int64_t ulp = 0;
  float at = 0;
  void add(int64_t u, float x) {
    if (u > ulp) ulp = u, at = x;
  }
};

// Every 61st float of [0, top] and its negative (over 5 million points for |x| < 6).
template <typename F>
void sweep(float top, F&& f) {
  for (uint32_t b = 0; b <= bits_of(top); b += 61) {
    f(float_of(b));
    f(-float_of(b));
  }
}

}  // namespace

TEST(fast_math, erf_f32_is_within_4_ulp_and_its_complement_within_1e_7) {
  Worst all;
  double tail = 0;  // |(1 - |erf|) - erfc| for |x| >= 1: what 1 + erf(x) loses below 0 (GELU)
  sweep(6.0f, [&](float x) {
    int64_t u = ulps(erf_f32(x), std::erf(static_cast<double>(x)));
    all.add(u, x);
    if (std::fabs(x) >= 1.0f)
      tail = std::max(tail, std::fabs((1.0 - std::fabs(erf_f32(x))) - std::erfc(std::fabs(static_cast<double>(x)))));
  });
  EXPECT_LE(all.ulp, 4) << "at " << all.at;
  EXPECT_LE(tail, 1e-7);
  EXPECT_EQ(erf_f32(100.0f), 1.0f);
  EXPECT_EQ(erf_f32(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(erf_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(bits_of(erf_f32(0.0f)), 0u);  // zero-preserving (+0, not -0)
}

TEST(fast_math, exp_f32_is_within_2_ulp_over_its_normal_range) {
  Worst all;
  sweep(87.3f, [&](float x) { all.add(ulps(exp_f32(x), std::exp(static_cast<double>(x))), x); });
  for (uint32_t b = bits_of(87.3f); b <= bits_of(88.72f); b += 61) {
    float x = float_of(b);
    all.add(ulps(exp_f32(x), std::exp(static_cast<double>(x))), x);
  }
  EXPECT_LE(all.ulp, 2) << "at " << all.at;
  EXPECT_EQ(exp_f32(-100.0f), 0.0f);
  EXPECT_EQ(exp_f32(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
}
