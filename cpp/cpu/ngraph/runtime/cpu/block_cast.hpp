// f32 -> bf16 between two blocked oneDNN layouts that tile every dimension in blocks of the
// same sizes (a convolution's weights: f32 ABcd16b16a, the layout their update is written in,
// to the ABcd8b16a2b a bf16 convolution reads, or the BAcd8a16b2a its backward-data reads).
// Each block of the source is then one block of the destination with its elements permuted.
// oneDNN 2.6's jit reorder converts these at about a quarter of memory speed (it was a fifth
// of ResNet-50's bf16 step at 64x64); this walks the blocks with one table of in-block
// offsets and bf16 instructions (oneDNN's rounding: to nearest even, f32 denormals as zero):
// the forward's layout by one vpermw per 32 elements, the backward-data's (a 16 x 8 transpose of
// bf16 pairs) by 24 vpermt2d per 16x16 block in registers, both about at memory speed. Without
// bf16 instructions oneDNN's reorder casts (the same bits).
#pragma once

#include <dnnl.hpp>
#include <optional>

#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// The kernel (input 0: `src`, output 0: `dst`), or nothing where the two layouts do not tile
// alike or the CPU has no bf16 instructions (then a oneDNN reorder does it).
// `transpose_in_registers` false: the pair transpose goes pair by pair through memory, as
// before (the benchmark's comparison, mixed_precision_test.cpp).
std::optional<Kernel> block_permuting_cast(const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
                                           bool transpose_in_registers = true);

// Both casts of one f32 source at once (output 0 in `dst0`, output 1 in `dst1`), a few
// blocks at a time, so the source is read from memory once: a convolution's weights to the
// forward's and the backward data's layouts (PrecisionCastPair). The same bits as the two
// casts. Nothing where either cast has no kernel or the two do not walk the same blocks.
std::optional<Kernel> block_permuting_cast_pair(const dnnl::memory::desc& src, const dnnl::memory::desc& dst0,
                                                const dnnl::memory::desc& dst1);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
