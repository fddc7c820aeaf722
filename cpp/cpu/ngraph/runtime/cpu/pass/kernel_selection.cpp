// Kernel selection: each step's builder, looked up by op name, compiles its kernel from a
// KernelContext (the node, its descriptors, the plan's decisions) and says what scratch
// memory it needs; the memory planner places that next. The steps of a sharded update get
// their sharded kernels too (sharded_update.hpp).
#include <set>

#include "ngraph/runtime/cpu/plan.hpp"
#include "ngraph/runtime/cpu/sharded_update.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

void select_kernels(ExecutionPlan& plan) {
  std::set<std::pair<const Node*, size_t>> read;  // the outputs some op or result reads
  for (const auto& n : plan.function->get_ordered_ops())
    for (const auto& v : n->input_values()) read.insert({v.get_node(), v.get_index()});
  for (auto& step : plan.steps) {
    const Node& node = *step.node;
    const KernelBuilder* builder = KernelRegistry::get().find(node.get_type_name());
    if (!builder)
      throw ngraph_error("[CPU] no kernel for op " + node.get_type_name() + " (node " +
                         node.get_name() + ")");
    std::vector<const TensorDesc*> in, out;
    for (const auto& v : node.input_values()) in.push_back(&plan.desc(v));
    for (size_t o = 0; o < node.get_output_size(); ++o)
      out.push_back(&plan.desc(step.node->output(o)));
    KernelContext ctx(node, std::move(in), std::move(out), *plan.call_state, step.overlap);
    ctx.collective = step.buffers;
    for (size_t o = 0; o < node.get_output_size(); ++o) ctx.read.push_back(read.count({&node, o}) > 0);
    step.kernel = (*builder)(ctx);
    step.scratch_bytes = ctx.scratch_bytes();
  }
  select_sharded_kernels(plan);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
