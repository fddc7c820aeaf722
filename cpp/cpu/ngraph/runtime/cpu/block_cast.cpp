#include "ngraph/runtime/cpu/block_cast.hpp"

#include <immintrin.h>

#include <algorithm>
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
  // Permute::pairs over a 16x16 block that transposes its 16 rows of 8 pairs (ABcd16b16a ->
  // BAcd8a16b2a): three stages of vpermt2d in registers, each output combining two inputs.
  bool transpose = false;
  // The transposed blocks stored non-temporally (64-byte aligned destination): the pair's
  // backward-data copy, read only much later in the step, so not worth its place in the cache.
  bool stream = false;
  alignas(64) uint32_t stage[3][8][16] = {};
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

// Where the pair transpose's stage k writes its output o: so that the next stage's inputs
// 2m, 2m+1 are adjacent. Stage 0's output (m, x) (rows 4m.., columns 4x..) pairs by x;
// stage 1's (p, x, y) (rows 8p.., columns 4x+2y..) pairs by p.
constexpr int transpose_slot(int k, int o) {
  return k == 0 ? (o / 4) * 4 + (o % 2) * 2 + (o / 2) % 2 : k == 1 ? (o % 4) * 2 + o / 4 : o;
}

// The pairs transpose, one block: eight zmm of converted bf16 (two 16-float rows each), then
// 3 x 8 vpermt2d (w.stage, built and checked by pair_transpose below), then eight stores:
// plain where the forward convolutions read the weights from the cache soon after
// (non-temporal ones were 15% faster alone but slowed ResNet-50's step), non-temporal where
// w.stream says so (the cast pair's backward-data copy, read only in the backward).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void transpose_block_bf16_native(
    const float* in, void* out, const BlockWalk& w) {
  __m512i r[8], t[8];
  for (int j = 0; j < 8; ++j)
    r[j] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + 32 * j + 16), _mm512_loadu_ps(in + 32 * j)));
#pragma GCC unroll 3
  for (int k = 0; k < 3; ++k) {
#pragma GCC unroll 8
    for (int o = 0; o < 8; ++o) {
      int a = (o / 2) * 2;  // outputs 2m and 2m+1 read inputs 2m and 2m+1
      t[transpose_slot(k, o)] = _mm512_permutex2var_epi32(r[a], _mm512_load_si512(w.stage[k][o]), r[a + 1]);
    }
#pragma GCC unroll 8
    for (int o = 0; o < 8; ++o) r[o] = t[o];
  }
  auto* out32 = static_cast<__m512i*>(out);
  if (w.stream)
    for (int o = 0; o < 8; ++o) _mm512_stream_si512(out32 + o, r[o]);
  else
    for (int o = 0; o < 8; ++o) _mm512_storeu_si512(out32 + o, r[o]);
}

// One block (any other permutation): converted as it lies (32 elements an instruction), then
// permuted, by one vpermw per 32 elements where they stay together, else from the converted copy (held as pairs of
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

