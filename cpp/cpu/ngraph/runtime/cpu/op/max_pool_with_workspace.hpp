// MaxPoolWithWorkspace and MaxPoolBackpropWithWorkspace: max pooling whose backprop reads the
// forward primitive's workspace instead of running the forward again (paired by
// pass/fuse_max_pool_workspace.cpp; kernels in pooling_kernels.cpp). Backend-internal.
#pragma once

#include "ngraph/node.hpp"
#include "ngraph/ops/pooling.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// MaxPoolWithWorkspace(x): MaxPool(x, ...) whose oneDNN primitive also writes its workspace
// (where each maximum is) as output 1, for MaxPoolBackpropWithWorkspace to read instead of
// running the forward again. Output 1 is typed i32 with the result's shape; its bytes and
// layout are the primitive's (the layout rule gives it the primitive's workspace_desc()).
// Mixed precision (Node::bf16_sets): the data and the result can each be stored in bf16 (our
// loops read and write them; the workspace stays i32).
class MaxPoolWithWorkspace : public Op<MaxPoolWithWorkspace>, public op::PoolingAttributes {
 public:
  static constexpr const char* type_name = "CPUMaxPoolWithWorkspace";
  MaxPoolWithWorkspace() = default;
  explicit MaxPoolWithWorkspace(const op::MaxPool& pool);  // on pool's input
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}, {{}, {0}}}; }
  void visit_attributes(AttributeVisitor& v) override { visit_geometry(v, true); }
};

// MaxPoolBackpropWithWorkspace(arg_forward, delta, workspace): MaxPoolBackprop reading the
// workspace of the MaxPoolWithWorkspace on arg_forward with the same geometry. arg_forward is
// kept as an input (nGraph's MaxPoolWithIndicesBackprop does too): its layout fixes the
// forward primitive, and the loops, for what oneDNN rejects, read it. Mixed precision: arg_forward
// (its layout), delta and the gradient can each be stored in bf16.
class MaxPoolBackpropWithWorkspace : public Op<MaxPoolBackpropWithWorkspace>,
                                     public op::PoolingAttributes {
 public:
  static constexpr const char* type_name = "CPUMaxPoolBackpropWithWorkspace";
  MaxPoolBackpropWithWorkspace() = default;
  MaxPoolBackpropWithWorkspace(const op::MaxPoolBackprop& backprop, const Output& workspace);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}, {{1}, {}}, {{}, {0}}}; }
  void visit_attributes(AttributeVisitor& v) override { visit_geometry(v, false); }
};

// Whether a MaxPool has the oneDNN primitives (f32, forward with a workspace and backward) that
// pairing it with its backprop needs (pooling_kernels.cpp).
bool max_pool_workspace_supported(const Node& max_pool);
// Whether our loops pool `node` (MaxPool, MaxPoolWithWorkspace or its backprop) with bf16
// values: data of rank 3 to 5, a result with cells, and NGRAPH_CPU_POOL=own (the default).
bool max_pool_bf16_supported(const Node& node);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
