#include "ngraph/runtime/cpu/op/convolution_bias.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

ConvolutionBias::ConvolutionBias(const Output& x, const Output& w, const Output& bias,
                                 const op::ConvolutionWindow& window, bool relu,
                                 const Output& summand)
    : Op<ConvolutionBias>(summand ? OutputVector{x, w, bias, summand} : OutputVector{x, w, bias}),
      m_window(window),
      m_relu(relu) {
  constructor_validate_and_infer_types();
}

void ConvolutionBias::validate_and_infer_types() {
  if (get_input_size() != 3 && get_input_size() != 4) fail("expects 3 or 4 inputs");
  const Shape& data = get_input_shape(0);
  m_window.validate(*this, data.size() < 2 ? 0 : data.size() - 2);
  Shape out = op::convolution_output_shape(*this, data, get_input_shape(1), m_window);
  if (shape_size(get_input_shape(2)) != out[1])
    fail(concat_message("bias ", get_input_shape(2), " does not have ", out[1], " elements"));
  if (has_summand() && get_input_shape(INPUT_SUMMAND) != out)
    fail(concat_message("summand ", get_input_shape(INPUT_SUMMAND), " is not the result's shape ", out));
  // Data and filters may be bf16 (mixed precision): the bias and summand are the output's type.
  element::Type t = accumulation_type(get_input_element_type(0));
  if (get_input_element_type(1) != get_input_element_type(0)) fail_type("element types differ");
  for (size_t i = 2; i < get_input_size(); ++i)
    if (get_input_element_type(i) != t) fail_type("element types differ");
  set_output_type(0, t, out);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
