// The execution plan: what the CPU compiler decides about a function, filled in by named
// passes (one file each under pass/, run in the order pass/pipeline.cpp lists). The plan owns
// every decision: the schedule, a TensorDesc per value, which values results and variable
// updates are written into, in-place updates, which collectives overlap with computation and
// how their buffers are laid out, shared memory, the kernels with their scratch needs, and the
// arena offsets. Nothing is written onto nodes; the executable only materialises the plan.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ngraph/distributed/call.hpp"
#include "ngraph/function.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/tensor_desc.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

struct CompileOptions {
  bool optimize = true;  // run DeadNodeElimination, CSE and ConstantFolding first
  // Form fused CPU kernels (matmul + bias + ReLU, transposes as strides). Default: on, unless
  // the environment sets NGRAPH_CPU_FUSION=0 (for comparisons).
  bool fuse = default_fuse();
  // Keep f32 variables in the layout their first reader wants (a convolution's blocked
  // weights) between calls. Default: on, unless NGRAPH_CPU_VARIABLE_LAYOUTS=0.
  bool variable_layouts = default_variable_layouts();
  // bf16: a value's two casts (a convolution's weights, forward and backward-data layouts)
  // made in one pass (pass/cast_pairs.cpp). Default: on, unless NGRAPH_CPU_CAST_PAIRS=0.
  bool cast_pairs = default_cast_pairs();
  // bf16: mixed precision (pass/mixed_precision.cpp) where the CPU has bf16 instructions.
  // Default: NGRAPH_PRECISION.
  Precision precision = default_precision();
  static bool default_fuse();
  static bool default_variable_layouts();
  static bool default_cast_pairs();
};

// Where an intermediate buffer lives in the arena, and when it is alive (step indices).
struct BufferAssignment {
  std::string tensor;  // "Node_3:0", or "Node_3:scratch0"
  size_t offset = 0;
  size_t size = 0;
  size_t first_step = 0;
  size_t last_step = 0;
};

// One compute node of the schedule (structural ops have none).
struct PlannedStep {
  std::shared_ptr<Node> node;
  bool overlap = false;               // an asynchronous collective, waited for later
  std::vector<size_t> waits_before;   // asynchronous steps to complete before this one
  // A fused allreduce: where its buffers are (contiguous, in shared memory).
  CollectiveBuffers buffers;
  Kernel kernel;
  // Part of a sharded update (ShardedUpdate): the kernel the step runs in calls that run the
  // update sharded (a fused allreduce that only arrives, an update that sums its piece).
  Kernel sharded_kernel;
  std::vector<size_t> scratch_bytes;  // asked for by the kernel builder
  std::vector<size_t> scratch_offset; // arena offsets, from memory planning
};

// The reader index: the steps that read each value, in schedule order. `schedule` builds it
// once it has ordered the steps; no later pass changes a step's inputs (one that did would
// build it again). Passes ask it instead of scanning every step's inputs.
class ReaderIndex {
 public:
  using Steps = std::vector<size_t>;
  static constexpr size_t none = static_cast<size_t>(-1);

  // Indexes every input of every step (the index of a step in `steps`).
  void build(const std::vector<PlannedStep>& steps);
  // The steps that read v, ascending, each once; empty when no step reads it.
  const Steps& of(const Output& v) const;
  // Whether step s reads v.
  bool reads(size_t s, const Output& v) const;
  // Whether a step after step s reads v.
  bool read_after(const Output& v, size_t s) const;
  // The first step after step s that reads v, or `none`.
  size_t first_after(const Output& v, size_t s) const;
  // Every value a step reads, with its readers (ordered by value).
  std::map<Output, Steps>::const_iterator begin() const { return m_readers.begin(); }
  std::map<Output, Steps>::const_iterator end() const { return m_readers.end(); }

 private:
  std::map<Output, Steps> m_readers;
};

