// Random ops: Dropout draws its mask from the counter-based stream of ngraph/random.hpp (the
// op's seed, this process's rank, the call's step), the same values the INTERPRETER draws.
// Here Philox runs on kBlocks counter blocks at once with SIMD products (see philox_rounds_*),
// in the build's loops and their AVX2 and AVX-512 twins like the other kernels; the scalar
// reference (random::dropout_mask) does the ragged end, and tests check they agree bit for bit.
// Mixed precision (Dropout::bf16_sets): the data and the output can each be stored in bf16
// (X and Y std::uint16_t; computed in f32, bf16_convert.hpp's conversions, the same bits in
// every twin); the mask stays f32.
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/random.hpp"
#include "ngraph/runtime/cpu/bf16_convert.hpp"
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

// Elements [begin, end) (fewer than a batch) as the scalar reference draws them.
template <typename T, typename X, typename Y>
void dropout_tail(const random::Stream& s, double p, const X* x, Y* y, T* mask, size_t begin,
                  size_t end) {
  if (mask) {
    random::dropout_mask(s, p, mask, begin, end);
    for (size_t i = begin; i < end; ++i) y[i] = narrow<Y>(widen(x[i]) * mask[i]);
    return;
  }
  const uint32_t threshold = random::dropout_threshold(p);
  const T keep = random::dropout_keep<T>(p);
  for (size_t i = begin; i < end; ++i)
    y[i] = narrow<Y>(widen(x[i]) * ((s.block(i / 4)[i % 4] >> 8) >= threshold ? keep : T(0)));
}

// y = x * mask and the mask (random::dropout_mask's values; not written when null) for
// elements [0, n).
template <typename T, typename X, typename Y, bool Avx2>
NGRAPH_CPU_PHILOX void dropout_run(const random::Stream& s, double p, const X* x, Y* y, T* mask,
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
        if (mask) mask[i] = m;
        y[i] = narrow<Y>(widen(x[i]) * m);
      }
  }
  dropout_tail(s, p, x, y, mask, full, n);
}

template <typename T, typename X, typename Y>
void dropout_loop(const random::Stream& s, double p, const X* x, Y* y, T* mask, size_t n) {
#if defined(__AVX2__)
  dropout_run<T, X, Y, true>(s, p, x, y, mask, n);
#else
  dropout_run<T, X, Y, false>(s, p, x, y, mask, n);
#endif
}
#if defined(NGRAPH_CPU_PHILOX_X86) && !defined(__AVX2__)
#define NGRAPH_CPU_HAVE_AVX2_DROPOUT 1
template <typename T, typename X, typename Y>
__attribute__((target("avx2,fma"))) void dropout_loop_avx2(const random::Stream& s, double p,
                                                            const X* x, Y* y, T* mask, size_t n) {
  dropout_run<T, X, Y, true>(s, p, x, y, mask, n);
}
#endif

