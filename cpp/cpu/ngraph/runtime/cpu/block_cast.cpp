#include "ngraph/runtime/cpu/block_cast.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ngraph/runtime/cpu/cpu_features.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

const dnnl_blocking_desc_t& blocking(const dnnl_memory_desc_t& m) { return m.format_desc.blocking; }

// The product of the inner blocks of dimension `dim`.
int64_t block_of(const dnnl_memory_desc_t& m, int dim) {
  int64_t b = 1;
  for (int k = 0; k < blocking(m).inner_nblks; ++k)
    if (blocking(m).inner_idxs[k] == dim) b *= blocking(m).inner_blks[k];
  return b;
}

// The offset, inside its block, of the element at in-block coordinates `c`.
int64_t in_block_offset(const dnnl_memory_desc_t& m, const std::vector<int64_t>& c) {
  const auto& b = blocking(m);
  int64_t offset = 0;
  for (int k = 0; k < b.inner_nblks; ++k) {
    int64_t finer = 1, later = 1;  // the later blocks of this dimension; of all dimensions
    for (int j = k + 1; j < b.inner_nblks; ++j) {
      later *= b.inner_blks[j];
      if (b.inner_idxs[j] == b.inner_idxs[k]) finer *= b.inner_blks[j];
    }
    offset += (c[static_cast<size_t>(b.inner_idxs[k])] / finer) % b.inner_blks[k] * later;
  }
  return offset;
}

// How a block's elements move: inside each 32 (ABcd16b16a -> ABcd8b16a2b interleaves rows),
// in pairs (the ..8a16b2a layouts transpose pairs), or one by one.
enum class Permute { chunks, pairs, elements };

struct BlockWalk {
  std::vector<int64_t> outer;                 // blocks along each dimension
  std::vector<int64_t> src_strides, dst_strides;  // between consecutive blocks, in elements
  std::vector<int32_t> from;                  // destination in-block offset -> source's
  std::vector<uint16_t> chunk_index;          // from, modulo 32 (vpermw's indices)
  Permute how = Permute::elements;
  size_t blocks = 1;
};

// Calls body(source block, destination block) for blocks [begin, end).
template <typename Body>
void walk(const BlockWalk& w, size_t begin, size_t end, Body body) {
  const size_t n = w.outer.size();
  std::vector<int64_t> c(n);
  int64_t s = 0, d = 0;
  for (size_t i = n, rest = begin; i-- > 0;) {
    c[i] = static_cast<int64_t>(rest % static_cast<size_t>(w.outer[i]));
    rest /= static_cast<size_t>(w.outer[i]);
    s += c[i] * w.src_strides[i];
    d += c[i] * w.dst_strides[i];
  }
  for (size_t block = begin; block < end; ++block) {
    body(s, d);
    for (size_t i = n; i-- > 0;) {  // the next block
      s += w.src_strides[i];
      d += w.dst_strides[i];
      if (++c[i] < w.outer[i]) break;
      s -= c[i] * w.src_strides[i];
      d -= c[i] * w.dst_strides[i];
      c[i] = 0;
    }
  }
}


// One block: converted as it lies (32 elements an instruction), then permuted, by one vpermw
// per 32 elements where they stay together, else from the converted copy (held as pairs of
// bf16: the pairs path moves 32 bits at a time, which GCC turns into gathers).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void convert_block_bf16_native(
    const float* in, void* out, const BlockWalk& w, uint32_t* copy) {
  const size_t inner = w.from.size();
  auto* out16 = static_cast<uint16_t*>(out);
  for (size_t k = 0; k < inner; k += 32) {
    __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + k + 16), _mm512_loadu_ps(in + k));
    __m512i bits = reinterpret_cast<__m512i>(v);
    if (w.how == Permute::chunks)
      _mm512_storeu_si512(out16 + k, _mm512_permutexvar_epi16(_mm512_loadu_si512(w.chunk_index.data() + k), bits));
    else
      _mm512_storeu_si512(copy + k / 2, bits);
  }
  if (w.how == Permute::pairs) {
    auto* out32 = static_cast<uint32_t*>(out);
    for (size_t k = 0; k < inner / 2; ++k) out32[k] = copy[w.from[2 * k] / 2];
  } else if (w.how == Permute::elements) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(copy);
    for (size_t k = 0; k < inner; ++k) std::memcpy(out16 + k, bytes + 2 * w.from[k], sizeof(uint16_t));
  }
}