// Values laid out end to end (a fused allreduce's inputs, or its outputs), so the collective
// is one operation over one range.
struct ContiguousGroup {
  std::vector<Output> members;
  std::vector<size_t> offsets;  // bytes from the group's start
  size_t bytes = 0;
  int shared_plan = -1;         // index into ExecutionPlan::shared, when planned there
  size_t shared_offset = 0;     // the group's byte offset in that region
};

// The fused allreduce buffers of one communicator placed in memory the node's ranks share
// (`bytes` per rank), and the binding through which the executable hands its kernels the
// region once it is made. A sharded update's variables (ShardedUpdate) live once per node, in
// the region's common memory, at the offsets listed (node_shared, `common` bytes).
struct SharedPlacement {
  std::shared_ptr<distributed::Communicator> comm;
  size_t bytes = 0;
  std::vector<std::pair<VariableState*, size_t>> node_shared;
  size_t common = 0;
  std::shared_ptr<RegionBinding> binding = std::make_shared<RegionBinding>();
};

// A sharded update: variables whose only writers are fused elementwise kernels reading the
// sums of an in-place fused allreduce in shared memory (an optimizer's update). In calls the
// ranks agree to run it so, the allreduce step only arrives (reducing whole just the members
// in `whole`, which other steps read), and local rank l's update steps sum piece l of every
// rank's gradients straight from the slots and update piece l of the weights and optimizer
// state in the common memory, instead of every rank updating all of them.
//
// The allreduce's output group splits into the byte ranges of the members reduced whole
// (`whole_ranges`) and the ranges between them (`sharded_ranges`). The variables lie in the
// common memory in planes: plane k (at planes_at + k * plane_bytes) holds the sharded ranges
// end to end (range j at plane_at[j], 64-byte aligned), each variable an update step writes
// where the sum it reads lies: the weights (variables other steps read) in the first
// `weight_planes` planes, the optimizer state (variables only their update step reads) in the
// planes after them. Across nodes the rank at (node n, local rank l) updates its share
// (SharedRegion::share) of each sharded range in every plane; only the weight planes' shares
// are then gathered between the nodes, and the state's stay with their owners.
struct ShardedUpdate {
  size_t placement = 0;          // index into ExecutionPlan::shared
  size_t allreduce = 0;          // its step
  std::vector<size_t> updates;   // the update steps, in schedule order
  std::vector<size_t> whole;     // the allreduce's members still reduced whole
  std::vector<std::pair<size_t, size_t>> whole_ranges, sharded_ranges;  // (offset, bytes) in the group
  size_t planes_at = 0, plane_bytes = 0, planes = 0, weight_planes = 0;
  std::vector<size_t> plane_at;  // per sharded range
  // The sharded range j that byte `offset` of a plane lies in, or sharded_ranges.size().
  size_t range_in_plane(size_t offset) const {
    for (size_t j = 0; j < plane_at.size(); ++j)
      if (offset >= plane_at[j] && offset < plane_at[j] + sharded_ranges[j].second) return j;
    return plane_at.size();
  }
  // Whether it can run across nodes: f32 sums, each update step reading one sum, and every
  // variable in its plane (otherwise it runs sharded on one node only).
  bool across_nodes = false;
};

struct ExecutionPlan {
  std::shared_ptr<Function> function;  // the compiled copy (passes rewrite it)
  CompileOptions options;
  CallState* call_state = nullptr;     // the executable's, handed to kernel builders

  NodeVector ops;                      // schedule order, structural ops included
  std::vector<PlannedStep> steps;      // compute nodes in schedule order
  ReaderIndex readers;                 // the steps reading each value (built by `schedule`)
  std::map<Output, TensorDesc> descs;  // every value's descriptor
  // The storage layout of each variable the function reads or updates (the executable lays
  // the value out so before a call).
  std::map<VariableState*, TensorDesc> variable_layouts;
  size_t reorders = 0;                 // Reorder nodes the layout pass inserted, less folded ones
  // Mixed precision (bf16): the casts the pass inserted (one per source value), and the casts
  // the layout pass made that convert and re-lay out in one reorder (instead of a Reorder).
  size_t casts = 0;
  size_t fused_casts = 0;
  size_t bf16_values = 0;  // values store_bf16 retyped (bf16 activations)

