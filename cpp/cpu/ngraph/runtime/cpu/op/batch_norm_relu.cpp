#include "ngraph/runtime/cpu/op/batch_norm_relu.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

BatchNormRelu::BatchNormRelu(const Node& bn, bool mask)
    : Op<BatchNormRelu>(bn.input_values()),
      BatchNormBase(dynamic_cast<const BatchNormBase&>(bn).get_eps_value()),
      m_training(bn.get_type_name() == op::BatchNormTraining::type_name),
      m_mask(mask) {
  constructor_validate_and_infer_types();
}

void BatchNormRelu::validate_and_infer_types() {
  check_inputs(*this, m_training ? 3 : 5);
  if (m_mask && !m_training) fail("a ReLU mask output needs the training form");
  const Shape& data = get_input_shape(INPUT_DATA);
  element::Type t = get_input_compute_type(INPUT_DATA);
  set_output_size(m_training ? (m_mask ? 4 : 3) : 1);
  set_output_type(0, t, data);
  if (m_training) {
    set_output_type(1, t, Shape{data[1]});
    set_output_type(2, t, Shape{data[1]});
  }
  if (m_mask) set_output_type(OUTPUT_MASK, element::u8, data);
}

BatchNormReluBackprop::BatchNormReluBackprop(const Node& backprop, const Output& delta,
                                             const Output& mask)
    : Op<BatchNormReluBackprop>({backprop.input_value(INPUT_GAMMA), backprop.input_value(INPUT_BETA),
                                 backprop.input_value(INPUT_DATA), backprop.input_value(INPUT_MEAN),
                                 backprop.input_value(INPUT_VARIANCE), delta, mask}),
      BatchNormBase(dynamic_cast<const BatchNormBase&>(backprop).get_eps_value()) {
  constructor_validate_and_infer_types();
}

void BatchNormReluBackprop::validate_and_infer_types() {
  check_input_count(7);
  check_inputs(*this, 6);
  const Shape& in = get_input_shape(INPUT_DATA);
  if (get_input_element_type(INPUT_MASK) != element::u8 || get_input_shape(INPUT_MASK) != in)
    fail(concat_message("mask must be u8 of the input's shape ", in, ", got ",
                        get_input_element_type(INPUT_MASK), get_input_shape(INPUT_MASK)));
  element::Type t = get_input_compute_type(INPUT_DATA);
  set_output_size(3);
  set_output_type(0, t, in);
  set_output_type(1, t, Shape{in[1]});
  set_output_type(2, t, Shape{in[1]});
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
