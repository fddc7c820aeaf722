// Shared oneDNN objects and conversions for the CPU kernels.
#pragma once

#include <dnnl.hpp>
#include <vector>

#include "ngraph/element_type.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/shape.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();

// oneDNN's per-execution overhead (about a microsecond) is more than a loop over a few
// thousand elements costs: elementwise ops on fewer stay on ngraph's loops.
inline bool dnnl_worthwhile(size_t elements) { return elements >= 4096; }
// oneDNN holds up to 12 axes; rank 0 is given as {1}.
bool dnnl_rank_ok(const Shape& s);
dnnl::memory::dims to_dims(const Shape& s, size_t rank = 0);  // left-padded with 1s to rank
// oneDNN's data type of f32, bf16 and f16 (others throw: kernels of other types do not use
// oneDNN).
dnnl::memory::data_type dnnl_type(element::Type t);
dnnl::memory::desc plain_desc(const Shape& s, size_t rank = 0,
                              element::Type t = element::f32);  // row-major
dnnl::memory::desc flat_desc(size_t elements);                     // f32, one axis

// Primitive attributes with the scratchpad in user mode: the memory planner places it.
dnnl::primitive_attr dnnl_attr();

// One argument of a primitive, bound to the kernel's input or output `index` at call time.
struct DnnlArg {
  int arg;  // DNNL_ARG_SRC, ...
  dnnl::memory::desc md;
  bool input;
  size_t index;
};

// A oneDNN primitive as a kernel: its arguments bound to the kernel's buffers, its scratchpad
// (primitive_desc::scratchpad_desc(), from attributes made by dnnl_attr) asked of `ctx`.
Kernel dnnl_kernel(KernelContext& ctx, const dnnl::primitive& prim,
                   const dnnl::memory::desc& scratchpad, const std::vector<DnnlArg>& args);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
