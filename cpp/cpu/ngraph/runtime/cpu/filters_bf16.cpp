#include "ngraph/runtime/cpu/filters_bf16.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ngraph/runtime/cpu/cpu_features.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

struct Plan {
  FilterProblem p;
  int64_t k = 0, k2 = 0;  // the reduction (batch x output positions); its pairs, rounded up
  int64_t ib = 0, ob = 0;  // blocks of 16 input, output channels
  int64_t m = 0;           // rows: (input block, filter row, filter column, channel)
};

// The data as rows of the product: col[m][k] is the element row m multiplies at reduction
// index k = (image, output row, output column); 0 where the window lies in the padding.
void gather_data(const Plan& q, const uint16_t* data, uint16_t* col) {
  const FilterProblem& p = q.p;
  const int64_t kp = 2 * q.k2;
  std::memset(col, 0, static_cast<size_t>(q.m * kp) * sizeof(uint16_t));
  for (int64_t k = 0; k < q.k; ++k) {
    int64_t n = k / (p.oh * p.ow), oy = k / p.ow % p.oh, ox = k % p.ow;
    for (int64_t b = 0; b < q.ib; ++b)
      for (int64_t fy = 0; fy < p.kh; ++fy) {
        int64_t y = oy * p.sh - p.ph + fy;
        for (int64_t fx = 0; fx < p.kw && y >= 0 && y < p.ih; ++fx) {
          int64_t x = ox * p.sw - p.pw + fx;
          if (x < 0 || x >= p.iw) continue;
          const uint16_t* s = data + (((n * q.ib + b) * p.ih + y) * p.iw + x) * 16;
          uint16_t* d = col + ((b * p.kh + fy) * p.kw + fx) * 16 * kp + k;
          for (int64_t i = 0; i < 16; ++i) d[i * kp] = s[i];
        }
      }
  }
}

// The delta by output-channel block in pairs of reduction indices: pairs[ob][j] holds, for
// each of the block's 16 channels, its delta at indices 2j and 2j + 1 (0 past the end).
void pair_delta(const Plan& q, const uint16_t* delta, uint16_t* pairs) {
  const int64_t positions = q.p.oh * q.p.ow;
  std::memset(pairs, 0, static_cast<size_t>(q.ob * q.k2 * 32) * sizeof(uint16_t));
  for (int64_t b = 0; b < q.ob; ++b)
    for (int64_t k = 0; k < q.k; ++k) {
      const uint16_t* s = delta + ((k / positions * q.ob + b) * positions + k % positions) * 16;
      uint16_t* d = pairs + (b * q.k2 + k / 2) * 32 + k % 2;
      for (int64_t o = 0; o < 16; ++o) d[2 * o] = s[o];
    }
}

// Rows [m0, m0 + R) of output-channel blocks [b0, b0 + B): R x B accumulators of 16 output
// channels, one vdpbf16ps per row, block and pair of reduction indices (each broadcast pair of
// the data serves B blocks, each pair of delta vectors R rows), stored as ABcd16b16a's rows.
template <int R, int B>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void product_tile(const Plan& q, const uint32_t* col,
                                                                          const uint16_t* pairs, float* out,
                                                                          int64_t m0, int64_t b0) {
  __m512 acc[R][B];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
  for (int64_t j = 0; j < q.k2; ++j) {
    __m512bh d[B];
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b)
      d[b] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(pairs + ((b0 + b) * q.k2 + j) * 32));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512bh c = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(col[(m0 + r) * q.k2 + j])));
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_dpbf16_ps(acc[r][b], c, d[b]);
    }
  }
#pragma GCC unroll 4
  for (int b = 0; b < B; ++b)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + ((b0 + b) * q.m + m0 + r) * 16, acc[r][b]);
}

// Rows [m0, m0 + 8) of every output-channel block, two blocks at a time.
void product_rows(const Plan& q, const uint32_t* col, const uint16_t* pairs, float* out, int64_t m0) {
  int64_t b = 0;
  for (; b + 2 <= q.ob; b += 2) product_tile<8, 2>(q, col, pairs, out, m0, b);
  if (b < q.ob) product_tile<8, 1>(q, col, pairs, out, m0, b);
}

void run(const Plan& q, const uint16_t* data, const uint16_t* delta, float* out) {
  thread_local std::vector<uint16_t> col, pairs;
  col.resize(static_cast<size_t>(q.m * 2 * q.k2));
  pairs.resize(static_cast<size_t>(q.ob * q.k2 * 32));
  gather_data(q, data, col.data());
  pair_delta(q, delta, pairs.data());
  const auto* col32 = reinterpret_cast<const uint32_t*>(col.data());
  const uint16_t* pr = pairs.data();
  parallel_for(static_cast<size_t>(q.m / 8), 8, [&](size_t begin, size_t end) {
    for (size_t g = begin; g < end; ++g) product_rows(q, col32, pr, out, static_cast<int64_t>(g) * 8);
  });
}

}  // namespace

std::optional<Kernel> filters_bf16(const FilterProblem& p, const dnnl::memory::desc& data,
                                   const dnnl::memory::desc& delta, const dnnl::memory::desc& filters,
                                   int64_t max_reduction) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  Plan q{p, p.n * p.oh * p.ow, (p.n * p.oh * p.ow + 1) / 2, p.ic / 16, p.oc / 16, p.ic * p.kh * p.kw};
  if (!bf16_native() || p.ic % 16 != 0 || p.oc % 16 != 0 || q.k == 0 || q.k > max_reduction) return std::nullopt;
  if (data != dnnl::memory::desc({p.n, p.ic, p.ih, p.iw}, dt::bf16, tag::aBcd16b) ||
      delta != dnnl::memory::desc({p.n, p.oc, p.oh, p.ow}, dt::bf16, tag::aBcd16b) ||
      filters != dnnl::memory::desc({p.oc, p.ic, p.kh, p.kw}, dt::f32, tag::ABcd16b16a))
    return std::nullopt;
  return Kernel([q](const void* const* in, void* const* out) {
    run(q, static_cast<const uint16_t*>(in[0]), static_cast<const uint16_t*>(in[1]), static_cast<float*>(out[0]));
  });
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