#ifdef NGRAPH_CPU_PHILOX_X86
// The AVX-512 twin: Philox on 16 blocks per register (vpmuludq on 512 bits), G groups of 16
// blocks at once so that the rounds of one hide the products' latency of the others. A
// group's keep/drop decisions are four 16-bit compare masks (one per word), interleaved into
// one 64-bit mask of its 64 elements in order (pdep), which then selects between 0 and the
// keep value 16 (f32) or 8 (f64) elements a store: bitwise the scalar reference, x * mask
// included (a dropped -x is -0, as there).
#define NGRAPH_CPU_HAVE_AVX512_DROPOUT 1
// GCC 12's avx512fintrin.h initialises its undefined vectors from themselves (_mm512_undefined_*),
// which -Wmaybe-uninitialized flags once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define NGRAPH_CPU_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi2")))
NGRAPH_CPU_AVX512 NGRAPH_CPU_PHILOX void mulhilo_avx512(__m512i a, __m512i m, __m512i& hi,
                                                        __m512i& lo) {
  __m512i even = _mm512_mul_epu32(a, m);
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

// Keep masks of elements [4 * first, 4 * first + 64 G): bit e of bits[g] is element 64 g + e.
// `first` is a multiple of 16, so a group's block numbers share their bits 32 and up.
template <int G>
NGRAPH_CPU_AVX512 NGRAPH_CPU_PHILOX void philox_keep_avx512(const random::Stream& s, uint64_t first,
                                                            uint32_t threshold, uint64_t (&bits)[G]) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kM0)), m1 = _mm512_set1_epi32(static_cast<int>(kM1));
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c[G][4];
  for (int g = 0; g < G; ++g) {
    uint64_t block = first + 16 * static_cast<uint64_t>(g);
    c[g][0] = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(block))), iota);
    c[g][1] = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>((block >> 32) & 0xFFFFu) |
                                                 static_cast<uint32_t>(s.rank << 16)));
    c[g][2] = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(s.step)));
    c[g][3] = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(s.step >> 32)));
  }
  auto key0 = static_cast<uint32_t>(s.seed), key1 = static_cast<uint32_t>(s.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m512i k0 = _mm512_set1_epi32(static_cast<int>(key0)), k1 = _mm512_set1_epi32(static_cast<int>(key1));
    for (int g = 0; g < G; ++g) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo_avx512(c[g][0], m0, hi0, lo0);
      mulhilo_avx512(c[g][2], m1, hi1, lo1);
      c[g][0] = _mm512_ternarylogic_epi32(hi1, c[g][1], k0, 0x96);  // three-way xor
      c[g][2] = _mm512_ternarylogic_epi32(hi0, c[g][3], k1, 0x96);
      c[g][1] = lo1;
      c[g][3] = lo0;
    }
    key0 += kW0;
    key1 += kW1;
  }
  const __m512i thr = _mm512_set1_epi32(static_cast<int>(threshold));
  for (int g = 0; g < G; ++g) {
    bits[g] = 0;
    for (int w = 0; w < 4; ++w) {
      __mmask16 k = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c[g][w], 8), thr);
      bits[g] |= _pdep_u64(k, 0x1111111111111111ull << w);
    }
  }
}

// 16 values as f32: f32 itself, or bf16 (the bits shifted up).
template <typename X>
NGRAPH_CPU_AVX512 NGRAPH_CPU_PHILOX __m512 load16_avx512(const X* x) {
  if constexpr (std::is_same_v<X, float>) return _mm512_loadu_ps(x);
  else
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))), 16));
}

// 16 f32 values stored as f32, or as bf16 rounded as bf16_convert.hpp's f32_to_bf16 does
// (nearest even, denormals to signed zero, NaN quiet) in AVX-512F integer steps.
template <typename Y>
NGRAPH_CPU_AVX512 NGRAPH_CPU_PHILOX void store16_avx512(Y* y, __m512 v) {
  if constexpr (std::is_same_v<Y, float>) {
    _mm512_storeu_ps(y, v);
  } else {
    const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(hi, _mm512_set1_epi32(0x8000)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm512_cvtepi32_epi16(r));
  }
}

// mask (unless null) and y = x * mask for 64 elements whose keep bits are `bits`.
template <typename T, typename X, typename Y>
NGRAPH_CPU_AVX512 NGRAPH_CPU_PHILOX void dropout_store_avx512(uint64_t bits, T keep, const X* x, Y* y,
                                                              T* mask) {
  if constexpr (std::is_same_v<T, float>) {
    const __m512 kv = _mm512_set1_ps(keep);
    for (int j = 0; j < 4; ++j) {
      __m512 m = _mm512_maskz_mov_ps(static_cast<__mmask16>(bits >> (16 * j)), kv);
      if (mask) _mm512_storeu_ps(mask + 16 * j, m);
      store16_avx512(y + 16 * j, _mm512_mul_ps(load16_avx512(x + 16 * j), m));
    }
  } else {
    const __m512d kv = _mm512_set1_pd(keep);
    for (int j = 0; j < 8; ++j) {
      __m512d m = _mm512_maskz_mov_pd(static_cast<__mmask8>(bits >> (8 * j)), kv);
      if (mask) _mm512_storeu_pd(mask + 8 * j, m);
      _mm512_storeu_pd(y + 8 * j, _mm512_mul_pd(_mm512_loadu_pd(x + 8 * j), m));
    }
  }
}

