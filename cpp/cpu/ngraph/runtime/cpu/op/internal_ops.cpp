#include "ngraph/runtime/cpu/op/internal_ops.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

const std::vector<std::string>& internal_op_names() {
  static const std::vector<std::string> names{MatMulBias::type_name, FusedElementwise::type_name,
                                              FusedAllReduce::type_name, Reorder::type_name,
                                              PrecisionCast::type_name,
                                              PrecisionCastPair::type_name,
                                              ConvolutionBias::type_name,
                                              BatchNormRelu::type_name,
                                              BatchNormReluBackprop::type_name,
                                              MaxPoolWithWorkspace::type_name,
                                              MaxPoolBackpropWithWorkspace::type_name,
                                              AttentionSoftmax::type_name,
                                              AttentionSoftmaxBackprop::type_name};
  return names;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
