// The sharded update (ExecutionPlan::sharded): its planning and its two step kinds. In a call
// the ranks agree to run sharded (see the executable), the executable runs the sharded step
// list, in which the update's fused allreduce step is a sharded arrive and each update step a
// sharded update; the plain list runs the same steps as an allreduce and whole updates.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace pass {
// Plans a sharded update on fused allreduce step s (reducing in place in placement p's region)
// when the update steps reading its sums qualify: those steps only write in-place updates of
// variables that nothing else reads or writes (an optimizer's step), from inputs that are the
// sums, the variables themselves, scalars or constants, all of one size. Records it in
// plan.sharded, with the variables laid out in the placement's common memory, and returns
// true; returns false (planning nothing) when no update step qualifies.
bool plan_sharded_update(ExecutionPlan& plan, size_t s, size_t p);
// Builds the sharded kernels of the steps of plan.sharded (part of kernel selection).
void select_sharded_kernels(ExecutionPlan& plan);
}  // namespace pass

// A sharded arrive: the fused allreduce's step in a sharded call. Every rank's gradients are
// in its slot: on one node it arrives (the update kernels then read them) and reduces whole
// only the byte ranges `whole` of the group (`elements` in all) at byte `at` of the slot
// (members other steps read whole); across nodes it reduce-scatters each of the `sharded`
// byte ranges (SharedRegion::reduce_scatter) and allreduces the `whole` ones. With a 16-bit
// `wire` both are the compressed ones between nodes (with `error_feedback`, carrying the
// binding's residuals of each range, RegionBinding::residual).
Kernel sharded_arrive_kernel(std::shared_ptr<const RegionBinding> binding, size_t at, size_t elements,
                             std::vector<std::pair<size_t, size_t>> whole,
                             std::vector<std::pair<size_t, size_t>> sharded, element::Type type,
                             distributed::ReduceOp op, distributed::Wire wire = distributed::Wire::f32,
                             bool error_feedback = false);

// A sharded update: a fused elementwise update step in a sharded call. On one node it runs its
// program over this rank's piece (SharedRegion::piece) only, reading each input of `summed` as
// the sum, in rank order, of every rank's slot at byte `offset` (scaled by 1/ranks for a mean):
// bitwise what SharedRegion::allreduce would have written there. Across nodes it runs over the
// part of its one summed input that lies in this rank's share of its sharded range (`range_bytes`
// at byte `range_at` of the slot), reading the sum SharedRegion::reduce_scatter left there.
struct SummedInput {
  size_t input;
  size_t offset;
};
Kernel sharded_update_kernel(KernelContext& ctx, std::shared_ptr<const RegionBinding> binding,
                             std::vector<SummedInput> summed, bool mean, size_t range_at, size_t range_bytes);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
