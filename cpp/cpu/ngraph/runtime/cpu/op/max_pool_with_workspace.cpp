#include "ngraph/runtime/cpu/op/max_pool_with_workspace.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

MaxPoolWithWorkspace::MaxPoolWithWorkspace(const op::MaxPool& pool)
    : Op<MaxPoolWithWorkspace>({pool.input_value(0)}), op::PoolingAttributes(pool) {
  constructor_validate_and_infer_types();
}

void MaxPoolWithWorkspace::validate_and_infer_types() {
  check_input_count(1);
  Shape out = op::infer_pooling_shape(*this, get_input_shape(0), *this, false);
  set_output_size(2);
  set_output_type(0, get_input_compute_type(0), out);
  set_output_type(1, element::i32, out);
}

MaxPoolBackpropWithWorkspace::MaxPoolBackpropWithWorkspace(const op::MaxPoolBackprop& backprop,
                                                           const Output& workspace)
    : Op<MaxPoolBackpropWithWorkspace>(
          {backprop.input_value(0), backprop.input_value(1), workspace}),
      op::PoolingAttributes(backprop) {
  constructor_validate_and_infer_types();
}

void MaxPoolBackpropWithWorkspace::validate_and_infer_types() {
  check_input_count(3);
  const Shape& arg = get_input_shape(0);
  Shape out = op::infer_pooling_shape(*this, arg, *this, false);
  if (get_input_shape(1) != out || get_input_shape(2) != out)
    fail(concat_message("delta shape ", get_input_shape(1), " and workspace shape ",
                        get_input_shape(2), " must be the pooling result shape ", out));
  set_output_type(0, get_input_compute_type(0), arg);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
