// Graph-level optimisation before anything CPU-specific: constant folding (evaluated by this
// backend), dead-node elimination, common-subexpression elimination, and the erf formula of
// GELU rewritten into Gelu (oneDNN's gelu_erf, instead of a fused elementwise erf).
#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"
#include "ngraph/runtime/cpu/constant_evaluator.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

void optimize_graph(ExecutionPlan& plan) {
  if (!plan.options.optimize) return;
  ngraph::pass::Manager manager;
  manager.register_pass<ngraph::pass::ConstantFolding>(evaluate_constant);
  manager.register_pass<ngraph::pass::DeadNodeElimination>();
  manager.register_pass<ngraph::pass::CommonSubexpressionElimination>();
  manager.register_pass<ngraph::pass::GeluFusion>();
  manager.run_passes(plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
