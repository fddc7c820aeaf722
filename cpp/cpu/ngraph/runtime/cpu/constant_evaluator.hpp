// Constant folding's evaluator on this backend: the value of a node whose inputs are all
// constants, computed by compiling and running it as a one-node function.
#pragma once

#include <memory>

#include "ngraph/node.hpp"
#include "ngraph/ops/parameter.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

std::shared_ptr<op::Constant> evaluate_constant(const std::shared_ptr<Node>& node);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
