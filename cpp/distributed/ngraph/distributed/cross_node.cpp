// The cross-node exchange (see cross_node.hpp): a reduce-scatter through MPI_Ialltoallv and an
// allgather through MPI_Iallgatherv, each waited for with the owner's timeout; the sums are
// added here, in rank order, so they do not depend on MPI's reduction order.
#include "ngraph/distributed/cross_node.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/distributed/mpi_detail.hpp"
#include "ngraph/distributed/node_memory.hpp"
#include "ngraph/low_precision.hpp"

namespace ngraph {
namespace distributed {

namespace wire {
namespace {

constexpr float kHalfMax = 65504.0f;
constexpr size_t kChunk = 1024;  // values decoded at a time before adding

inline uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// Round to nearest even by integer addition; NaN keeps its payload's top bits (the quiet bit
// when none would be left), as ngraph::bfloat16 does.
inline uint16_t bf16_bits(float v) {
  uint32_t u = bits_of(v);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | ((u & 0x007F0000u) ? 0u : 0x40u);
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}
inline float bf16_value(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

// Finite values beyond float16's range become +-65504 (see cross_node.hpp).
inline float saturate_half(float v) {
  float a = std::fabs(v);
  return a > kHalfMax && a <= 3.4028235e38f ? std::copysign(kHalfMax, v) : v;
}
inline uint16_t fp16_bits_reference(float v) { return low_precision::round_from_float(saturate_half(v), 5, 10); }
inline float fp16_value_reference(uint16_t b) { return low_precision::decode_to_float(b, 5, 10); }

// What rounding lost, 0 when the rounded value is not finite (a residual must stay finite).
inline float lost(float v, float rounded) { return std::isfinite(rounded) ? v - rounded : 0.0f; }

void encode_bf16(const float* x, uint16_t* out, size_t n, float* residual) {
  if (!residual) {
    for (size_t i = 0; i < n; ++i) out[i] = bf16_bits(x[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float v = x[i] + residual[i];
    uint16_t b = bf16_bits(v);
    out[i] = b;
    residual[i] = lost(v, bf16_value(b));
  }
}

void decode_bf16(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16_value(in[i]);
}

void encode_fp16_portable(const float* x, uint16_t* out, size_t n, float* residual) {
  for (size_t i = 0; i < n; ++i) {
    float v = residual ? x[i] + residual[i] : x[i];
    out[i] = fp16_bits_reference(v);
    if (residual) residual[i] = lost(v, fp16_value_reference(out[i]));
  }
}

void decode_fp16_portable(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = fp16_value_reference(in[i]);
}

#if defined(__x86_64__)
// F16C rounds to nearest even (imm 0), subnormals included; NaN and infinity pass.
__attribute__((target("avx,f16c"))) void encode_fp16_f16c(const float* x, uint16_t* out, size_t n,
                                                           float* residual) {
  const __m256 limit = _mm256_set1_ps(kHalfMax), inf = _mm256_set1_ps(INFINITY);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + i));
    __m256 a = _mm256_andnot_ps(sign, v);
    __m256 big = _mm256_and_ps(_mm256_cmp_ps(a, limit, _CMP_GT_OQ), _mm256_cmp_ps(a, inf, _CMP_LT_OQ));
    // Saturated, and the residual from v itself: it carries what saturation lost too.
    __m256 sent = _mm256_blendv_ps(v, _mm256_or_ps(_mm256_and_ps(v, sign), limit), big);
    __m128i h = _mm256_cvtps_ph(sent, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    if (residual) {
      __m256 back = _mm256_cvtph_ps(h);
      __m256 finite = _mm256_cmp_ps(_mm256_andnot_ps(sign, back), inf, _CMP_LT_OQ);
      _mm256_storeu_ps(residual + i, _mm256_and_ps(_mm256_sub_ps(v, back), finite));
    }
  }
  encode_fp16_portable(x + i, out + i, n - i, residual ? residual + i : nullptr);
}

__attribute__((target("avx,f16c"))) void decode_fp16_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  decode_fp16_portable(in + i, out + i, n - i);
}

bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// bf16_bits on 8 values (the portable loop does not vectorise: GCC keeps the NaN select
// scalar), then packed to 16 bits.
__attribute__((target("avx2"))) inline __m256i bf16_bits8(__m256i u) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
  __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
  __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
  __m256i no_payload = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x007F0000)), _mm256_setzero_si256());
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_and_si256(no_payload, _mm256_set1_epi32(0x40)));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

