#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

FusedAllReduce::FusedAllReduce(const OutputVector& inputs, distributed::ReduceOp reduce_op,
                               std::shared_ptr<distributed::Communicator> comm)
    : Op<FusedAllReduce>(inputs), m_reduce_op(reduce_op) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

FusedAllReduce::FusedAllReduce(const OutputVector& inputs, const std::string& reduce_op,
                               std::shared_ptr<distributed::Communicator> comm)
    : FusedAllReduce(inputs, distributed::reduce_op_from_string(reduce_op), std::move(comm)) {}

void FusedAllReduce::validate_and_infer_types() {
  if (get_input_size() == 0) fail("needs at least one input");
  communicator();
  element::Type t = get_input_element_type(0);
  set_output_size(get_input_size());
  for (size_t i = 0; i < get_input_size(); ++i) {
    if (get_input_element_type(i) != t) fail_type("inputs must share one element type");
    set_output_type(i, t, get_input_shape(i));
  }
  op::check_compression(*this, m_compression, m_error_feedback, t, m_reduce_op);
}

void FusedAllReduce::set_compression(distributed::Wire wire, bool error_feedback) {
  m_compression = wire;
  m_error_feedback = error_feedback;
  validate_and_infer_types();
}

// Written like the AllReduce ops it stands for, so a disagreement between ranks is reported
// in the user's terms.
std::string FusedAllReduce::collective_signature() const {
  std::string t = get_input_element_type(0).get_type_name();
  std::string op = distributed::to_string(m_reduce_op) + op::compression_signature(m_compression, m_error_feedback);
  if (get_input_size() == 1) return "AllReduce " + t + to_braces(get_input_shape(0)) + " " + op;
  std::string s = "AllReduce " + t + " " + op + " of";
  for (size_t i = 0; i < get_input_size(); ++i) s += " " + to_braces(get_input_shape(i));
  return s + " (fused)";
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
