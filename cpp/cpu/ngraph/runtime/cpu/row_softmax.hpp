// Softmax over contiguous rows, the loop of attention_kernels.cpp: the plain Softmax's kernel
// when its axes are the innermost ones (a row is then contiguous in memory).
#pragma once

#include <cstddef>

#include "ngraph/element_type.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// softmax of each of `rows` rows of `n` contiguous elements of in[0] into out[0] (f32 or f64):
// the maximum, the exponentials (scalar_ops.hpp's exp_f32 for f32) and their sum, the scaling;
// a row with a NaN, or with nothing but -inf, is NaN, as in max, exp, sum, divide. Rows are
// shared out among the backend's threads.
Kernel softmax_rows_kernel(element::Type type, size_t rows, size_t n);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
