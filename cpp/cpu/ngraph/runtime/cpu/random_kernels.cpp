// Random ops: Dropout draws its mask from the counter-based stream of ngraph/random.hpp (the
// op's seed, this process's rank, the call's step), the same values the INTERPRETER draws.
// Here Philox runs on kBlocks counter blocks at once with SIMD products (see philox_rounds_*),
// in the build's loops and their AVX2 twin like the other kernels; the scalar reference
// (random::dropout_mask) does the ragged end, and tests check the two agree bit for bit.
#include <algorithm>
#include <array>
#include <cmath>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/random.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

constexpr size_t kBlocks = 16;

#define NGRAPH_CPU_PHILOX __attribute__((always_inline)) inline

// Philox's rounds on the counters of kBlocks consecutive blocks, four 32-bit words each in
// arrays of lanes: c[w][b] is word w of block b. On x86-64 the 32 x 32 -> 64-bit products run
// on SSE2's pmuludq (even lanes, then the odd ones shifted down), four blocks per register, or
// AVX2's vpmuludq, eight per register; elsewhere as scalars. Bitwise random::Stream::block.
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

#if defined(__x86_64__) && defined(__GNUC__)
#define NGRAPH_CPU_PHILOX_X86 1
// The 256-bit helpers are inlined into their AVX2 callers; no such vector crosses a call.
#pragma GCC diagnostic ignored "-Wpsabi"
// hi and lo halves of the products of every 32-bit lane of a with m.
NGRAPH_CPU_PHILOX void mulhilo_sse2(__m128i a, __m128i m, __m128i& hi, __m128i& lo) {
  const __m128i low32 = _mm_set1_epi64x(0xFFFFFFFFll);
  __m128i even = _mm_mul_epu32(a, m);
  __m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);
  lo = _mm_or_si128(_mm_and_si128(even, low32), _mm_slli_epi64(odd, 32));
  hi = _mm_or_si128(_mm_srli_epi64(even, 32), _mm_andnot_si128(low32, odd));
}
NGRAPH_CPU_PHILOX void philox_rounds_sse2(uint32_t (&c)[4][kBlocks], uint32_t k0, uint32_t k1) {
  const __m128i m0 = _mm_set1_epi32(static_cast<int>(kM0)), m1 = _mm_set1_epi32(static_cast<int>(kM1));
  for (size_t b = 0; b < kBlocks; b += 4) {
    __m128i c0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&c[0][b]));
    __m128i c1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&c[1][b]));
    __m128i c2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&c[2][b]));
    __m128i c3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&c[3][b]));
    uint32_t key0 = k0, key1 = k1;
    for (int round = 0; round < 10; ++round) {
      __m128i hi0, lo0, hi1, lo1;
      mulhilo_sse2(c0, m0, hi0, lo0);
      mulhilo_sse2(c2, m1, hi1, lo1);
      c0 = _mm_xor_si128(_mm_xor_si128(hi1, c1), _mm_set1_epi32(static_cast<int>(key0)));
      c2 = _mm_xor_si128(_mm_xor_si128(hi0, c3), _mm_set1_epi32(static_cast<int>(key1)));
      c1 = lo1;
      c3 = lo0;
      key0 += kW0;
      key1 += kW1;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&c[0][b]), c0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&c[1][b]), c1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&c[2][b]), c2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&c[3][b]), c3);
  }
}
__attribute__((target("avx2"))) NGRAPH_CPU_PHILOX void mulhilo_avx2(__m256i a, __m256i m,
                                                                     __m256i& hi, __m256i& lo) {
  __m256i even = _mm256_mul_epu32(a, m);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
__attribute__((target("avx2"), noinline)) void philox_rounds_avx2(uint32_t (&c)[4][kBlocks],
                                                                           uint32_t k0, uint32_t k1) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kM1));
  for (size_t b = 0; b < kBlocks; b += 8) {
    __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&c[0][b]));
    __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&c[1][b]));
    __m256i c2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&c[2][b]));
    __m256i c3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&c[3][b]));
    uint32_t key0 = k0, key1 = k1;
    for (int round = 0; round < 10; ++round) {
      __m256i hi0, lo0, hi1, lo1;
      mulhilo_avx2(c0, m0, hi0, lo0);
      mulhilo_avx2(c2, m1, hi1, lo1);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(key0)));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(key1)));
      c1 = lo1;
      c3 = lo0;
      key0 += kW0;
      key1 += kW1;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&c[0][b]), c0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&c[1][b]), c1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&c[2][b]), c2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&c[3][b]), c3);
  }
}
#endif

