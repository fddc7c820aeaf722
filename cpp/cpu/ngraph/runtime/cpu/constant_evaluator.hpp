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

// The value of `node` (one output; its inputs are Constants) as a new Constant of the node's
// element type and shape: a copy of the node is compiled alone as a function without
// optimisation passes (CompileOptions{false}) and run once. `node` is not modified.
std::shared_ptr<op::Constant> evaluate_constant(const std::shared_ptr<Node>& node);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
