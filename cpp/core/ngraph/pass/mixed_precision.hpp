// Mixed precision (bf16): the matrix operands of products and convolutions read in bf16.
// Backends compiling in Precision::bf16 call insert_bf16_casts on their copy of the function:
// the CPU compiler after its fusions (its casts are oneDNN reorders the layout pass can merge
// with a change of layout), the INTERPRETER before it orders its ops (its casts are Convert:
// the reference rounds to nearest even and computes the rounded values in double).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ngraph/function.hpp"

namespace ngraph {
namespace pass {

// The f32 operands (Node::bf16_inputs) of every op with an f32 output that `eligible` accepts
// are replaced by make_cast(operand), whose output must be bf16: one cast per value, shared by
// every reader (the forward product and the backward one read the same stored bf16
// activation). The ops are validated again (they give f32). Returns the casts made, in order.
std::vector<std::shared_ptr<Node>> insert_bf16_casts(
    Function& function, const std::function<bool(const Node&)>& eligible,
    const std::function<std::shared_ptr<Node>(const Output&)>& make_cast);

}  // namespace pass
}  // namespace ngraph