NGRAPH_CPU_PHILOX void philox_rounds_scalar(uint32_t (&c)[4][kBlocks], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    for (size_t b = 0; b < kBlocks; ++b) {
      uint64_t p0 = static_cast<uint64_t>(kM0) * c[0][b], p1 = static_cast<uint64_t>(kM1) * c[2][b];
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1][b] ^ k0;
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3][b] ^ k1;
      c[1][b] = static_cast<uint32_t>(p1);
      c[3][b] = static_cast<uint32_t>(p0);
      c[0][b] = n0;
      c[2][b] = n2;
    }
    k0 += kW0;
    k1 += kW1;
  }
}

// The words of blocks [first, first + kBlocks) of `s` into c[w][b].
template <bool Avx2>
NGRAPH_CPU_PHILOX void philox_blocks(const random::Stream& s, uint64_t first, uint32_t (&c)[4][kBlocks]) {
  const auto rank_bits = static_cast<uint32_t>(s.rank << 16);
  for (size_t b = 0; b < kBlocks; ++b) {
    uint64_t block = first + b;
    c[0][b] = static_cast<uint32_t>(block);
    c[1][b] = static_cast<uint32_t>((block >> 32) & 0xFFFFu) | rank_bits;
    c[2][b] = static_cast<uint32_t>(s.step);
    c[3][b] = static_cast<uint32_t>(s.step >> 32);
  }
  auto k0 = static_cast<uint32_t>(s.seed), k1 = static_cast<uint32_t>(s.seed >> 32);
#ifdef NGRAPH_CPU_PHILOX_X86
  if constexpr (Avx2) philox_rounds_avx2(c, k0, k1);
  else philox_rounds_sse2(c, k0, k1);
#else
  philox_rounds_scalar(c, k0, k1);
#endif
}

// y = x * mask and the mask (random::dropout_mask's values) for elements [0, n).
template <typename T, bool Avx2>
NGRAPH_CPU_PHILOX void dropout_run(const random::Stream& s, double p, const T* x, T* y, T* mask,
                                   size_t n) {
  const uint32_t threshold = random::dropout_threshold(p);
  const T keep = random::dropout_keep<T>(p);
  const size_t per_batch = 4 * kBlocks;
  size_t full = n / per_batch * per_batch;
  uint32_t words[4][kBlocks];
  for (size_t base = 0; base < full; base += per_batch) {
    philox_blocks<Avx2>(s, base / 4, words);
    // Element base + 4b + w is word w of block b.
    for (size_t b = 0; b < kBlocks; ++b)
      for (size_t w = 0; w < 4; ++w) {
        size_t i = base + 4 * b + w;
        T m = (words[w][b] >> 8) >= threshold ? keep : T(0);
        mask[i] = m;
        y[i] = x[i] * m;
      }
  }
  if (full < n) {
    random::dropout_mask(s, p, mask, full, n);
    for (size_t i = full; i < n; ++i) y[i] = x[i] * mask[i];
  }
}

template <typename T>
void dropout_loop(const random::Stream& s, double p, const T* x, T* y, T* mask, size_t n) {
#if defined(__AVX2__)
  dropout_run<T, true>(s, p, x, y, mask, n);
#else
  dropout_run<T, false>(s, p, x, y, mask, n);
#endif
}
#if defined(NGRAPH_CPU_PHILOX_X86) && !defined(__AVX2__)
#define NGRAPH_CPU_HAVE_AVX2_DROPOUT 1
template <typename T>
__attribute__((target("avx2,fma"))) void dropout_loop_avx2(const random::Stream& s, double p,
                                                            const T* x, T* y, T* mask, size_t n) {
  dropout_run<T, true>(s, p, x, y, mask, n);
}
#endif

// The rank is the default communicator's when the executable is compiled (as the collectives
// bind theirs); only the step changes between calls.
template <typename T>
Kernel dropout(const op::Dropout& d, size_t n, const CallState* call) {
  uint64_t seed = d.get_seed();
  auto rank = static_cast<uint64_t>(distributed::get_default_communicator()->rank());
  double p = d.get_probability();
  auto run = &dropout_loop<T>;
#ifdef NGRAPH_CPU_HAVE_AVX2_DROPOUT
  if (use_avx2_twins()) run = &dropout_loop_avx2<T>;
#endif
  return [seed, rank, p, n, call, run](const void* const* in, void* const* out) {
    random::Stream stream{seed, rank, call->rng_step};
    run(stream, p, static_cast<const T*>(in[0]), static_cast<T*>(out[0]), static_cast<T*>(out[1]), n);
  };
}

NGRAPH_CPU_KERNEL("Dropout", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& d = static_cast<const op::Dropout&>(node);
  size_t n = shape_size(d.get_input_shape(0));
  element::Type t = d.get_input_element_type(0);
  if (t == element::f32) return dropout<float>(d, n, ctx.call_state());
  if (t == element::f64) return dropout<double>(d, n, ctx.call_state());
  node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
