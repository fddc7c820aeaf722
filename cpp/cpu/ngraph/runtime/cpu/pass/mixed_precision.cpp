// Mixed precision (CompileOptions::precision == bf16): the f32 operands of the products oneDNN
// computes (convolutions and their two backprops, Dot, MatMul, and the fused ConvolutionBias
// and MatMulBias) are read as bf16 through a PrecisionCast, one per source value, shared by
// every reader: an activation read by a forward convolution and by its filter gradient is
// stored once, in bf16. The products accumulate in f32 and give f32, so everything else
// (reductions, softmax, normalisation statistics, the loss, elementwise ops, the gradients of
// the weights, collectives, variables and their update) stays f32.
//
// It runs after the fusions, which match the f32 graph as built, and before the layout pass,
// which keeps a cast in its input's layout or makes it convert and re-lay out in one reorder.
// Without bf16 instructions (cpu_features.hpp) it inserts nothing and says so once.
#include <dnnl.hpp>

#include "ngraph/pass/mixed_precision.hpp"
#include "ngraph/runtime/cpu/cpu_features.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {
// Whether oneDNN computes the product (the loops that compute the others refuse bf16).
bool dnnl_takes(const Node& node) {
  for (const auto& in : node.input_values())
    if (in.get_shape().size() > DNNL_MAX_NDIMS || shape_size(in.get_shape()) == 0) return false;
  if (shape_size(node.get_shape()) == 0) return false;
  const std::string& t = node.get_type_name();
  bool conv = t.find("Convolution") != std::string::npos;
  return !conv || dnnl_takes_convolution(node);
}
}  // namespace

void convert_to_bf16(ExecutionPlan& plan) {
  if (plan.options.precision != Precision::bf16) return;
  if (!bf16_native()) {
    bf16_fallback_notice();
    return;
  }
  auto casts = ngraph::pass::insert_bf16_casts(
      *plan.function, dnnl_takes,
      [](const Output& v) { return std::make_shared<PrecisionCast>(v, element::bf16); });
  plan.casts = casts.size();
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