template <typename T, typename X, typename Y>
NGRAPH_CPU_AVX512 void dropout_loop_avx512(const random::Stream& s, double p, const X* x, Y* y,
                                           T* mask, size_t n) {
  constexpr int G = 4;
  const uint32_t threshold = random::dropout_threshold(p);
  const T keep = random::dropout_keep<T>(p);
  size_t base = 0;
  for (; base + 64 * G <= n; base += 64 * G) {
    uint64_t bits[G];
    philox_keep_avx512<G>(s, base / 4, threshold, bits);
    for (int g = 0; g < G; ++g)
      dropout_store_avx512<T, X, Y>(bits[g], keep, x + base + 64 * g, y + base + 64 * g,
                              mask ? mask + base + 64 * g : nullptr);
  }
  for (; base + 64 <= n; base += 64) {
    uint64_t bits[1];
    philox_keep_avx512<1>(s, base / 4, threshold, bits);
    dropout_store_avx512<T, X, Y>(bits[0], keep, x + base, y + base, mask ? mask + base : nullptr);
  }
  dropout_tail(s, p, x, y, mask, base, n);
}
#undef NGRAPH_CPU_AVX512
#pragma GCC diagnostic pop
#endif

// The rank is the default communicator's when the executable is compiled (as the collectives
// bind theirs); only the step changes between calls.
// The mask is written only where something reads it: a gradient draws it again (see
// Dropout::generate_adjoints), so in training graphs nothing does.
// X and Y: the data's and the output's storage (T, or std::uint16_t for bf16 where T is float).
template <typename T, typename X = T, typename Y = T>
Kernel dropout(const op::Dropout& d, size_t n, const CallState* call, bool write_mask) {
  uint64_t seed = d.get_seed();
  auto rank = static_cast<uint64_t>(distributed::get_default_communicator()->rank());
  double p = d.get_probability();
  auto run = &dropout_loop<T, X, Y>;
#ifdef NGRAPH_CPU_HAVE_AVX2_DROPOUT
  if (use_avx2_twins()) run = &dropout_loop_avx2<T, X, Y>;
#endif
#ifdef NGRAPH_CPU_HAVE_AVX512_DROPOUT
  if (use_avx512_twins()) run = &dropout_loop_avx512<T, X, Y>;
#endif
  return [seed, rank, p, n, call, run, write_mask](const void* const* in, void* const* out) {
    random::Stream stream{seed, rank, call->rng_step};
    run(stream, p, static_cast<const X*>(in[0]), static_cast<Y*>(out[0]),
        write_mask ? static_cast<T*>(out[1]) : nullptr, n);
  };
}

// f32 computed, the data (in16) and the output (out16) each stored in f32 or bf16.
Kernel dropout_f32(const op::Dropout& d, size_t n, const CallState* call, bool write_mask) {
  bool in16 = d.is_bf16_stored_input(0), out16 = d.is_bf16_stored_output(0);
  using B = std::uint16_t;
  if (in16 && out16) return dropout<float, B, B>(d, n, call, write_mask);
  if (in16) return dropout<float, B, float>(d, n, call, write_mask);
  if (out16) return dropout<float, float, B>(d, n, call, write_mask);
  return dropout<float>(d, n, call, write_mask);
}

NGRAPH_CPU_KERNEL("Dropout", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& d = static_cast<const op::Dropout&>(node);
  size_t n = shape_size(d.get_input_shape(0));
  element::Type t = d.get_input_compute_type(0);
  if (t == element::f32) return dropout_f32(d, n, ctx.call_state(), ctx.output_read(1));
  if (t == element::f64) return dropout<double>(d, n, ctx.call_state(), ctx.output_read(1));
  node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
