#include "ngraph/runtime/cpu/op/attention_softmax.hpp"

#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

void check_row_op(const Node& node, size_t data, const std::vector<size_t>& same, size_t mask) {
  element::Type t = node.get_input_element_type(data);
  const Shape& shape = node.get_input_shape(data);
  if (t != element::f32 && t != element::f64)
    node.fail_type(concat_message("data must be f32 or f64, got element type ", t));
  if (shape.empty()) node.fail("data must have rank >= 1");
  for (size_t i : same)
    if (node.get_input_shape(i) != shape || node.get_input_element_type(i) != t)
      node.fail(concat_message("input ", i, " must be ", t, shape));
  if (mask < node.get_input_size()) {
    if (node.get_input_element_type(mask) != element::boolean)
      node.fail_type("mask must be boolean");
    if (broadcast_shapes(node, node.get_input_shape(mask), shape, op::AutoBroadcast::numpy) != shape)
      node.fail(concat_message("mask shape ", node.get_input_shape(mask),
                               " does not broadcast to ", shape));
  }
}

OutputVector with_mask(OutputVector args, const Output& mask) {
  if (mask) args.push_back(mask);
  return args;
}

}  // namespace

AttentionSoftmax::AttentionSoftmax(const Output& scores, const Output& mask, double scale)
    : Op<AttentionSoftmax>(with_mask({scores}, mask)), m_scale(scale) {
  constructor_validate_and_infer_types();
}

void AttentionSoftmax::validate_and_infer_types() {
  check_row_op(*this, 0, {}, 1);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

AttentionSoftmaxBackprop::AttentionSoftmaxBackprop(const Output& delta, const Output& y,
                                                   const Output& mask, double scale)
    : Op<AttentionSoftmaxBackprop>(with_mask({delta, y}, mask)), m_scale(scale) {
  constructor_validate_and_infer_types();
}

void AttentionSoftmaxBackprop::validate_and_infer_types() {
  check_row_op(*this, 0, {1}, 2);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
