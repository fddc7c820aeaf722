#include "ngraph/ops/reduction.hpp"

namespace ngraph {
namespace op {

Softmax::Softmax(const Output& arg, const AxisSet& axes) : Op<Softmax>({arg}), m_axes(axes) {
  constructor_validate_and_infer_types();
}

void Softmax::validate_and_infer_types() {
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::real);
  check_axes(*this, "axes", m_axes, get_input_shape(0));
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

OneHot::OneHot(const Output& arg, const Shape& shape, size_t one_hot_axis)
    : Op<OneHot>({arg}), m_shape(shape), m_axis(one_hot_axis) {
  constructor_validate_and_infer_types();
}

void OneHot::validate_and_infer_types() {
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::numeric);
  if (m_axis >= m_shape.size())
    fail(concat_message("one_hot_axis ", m_axis, " is out of range for result shape ", m_shape));
  Shape expected = m_shape;
  expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(m_axis));
  if (expected != get_input_shape(0))
    fail(concat_message("arg shape ", get_input_shape(0), " does not match result shape ",
                        m_shape, " without one_hot_axis ", m_axis, " (", expected, ")"));
  set_output_type(0, get_input_element_type(0), m_shape);
}

NGRAPH_REGISTER_OP(Sum);
NGRAPH_REGISTER_OP(Product);
NGRAPH_REGISTER_OP(Max);
NGRAPH_REGISTER_OP(Min);
NGRAPH_REGISTER_OP(ArgMax);
NGRAPH_REGISTER_OP(ArgMin);
NGRAPH_REGISTER_OP(Softmax);
NGRAPH_REGISTER_OP(OneHot);

}  // namespace op
}  // namespace ngraph