__attribute__((target("avx2"))) void encode_bf16_avx2(const float* x, uint16_t* out, size_t n, float* residual) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    if (residual) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(residual + i));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(residual + i + 8));
    }
    __m256i b0 = bf16_bits8(_mm256_castps_si256(v0)), b1 = bf16_bits8(_mm256_castps_si256(v1));
    // packus works per 128-bit lane: put the eight 64-bit halves back in order.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(b0, b1), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
    if (residual) {
      __m256i back0 = _mm256_slli_epi32(b0, 16), back1 = _mm256_slli_epi32(b1, 16);
      __m256i fin0 = _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(back0, exponent), exponent),
                                      _mm256_set1_epi32(-1));
      __m256i fin1 = _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(back1, exponent), exponent),
                                      _mm256_set1_epi32(-1));
      __m256 r0 = _mm256_sub_ps(v0, _mm256_castsi256_ps(back0)), r1 = _mm256_sub_ps(v1, _mm256_castsi256_ps(back1));
      _mm256_storeu_ps(residual + i, _mm256_and_ps(r0, _mm256_castsi256_ps(fin0)));
      _mm256_storeu_ps(residual + i + 8, _mm256_and_ps(r1, _mm256_castsi256_ps(fin1)));
    }
  }
  encode_bf16(x + i, out + i, n - i, residual ? residual + i : nullptr);
}
#endif

void check_16_bit(Wire w, const char* what) {
  if (w == Wire::f32)
    throw std::invalid_argument(std::string("[wire::") + what + "] needs a 16-bit wire (bf16, fp16)");
}

// sum[i] += value of in[i], for a 16-bit wire (the values decoded a chunk at a time).
void add_decoded(float* sum, const uint16_t* in, size_t n, Wire w) {
  if (w == Wire::bf16) {
    for (size_t i = 0; i < n; ++i) sum[i] += bf16_value(in[i]);
    return;
  }
  float chunk[kChunk];
  for (size_t b = 0; b < n; b += kChunk) {
    size_t k = std::min(kChunk, n - b);
    decode(in + b, chunk, k, w);
    for (size_t i = 0; i < k; ++i) sum[b + i] += chunk[i];
  }
}

}  // namespace

void encode(const float* x, uint16_t* out, size_t n, Wire w, float* residual) {
  check_16_bit(w, "encode");
  if (w == Wire::bf16) {
#if defined(__x86_64__)
    if (has_avx2()) return encode_bf16_avx2(x, out, n, residual);
#endif
    return encode_bf16(x, out, n, residual);
  }
#if defined(__x86_64__)
  if (has_f16c()) return encode_fp16_f16c(x, out, n, residual);
#endif
  encode_fp16_portable(x, out, n, residual);
}

void decode(const uint16_t* in, float* out, size_t n, Wire w) {
  check_16_bit(w, "decode");
  if (w == Wire::bf16) return decode_bf16(in, out, n);
#if defined(__x86_64__)
  if (has_f16c()) return decode_fp16_f16c(in, out, n);
#endif
  decode_fp16_portable(in, out, n);
}

void round_in_place(float* x, size_t n, Wire w, float* residual) {
  check_16_bit(w, "round_in_place");
  uint16_t bits[kChunk];
  for (size_t b = 0; b < n; b += kChunk) {
    size_t k = std::min(kChunk, n - b);
    encode(x + b, bits, k, w, residual ? residual + b : nullptr);
    decode(bits, x + b, k, w);
  }
}

}  // namespace wire

namespace {
std::atomic<uint64_t> g_bytes_sent[3];
}

