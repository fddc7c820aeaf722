// Shared oneDNN objects and conversions for the CPU kernels.
#pragma once

#include <dnnl.hpp>

#include "ngraph/element_type.hpp"
#include "ngraph/shape.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();

// oneDNN holds up to 12 axes; rank 0 is given as {1}.
bool dnnl_rank_ok(const Shape& s);
dnnl::memory::dims to_dims(const Shape& s, size_t rank = 0);  // left-padded with 1s to rank
dnnl::memory::desc plain_desc(const Shape& s, size_t rank = 0);  // f32, row-major

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
