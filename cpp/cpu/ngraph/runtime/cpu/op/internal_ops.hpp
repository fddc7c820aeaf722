// The backend-internal ops of the CPU backend: ops the fusion and layout passes form, with
// kernels but without Python wrappers or gradient rules (they are formed on a compiled copy,
// after autodiff), and not in the OpRegistry. One header each under op/ (Reorder and
// LaidOutConstant in layout.hpp); this one includes them all.
#pragma once

#include <string>
#include <vector>

#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/op/attention_softmax.hpp"
#include "ngraph/runtime/cpu/op/batch_norm_relu.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"
#include "ngraph/runtime/cpu/op/matmul_bias.hpp"
#include "ngraph/runtime/cpu/op/max_pool_with_workspace.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// The names of the backend-internal ops (they have kernels but are not in the OpRegistry).
const std::vector<std::string>& internal_op_names();

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
