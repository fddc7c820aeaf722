// The filter gradient (ConvolutionBackpropFilters) of a bf16 2-D convolution whose reduction
// (batch x output positions) is short: ResNet-50's last stage at 64x64 (2x2 outputs, 32 terms
// a weight), where oneDNN 2.6's jit kernel runs 3 to 7 times slower than the same layer's
// forward (its loops are built for long reductions). Here it is one product in bf16
// instructions (vdpbf16ps, f32 accumulation) of the data, gathered once into rows of
// (channel block, filter row, filter column, channel) by reduction index, and the delta
// interleaved in pairs per block of 16 output channels, written straight into the filters'
// f32 ABcd16b16a layout. The accumulation order differs from oneDNN's (bf16 products are exact
// in f32: only the f32 sums' rounding differs).
#pragma once

#include <dnnl.hpp>
#include <optional>

#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// A 2-D convolution's geometry (undilated, one group).
struct FilterProblem {
  int64_t n, ic, ih, iw, oc, oh, ow, kh, kw, sh, sw, ph, pw;
};

// The longest reduction (batch x output positions) the kernel takes by default.
constexpr int64_t filters_bf16_max_reduction = 64;

// The kernel (input 0: data, bf16 aBcd16b; input 1: delta, bf16 aBcd16b; output 0: filters,
// f32 ABcd16b16a), or nothing where the layouts differ from those, a channel count is not a
// multiple of 16, the reduction is longer than `max_reduction` or the CPU has no bf16
// instructions (then oneDNN computes it).
std::optional<Kernel> filters_bf16(const FilterProblem& p, const dnnl::memory::desc& data,
                                   const dnnl::memory::desc& delta, const dnnl::memory::desc& filters,
                                   int64_t max_reduction = filters_bf16_max_reduction);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
