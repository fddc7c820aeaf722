// The counter-based random numbers of the graph's random ops (Dropout): Philox4x32-10
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011). A draw is a pure
// function of (seed, rank, step, element index), so every backend computes the same values,
// each rank and each call (step) of an executable gets different ones without recompiling,
// and a run resumed at the same step repeats them.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ngraph {
namespace random {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(M0) * ctr[0], p1 = static_cast<uint64_t>(M1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += W0;
    key[1] += W1;
  }
  return ctr;
}

// The stream of one random op in one call: element i draws word i % 4 of block i / 4, whose
// counter is (block low 32 bits, block bits 32-47 | rank << 16, step low, step high) under the
// key (seed low, seed high). Distinct for every (seed, rank < 65536, step, index < 2^50).
struct Stream {
  uint64_t seed = 0, rank = 0, step = 0;
  std::array<uint32_t, 4> block(uint64_t b) const {
    return philox4x32({static_cast<uint32_t>(b),
                       static_cast<uint32_t>((b >> 32) & 0xFFFFu) | static_cast<uint32_t>(rank << 16),
                       static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)},
                      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  }
};

// Dropout keeps element i when its draw, word >> 8 (a uniform integer in [0, 2^24)), is at least
// this threshold, ceil(p * 2^24): the probability of a drop is p to 2^-24.
inline uint32_t dropout_threshold(double p) {
  const double scaled = std::ceil(p * 16777216.0);
  return static_cast<uint32_t>(scaled < 0 ? 0 : scaled > 16777216.0 ? 16777216.0 : scaled);
}
// The value of a kept element's mask: 1 / (1 - p) (inverted dropout); 0 when p is 1.
template <typename T>
T dropout_keep(double p) {
  return p >= 1 ? T(0) : static_cast<T>(1.0 / (1.0 - p));
}

// Dropout's scaled mask, mask[i] for i in [begin, end): 0 where element i is dropped,
// dropout_keep where it is kept.
template <typename T>
void dropout_mask(const Stream& s, double p, T* mask, size_t begin, size_t end) {
  const uint32_t threshold = dropout_threshold(p);
  const T keep = dropout_keep<T>(p);
  size_t i = begin;
  while (i < end) {
    auto words = s.block(i / 4);
    for (size_t w = i % 4; w < 4 && i < end; ++w, ++i) mask[i] = (words[w] >> 8) >= threshold ? keep : T(0);
  }
}

}  // namespace random
}  // namespace ngraph