uint64_t process_bytes_sent(Wire wire) { return g_bytes_sent[static_cast<int>(wire)].load(std::memory_order_relaxed); }

void CrossNodeExchange::count_sent(uint64_t values, Wire wire) {
  uint64_t bytes = values * wire_bytes(wire);
  m_bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  g_bytes_sent[static_cast<int>(wire)].fetch_add(bytes, std::memory_order_relaxed);
}

CrossNodeExchange::CrossNodeExchange(MPICommunicator& owner, MPI_Comm comm) : m_owner(owner), m_comm(comm) {
  if (comm == MPI_COMM_NULL)
    throw std::invalid_argument("[CrossNodeExchange] the communicator of " + owner.name() + " is MPI_COMM_NULL");
  MPI_Comm_rank(comm, &m_rank);
  MPI_Comm_size(comm, &m_size);
}

CrossNodeExchange::Range CrossNodeExchange::piece(size_t count, int r) const {
  auto p = SharedRegion::piece(count, sizeof(float), r, m_size);
  return {p.lo, p.hi};
}

size_t CrossNodeExchange::residual_count(size_t count) const {
  Range mine = piece(count, m_rank);
  return count + (mine.hi - mine.lo);
}

void CrossNodeExchange::check_count(size_t count, const std::string& what) const {
  if (m_owner.is_broken())
    throw DistributedError(what + ": rank " + std::to_string(m_owner.rank()) + ": " + m_owner.name() +
                           " is unusable after an earlier failure: " + m_owner.broken_reason());
  // MPI counts and displacements are ints; what arrives is one piece (at most 15 values longer
  // than an even share) per rank.
  Range mine = piece(count, m_rank);
  if (count > static_cast<size_t>(INT_MAX) ||
      (mine.hi - mine.lo) * static_cast<size_t>(m_size) > static_cast<size_t>(INT_MAX))
    throw std::invalid_argument(what + ": " + std::to_string(count) +
                                " values exceed what one exchange carries (MPI's count limit)");
}

void CrossNodeExchange::wait(MPI_Request& req, const std::string& what) { m_owner.wait_request(req, what); }

void CrossNodeExchange::reduce_scatter_sum(float* buf, size_t count, Wire wire, const std::string& what) {
  reduce_scatter_sum(buf, count, wire, what, nullptr);
}
void CrossNodeExchange::allgather(float* buf, size_t count, Wire wire, const std::string& what) {
  allgather(buf, count, wire, what, nullptr);
}
void CrossNodeExchange::allreduce_sum(float* buf, size_t count, Wire wire, const std::string& what) {
  allreduce_sum(buf, count, wire, what, nullptr);
}

void CrossNodeExchange::allreduce_sum(float* buf, size_t count, Wire wire, const std::string& what,
                                      float* residual) {
  reduce_scatter_sum(buf, count, wire, what, residual);
  allgather(buf, count, wire, what, residual ? residual + count : nullptr);
}