Permute permutation_kind(const BlockWalk& w) {
  bool chunks = true, pairs = true;
  for (size_t k = 0; k < w.from.size(); ++k) {
    chunks = chunks && static_cast<size_t>(w.from[k]) / 32 == k / 32;
    pairs = pairs && (k % 2 == 0 ? w.from[k] % 2 == 0 : w.from[k] == w.from[k - 1] + 1);
  }
  return chunks ? Permute::chunks : pairs ? Permute::pairs : Permute::elements;
}

void convert_bf16_native(const BlockWalk& w, const float* src, uint16_t* dst, size_t begin, size_t end) {
  std::vector<uint32_t> copy(w.from.size() / 2);
  walk(w, begin, end, [&](int64_t s, int64_t d) { convert_block_bf16_native(src + s, dst + d, w, copy.data()); });
}

}  // namespace

std::optional<Kernel> block_permuting_cast(const dnnl::memory::desc& src_desc, const dnnl::memory::desc& dst_desc) {
  const dnnl_memory_desc_t& s = src_desc.data;
  const dnnl_memory_desc_t& d = dst_desc.data;
  if (s.format_kind != dnnl_blocked || d.format_kind != dnnl_blocked || s.data_type != dnnl_f32 ||
      d.data_type != dnnl_bf16 || s.ndims != d.ndims || s.offset0 != 0 || d.offset0 != 0 ||
      s.extra.flags != 0 || d.extra.flags != 0)
    return std::nullopt;
  const auto n = static_cast<size_t>(s.ndims);
  BlockWalk w;
  std::vector<int64_t> block(n);
  int64_t inner = 1;
  for (size_t i = 0; i < n; ++i) {
    int dim = static_cast<int>(i);
    block[i] = block_of(s, dim);
    if (s.padded_dims[i] != d.padded_dims[i] || block[i] != block_of(d, dim) || s.padded_dims[i] % block[i])
      return std::nullopt;
    inner *= block[i];
    w.outer.push_back(s.padded_dims[i] / block[i]);
    w.src_strides.push_back(blocking(s).strides[i]);
    w.dst_strides.push_back(blocking(d).strides[i]);
    w.blocks *= static_cast<size_t>(w.outer.back());
  }
  // Blocks of a multiple of 32 elements (a zmm of bf16), on a CPU with bf16 instructions (the
  // only place mixed precision casts).
  if (inner % 32 != 0 || w.blocks == 0 || !bf16_native()) return std::nullopt;
  w.from.assign(static_cast<size_t>(inner), 0);
  std::vector<int64_t> c(n, 0);
  for (int64_t k = 0; k < inner; ++k) {
    int64_t a = in_block_offset(s, c), b = in_block_offset(d, c);
    w.from[static_cast<size_t>(b)] = static_cast<int32_t>(a);
    for (size_t i = n; i-- > 0;)
      if (++c[i] < block[i]) break;
      else c[i] = 0;
  }
  bool same = w.src_strides == w.dst_strides;
  for (int64_t k = 0; k < inner && same; ++k) same = w.from[static_cast<size_t>(k)] == k;
  if (same) return std::nullopt;  // one layout: oneDNN converts it at memory speed
  for (int32_t f : w.from) w.chunk_index.push_back(static_cast<uint16_t>(f % 32));
  w.how = permutation_kind(w);
  return Kernel([w = std::move(w)](const void* const* in, void* const* out) {
    const auto* src = static_cast<const float*>(in[0]);
    auto* dst = static_cast<uint16_t*>(out[0]);
    parallel_for(w.blocks, 64, [&](size_t begin, size_t end) { convert_bf16_native(w, src, dst, begin, end); });
  });
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
