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

// bf16 activations: more values stored in bf16, through the ops that declare it
// (Node::bf16_sets: a product's output, a batch normalization's data and output, an
// elementwise loop's inputs and output, a cast's input). Starting from every set `eligible`
// accepts (the backend has a bf16 kernel for it), a set is dropped, until none is, where one of
// its inputs is not produced in bf16 (no live set of its producer holds it) or one of its
// outputs has a reader no live set holds (a result, a variable's update, a collective, any op
// without such a set). The remaining sets are stored in bf16 (Node::set_bf16_stored) and their
// nodes validated again in order; a cast (`is_cast`) whose input became bf16 then converts
// nothing and is removed (its readers read its input). Returns the number of values retyped.
size_t store_bf16(Function& function, const std::function<bool(const Node&, const Node::Bf16Set&)>& eligible,
                  const std::function<bool(const Node&)>& is_cast);

}  // namespace pass
}  // namespace ngraph