  // I/O binding: values that kernels write straight into a caller's result buffer or into a
  // variable's next buffer; the rest are copied there after the last step.
  std::map<Output, size_t> result_binding;
  std::map<Output, VariableState*> update_binding;
  std::set<VariableState*> in_place;   // updates written over the variable's own buffer
  std::set<Output> collective_buffers; // fused allreduce inputs and outputs (never bound)

  // Collectives.
  std::vector<ContiguousGroup> groups;
  std::map<Output, size_t> group_of;
  distributed::DistributedCall distributed;  // the collectives the ranks must agree on
  std::vector<SharedPlacement> shared;
  std::vector<ShardedUpdate> sharded;

  // Memory: the last step reading each value, and where arena values live.
  std::map<Output, size_t> last_use;
  std::map<Output, size_t> arena_offset;
  size_t arena_bytes = 0;
  size_t unshared_bytes = 0;
  std::vector<BufferAssignment> assignments;

  const TensorDesc& desc(const Output& v) const;
  bool is_arena_value(const Output& v) const;  // computed, not bound to a result or update
  // Values copied out after the last step: what the results read and what updates take as
  // they are (Assign(y, x) copies x's value into y at the end).
  std::set<Output> read_after_steps() const;
};

namespace pass {
// Graph passes, on the compiled copy of the function.
void optimize_graph(ExecutionPlan& plan);      // ConstantFolding, DeadNodeElimination, CSE
// The fusions (fusions.hpp; each a rewrite of the function, run when fusing).
void fuse_matmul_bias_relu(ExecutionPlan& plan);
void fold_batch_norm_into_convolution(ExecutionPlan& plan);  // then ConstantFolding
void fuse_convolution_bias_relu(ExecutionPlan& plan);
void fuse_convolution_sum_relu(ExecutionPlan& plan);
void fuse_batch_norm_relu(ExecutionPlan& plan);
void fuse_max_pool_workspace(ExecutionPlan& plan);
void fuse_attention_softmax(ExecutionPlan& plan);
void convert_to_bf16(ExecutionPlan& plan);     // mixed precision: bf16 operands of products
void fuse_elementwise(ExecutionPlan& plan);
void fuse_allreduce(ExecutionPlan& plan);
void pass_results_through(ExecutionPlan& plan);  // inner Results, GetOutputElements
void store_bf16(ExecutionPlan& plan);          // mixed precision: bf16 activations
void assign_layouts(ExecutionPlan& plan);      // descriptors; Reorders where layouts differ
void reduce_in_readers_layouts(ExecutionPlan& plan);  // a sum's Reorder moved before its allreduce
void lay_out_constants(ExecutionPlan& plan);   // Reorder(Constant) done once, at compile time
void pair_weight_casts(ExecutionPlan& plan);   // a value's two bf16 casts in one pass
// Plan passes.
void schedule(ExecutionPlan& plan);            // the order steps run in; the reader index
void bind_io(ExecutionPlan& plan);             // results and updates written in place
void plan_in_place_updates(ExecutionPlan& plan);
void place_collectives(ExecutionPlan& plan);   // overlap, waits, contiguous groups, checks
void place_shared_memory(ExecutionPlan& plan); // fused allreduce buffers in shared memory
void select_kernels(ExecutionPlan& plan);      // build each step's kernel (scratch needs)
void plan_memory(ExecutionPlan& plan);         // arena offsets of values and scratch

// Runs every pass above in order on a clone of `function`.
ExecutionPlan build_plan(const std::shared_ptr<Function>& function, const CompileOptions& options,
                         CallState& call_state);
// The pass names, in order (for docs and tests).
const std::vector<std::string>& pipeline_pass_names();
}  // namespace pass

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
