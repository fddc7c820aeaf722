// I/O binding: a result is written by its kernel straight into the caller's output buffer, and
// a variable update straight into the variable's next buffer, when a kernel computes the value
// and no earlier result or update claimed it. Not the inputs and outputs of fused allreduces:
// those stay in the executable's buffers (laid out end to end, maybe in shared memory) so the
// collective is one operation nothing outside can touch; they are copied out at the end.
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

void bind_io(ExecutionPlan& plan) {
  for (const auto& step : plan.steps)
    if (step.node->get_type_name() == FusedAllReduce::type_name) {
      for (const auto& v : step.node->input_values()) plan.collective_buffers.insert(v);
      for (const auto& v : step.node->outputs()) plan.collective_buffers.insert(v);
    }
  auto claimable = [&](const Output& v) {
    return !is_structural_op(v.get_node()->get_type_name()) && !plan.result_binding.count(v) &&
           !plan.update_binding.count(v) && !plan.collective_buffers.count(v);
  };
  const auto& results = plan.function->get_results();
  for (size_t r = 0; r < results.size(); ++r) {
    Output v = results[r]->input_value(0);
    if (claimable(v)) plan.result_binding[v] = r;
  }
  for (const auto& sink : plan.function->get_sinks())
    if (auto* assign = dynamic_cast<op::Assign*>(sink.get())) {
      Output v = assign->input_value(0);
      if (claimable(v)) plan.update_binding[v] = assign->get_state().get();
    }
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