void CrossNodeExchange::reduce_scatter_sum(float* buf, size_t count, Wire wire, const std::string& what,
                                           float* residual) {
  check_count(count, what);
  if (count == 0) return;
  const size_t n = static_cast<size_t>(m_size), me = static_cast<size_t>(m_rank);
  const Range mine = piece(count, m_rank);
  const size_t m = mine.hi - mine.lo;
  m_send_counts.assign(n, 0);
  m_send_displs.assign(n, 0);
  m_recv_counts.assign(n, 0);
  m_recv_displs.assign(n, 0);
  uint64_t values_sent = 0;
  for (size_t q = 0; q < n; ++q) {
    Range p = piece(count, static_cast<int>(q));
    m_send_displs[q] = static_cast<int>(p.lo);
    m_recv_displs[q] = static_cast<int>(q * m);
    if (q == me) continue;
    m_send_counts[q] = static_cast<int>(p.hi - p.lo);
    m_recv_counts[q] = static_cast<int>(m);
    values_sent += p.hi - p.lo;
  }
  // Every contribution on the wire (this rank's own piece too, for a 16-bit wire: see header).
  const bool narrow = wire != Wire::f32;
  if (narrow) {
    m_packed.resize(count);
    wire::encode(buf, m_packed.data(), count, wire, residual);
    m_arrived16.resize(n * m);
  } else {
    m_arrived32.resize(n * m);
  }
  if (n > 1) {
    MPI_Request req;
    if (narrow)
      detail::check(MPI_Ialltoallv(m_packed.data(), m_send_counts.data(), m_send_displs.data(), MPI_UINT16_T,
                                   m_arrived16.data(), m_recv_counts.data(), m_recv_displs.data(), MPI_UINT16_T,
                                   m_comm, &req),
                    what);
    else
      detail::check(MPI_Ialltoallv(buf, m_send_counts.data(), m_send_displs.data(), MPI_FLOAT, m_arrived32.data(),
                                   m_recv_counts.data(), m_recv_displs.data(), MPI_FLOAT, m_comm, &req),
                    what);
    wait(req, what);
  }
  count_sent(values_sent, wire);
  // Rank 0's contribution, then each next rank's added in f32.
  m_sum.resize(m);
  float* sum = m_sum.data();
  for (size_t r = 0; r < n; ++r) {
    if (narrow) {
      const uint16_t* c = r == me ? m_packed.data() + mine.lo : m_arrived16.data() + r * m;
      if (r == 0) wire::decode(c, sum, m, wire);
      else wire::add_decoded(sum, c, m, wire);
    } else {
      const float* c = r == me ? buf + mine.lo : m_arrived32.data() + r * m;
      if (r == 0) std::copy(c, c + m, sum);
      else for (size_t i = 0; i < m; ++i) sum[i] += c[i];
    }
  }
  std::copy(sum, sum + m, buf + mine.lo);
}

void CrossNodeExchange::round_own_piece(float* buf, size_t count, Wire wire, float* residual) {
  if (wire == Wire::f32) return;
  const Range mine = piece(count, m_rank);
  const size_t m = mine.hi - mine.lo;
  m_packed.resize(count);  // the owner's piece of it is what allgather then sends
  wire::encode(buf + mine.lo, m_packed.data() + mine.lo, m, wire, residual);
  wire::decode(m_packed.data() + mine.lo, buf + mine.lo, m, wire);
}

void CrossNodeExchange::allgather(float* buf, size_t count, Wire wire, const std::string& what, float* residual) {
  check_count(count, what);
  if (count == 0) return;
  const size_t n = static_cast<size_t>(m_size), me = static_cast<size_t>(m_rank);
  const Range mine = piece(count, m_rank);
  const size_t m = mine.hi - mine.lo;
  m_recv_counts.assign(n, 0);
  m_recv_displs.assign(n, 0);
  for (size_t q = 0; q < n; ++q) {
    Range p = piece(count, static_cast<int>(q));
    m_recv_counts[q] = static_cast<int>(p.hi - p.lo);
    m_recv_displs[q] = static_cast<int>(p.lo);
  }
  const bool narrow = wire != Wire::f32;
  if (narrow) round_own_piece(buf, count, wire, residual);  // the owner keeps what the others receive
  if (n > 1) {
    MPI_Request req;
    if (narrow)
      detail::check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, m_packed.data(), m_recv_counts.data(),
                                    m_recv_displs.data(), MPI_UINT16_T, m_comm, &req),
                    what);
    else
      detail::check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, m_recv_counts.data(),
                                    m_recv_displs.data(), MPI_FLOAT, m_comm, &req),
                    what);
    wait(req, what);
  }
  count_sent(static_cast<uint64_t>(m) * (n - 1), wire);
  if (!narrow) return;
  for (size_t q = 0; q < n; ++q) {
    if (q == me) continue;
    size_t lo = static_cast<size_t>(m_recv_displs[q]);
    wire::decode(m_packed.data() + lo, buf + lo, static_cast<size_t>(m_recv_counts[q]), wire);
  }
}

}  // namespace distributed
}  // namespace ngraph