// The vpermt2d network of the 16 x 8 pair transpose: register j holds rows 2j and 2j+1 (8 pairs
// each); the outputs of each stage are paired so that stage k's outputs 2m, 2m+1 are the inputs
// of the next. Labels are the pairs' (row, column); each stage's index is found by search, and
// the whole network is checked against the block's table (false: the old path does it).
bool pair_transpose(BlockWalk& w) {
  if (w.how != Permute::pairs || w.from.size() != 256) return false;
  struct Label { int row, col; };
  std::vector<std::vector<Label>> reg(8, std::vector<Label>(16));
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) reg[j][l] = {2 * j + l / 8, l % 8};
  // What each stage's output o holds, as (row, column) of lane l.
  auto want = [](int k, int o, int l) -> Label {
    if (k == 0) {  // rows 4m..4m+3 (m = o / 2) x columns 4x..4x+3 (x = o % 2)
      int m = o / 2, x = o % 2;
      return {4 * m + l / 4, 4 * x + l % 4};
    }
    if (k == 1) {  // rows 8p..8p+7 x columns 4x+2y, 4x+2y+1
      int p = o / 4, x = (o / 2) % 2, y = o % 2;
      return {8 * p + l / 2, 4 * x + 2 * y + l % 2};
    }
    // k == 2: column (o), all rows
    return {l, o};
  };
  for (int k = 0; k < 3; ++k) {
    std::vector<std::vector<Label>> next(8, std::vector<Label>(16));
    for (int o = 0; o < 8; ++o) {
      int a = (o / 2) * 2;
      for (int l = 0; l < 16; ++l) {
        Label x = want(k, o, l);
        int found = -1;
        for (int q = 0; q < 32 && found < 0; ++q) {
          const Label& y = reg[static_cast<size_t>(a + q / 16)][static_cast<size_t>(q % 16)];
          if (y.row == x.row && y.col == x.col) found = q;
        }
        if (found < 0) return false;
        w.stage[k][o][l] = static_cast<uint32_t>(found);
        next[static_cast<size_t>(transpose_slot(k, o))][static_cast<size_t>(l)] = x;
      }
    }
    reg = next;
  }
  // Output register o, lane l: pair (row l, column o), i.e. destination pair 16 o + l must come
  // from source pair 8 l + o.
  for (int o = 0; o < 8; ++o)
    for (int l = 0; l < 16; ++l) {
      const Label& x = reg[static_cast<size_t>(o)][static_cast<size_t>(l)];
      if (w.from[static_cast<size_t>(2 * (16 * o + l))] != 2 * (8 * x.row + x.col)) return false;
    }
  return true;
}

void convert_bf16_native(const BlockWalk& w, const float* src, uint16_t* dst, size_t begin, size_t end) {
  if (w.transpose) {
    walk(w, begin, end, [&](int64_t s, int64_t d) { transpose_block_bf16_native(src + s, dst + d, w); });
    return;
  }
  std::vector<uint32_t> copy(w.from.size() / 2);
  walk(w, begin, end, [&](int64_t s, int64_t d) { convert_block_bf16_native(src + s, dst + d, w, copy.data()); });
}

// How the blocks of `src_desc` become those of `dst_desc`, or nothing (see the header).
std::optional<BlockWalk> block_walk(const dnnl::memory::desc& src_desc, const dnnl::memory::desc& dst_desc,
                                    bool transpose_in_registers) {
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
  w.transpose = transpose_in_registers && pair_transpose(w);
  return w;
}

}  // namespace

std::optional<Kernel> block_permuting_cast(const dnnl::memory::desc& src_desc, const dnnl::memory::desc& dst_desc,
                                           bool transpose_in_registers) {
  std::optional<BlockWalk> walked = block_walk(src_desc, dst_desc, transpose_in_registers);
  if (!walked) return std::nullopt;
  return Kernel([w = std::move(*walked)](const void* const* in, void* const* out) {
    const auto* src = static_cast<const float*>(in[0]);
    auto* dst = static_cast<uint16_t*>(out[0]);
    parallel_for(w.blocks, 64, [&](size_t begin, size_t end) { convert_bf16_native(w, src, dst, begin, end); });
  });
}

std::optional<Kernel> block_permuting_cast_pair(const dnnl::memory::desc& src, const dnnl::memory::desc& dst0,
                                                const dnnl::memory::desc& dst1) {
  std::optional<BlockWalk> a = block_walk(src, dst0, true), b = block_walk(src, dst1, true);
  if (!a || !b || a->outer != b->outer || a->src_strides != b->src_strides) return std::nullopt;
  BlockWalk streamed = *b;
  streamed.stream = streamed.transpose;
  return Kernel([a = std::move(*a), plain = std::move(*b), streamed](const void* const* in, void* const* out) {
    const auto* from = static_cast<const float*>(in[0]);
    auto* to0 = static_cast<uint16_t*>(out[0]);
    auto* to1 = static_cast<uint16_t*>(out[1]);
    const BlockWalk& second = reinterpret_cast<uintptr_t>(to1) % 64 == 0 ? streamed : plain;
    // 32 blocks (32 KB of f32 for 16x16 blocks) to one layout, then from the cache to the other.
    parallel_for(a.blocks, 64, [&](size_t begin, size_t end) {
      for (size_t lo = begin; lo < end; lo += 32) {
        size_t hi = std::min(end, lo + 32);
        convert_bf16_native(a, from, to0, lo, hi);
        convert_bf16_native(second, from, to1, lo, hi);
      }
      _mm_sfence();
    });
  });
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
