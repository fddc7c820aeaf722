// FusedAllReduce: several AllReduces as one collective (formed by pass/fuse_allreduce.cpp;
// kernel in collective_kernels.cpp). Backend-internal.
#pragma once

#include <memory>
#include <string>

#include "ngraph/node.hpp"
#include "ngraph/ops/collective.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// FusedAllReduce(g1, ..., gk): the AllReduce (sum or mean) of several tensors as one
// collective over their bytes laid end to end: one message instead of k (gradient fusion, as
// Horovod's fusion buffer and DDP's buckets). Its kernel only starts the collective; the
// executable waits for it before the first step that reads its outputs, so the rest of the
// backward pass runs meanwhile. The planner lays the inputs and the outputs out contiguously,
// so nothing is copied.
class FusedAllReduce : public Op<FusedAllReduce>, public op::Collective {
 public:
  static constexpr const char* type_name = "CPUFusedAllReduce";
  FusedAllReduce() = default;
  FusedAllReduce(const OutputVector& inputs, distributed::ReduceOp reduce_op,
                 std::shared_ptr<distributed::Communicator> comm);
  // reduce_op by name ("sum" or "mean").
  FusedAllReduce(const OutputVector& inputs, const std::string& reduce_op,
                 std::shared_ptr<distributed::Communicator> comm);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on_enum("reduce_op", m_reduce_op, distributed::reduce_op_from_string);
    v.on_enum("compression", m_compression, distributed::wire_from_string);
    v.on("error_feedback", m_error_feedback);
  }
  bool is_pure() const override { return false; }
  std::string collective_signature() const override;
  distributed::ReduceOp get_reduce_op() const { return m_reduce_op; }
  // The AllReduces' compression (a bucket holds AllReduces of one compression).
  distributed::Wire get_compression() const { return m_compression; }
  bool get_error_feedback() const { return m_error_feedback; }
  void set_compression(distributed::Wire wire, bool error_feedback);

 private:
  distributed::ReduceOp m_reduce_op = distributed::ReduceOp::sum;
  distributed::Wire m_compression = distributed::Wire::f32;
  bool m_error_feedback = false;
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
