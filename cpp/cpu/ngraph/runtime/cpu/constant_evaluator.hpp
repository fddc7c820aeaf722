// Constant folding on the CPU backend: the evaluator that pass::ConstantFolding needs (the
// core runs no nodes itself).
//   manager.register_pass<pass::ConstantFolding>(runtime::cpu::evaluate_constant);
#pragma once

#include <memory>

#include "ngraph/node.hpp"
#include "ngraph/ops/parameter.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// The value of `node` (its inputs are Constants; output 0 is returned) as a new Constant of
// the node's element type and shape. The node's kernel is built as the compiler builds it
// without optimisation passes (the layouts its layout rule asks for, reached by Reorders from
// and to row-major) and called once on the constants' data, with the backend's thread count;
// the timeline and the numerics check see that call as a call of an unnamed graph. `node` is
// not modified. Throws std::invalid_argument for a node that is not pure (a collective, a
// random op: folding never gives it one) or has an input that is not a Constant.
std::shared_ptr<op::Constant> evaluate_constant(const std::shared_ptr<Node>& node);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
