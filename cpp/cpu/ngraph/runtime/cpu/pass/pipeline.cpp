// The CPU compiler's passes, in the order they run. Each reads what earlier passes decided
// from the ExecutionPlan and adds its own decisions there.
#include "ngraph/ops/collective.hpp"
#include "ngraph/ops/parameter.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
struct NamedPass {
  const char* name;
  void (*run)(ExecutionPlan&);
};

const std::vector<NamedPass>& pipeline() {
  static const std::vector<NamedPass> passes{
      {"optimize_graph", optimize_graph},            // graph_optimization.cpp
      // The fusions, one rewrite each in a file of its name (fusions.hpp), in this order: a
      // later one matches what an earlier one formed or left.
      {"fuse_matmul_bias_relu", fuse_matmul_bias_relu},
      {"fold_batch_norm_into_convolution", fold_batch_norm_into_convolution},
      {"fuse_convolution_bias_relu", fuse_convolution_bias_relu},
      {"fuse_convolution_sum_relu", fuse_convolution_sum_relu},
      {"fuse_batch_norm_relu", fuse_batch_norm_relu},
      {"fuse_max_pool_workspace", fuse_max_pool_workspace},
      {"fuse_attention_softmax", fuse_attention_softmax},
      {"convert_to_bf16", convert_to_bf16},          // mixed_precision.cpp
      {"fuse_elementwise", fuse_elementwise},
      {"fuse_allreduce", fuse_allreduce},
      {"pass_results_through", pass_results_through},// schedule.cpp
      {"store_bf16", store_bf16},                    // mixed_precision.cpp
      {"assign_layouts", assign_layouts},            // layout_assignment.cpp
      {"reduce_in_readers_layouts", reduce_in_readers_layouts},  // allreduce_layouts.cpp
      {"lay_out_constants", lay_out_constants},      // constant_layouts.cpp
      {"pair_weight_casts", pair_weight_casts},      // cast_pairs.cpp
      {"schedule", schedule},                        // schedule.cpp
      {"bind_io", bind_io},                          // io_binding.cpp
      {"plan_in_place_updates", plan_in_place_updates},  // in_place_updates.cpp
      {"place_collectives", place_collectives},      // collective_placement.cpp
      {"place_shared_memory", place_shared_memory},  // shared_memory_placement.cpp
      {"select_kernels", select_kernels},            // kernel_selection.cpp
      {"plan_memory", plan_memory},                  // memory_planning.cpp
  };
  return passes;
}
}  // namespace

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : pipeline()) n.push_back(p.name);
    return n;
  }();
  return names;
}

ExecutionPlan build_plan(const std::shared_ptr<Function>& function, const CompileOptions& options,
                         CallState& call_state) {
  ExecutionPlan plan;
  // Passes rewrite nodes in place: work on a copy so the caller's graph is untouched.
  plan.function = function->clone();
  op::use_private_communicators(*plan.function);  // collective when the graph has collectives
  plan.options = options;
  plan.call_state = &call_state;
  for (const auto& p : pipeline()) p.run(plan);
  return plan;
}

}  // namespace pass

const TensorDesc& ExecutionPlan::desc(const Output& v) const {
  auto it = descs.find(v);
  if (it == descs.end())
    throw ngraph_error("[CPU] internal: no descriptor for " + v.get_node()->get_name() + ":" +
                       std::to_string(v.get_index()));
  return it->second;
}

bool ExecutionPlan::is_arena_value(const Output& v) const {
  return !is_structural_op(v.get_node()->get_type_name()) && !result_binding.count(v) &&
         !update_binding.count(v);
}

std::set<Output> ExecutionPlan::read_after_steps() const {
  std::set<Output> out;
  for (const auto& r : function->get_results()) out.insert(r->input_value(0));
  for (const auto& sink : function->get_sinks())
    for (const auto& v : sink->input_values()) out.insert(v);
  return out;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
