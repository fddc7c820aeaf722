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
//
// bf16 activations (store_bf16, after the elementwise fusion): the values between products
// are stored in bf16 where every reader takes bf16 (Node::bf16_sets): a convolution's output
// (and its backprop-data's) read by batch normalization (with its ReLU) and its backprop, the
// fused elementwise loops (the residual Add+ReLU, ReLU's gradient, the sum of gradients), max
// pooling and its backprop (our loops; the workspace stays i32) and the next product's cast,
// which is then removed; in a transformer, a matrix product's output
// (oneDNN's matmul writes bf16) read by Gelu (oneDNN's bf16 eltwise, input and output) and
// GELU's fused gradient, Dropout (its data and its output each), the heads' Reshape, Split
// and Concat (bytes moved as they are), and the column sums of the bias gradients (Sum over
// leading axes: it reads bf16; column_sum_takes). Statistics, gamma and beta and their
// gradients, the loss, the weight gradients, the updates, and every value that leaves the
// graph (results, variables, collectives) stay f32. The kernels read and write bf16 (oneDNN's
// bf16 batch normalization and convolutions; the fused loops convert blocks as they load and
// store them) and compute in f32.
#include <dnnl.hpp>

#include "ngraph/pass/mixed_precision.hpp"
#include "ngraph/ops/batch_norm.hpp"
#include "ngraph/ops/reduction.hpp"
#include "ngraph/runtime/cpu/cpu_features.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/op/max_pool_with_workspace.hpp"
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

// Whether the CPU kernel of `node` reads and writes `set` in bf16 (store_bf16). An op that
// declares a set has a kernel for it (test_mixed_precision.py runs each, and names them),
// except where that kernel is oneDNN's and oneDNN does not take the problem: a product writes
// a bf16 dst only where its operands are bf16 already (cast) and oneDNN computes it; batch
// normalization runs in bf16 on oneDNN only (its loops are f32 and f64), and Gelu on oneDNN's
// eltwise, which runs from dnnl_worthwhile's size. Max pooling stores bf16 where our loops
// pool it (max_pool_bf16_supported), a Sum where it is a column sum (column_sum_takes).
bool bf16_kernel(const Node& node, const Node::Bf16Set&) {
  if (dynamic_cast<const op::BatchNormBase*>(&node))
    return dnnl_rank_ok(node.get_input_shape(op::BatchNormBase::INPUT_DATA)) &&
           shape_size(node.get_input_shape(op::BatchNormBase::INPUT_DATA)) > 0;
  if (!node.bf16_inputs().empty())
    return node.get_input_element_type(0) == element::bf16 && dnnl_takes(node);
  if (node.get_type_name() == std::string("Gelu")) return dnnl_worthwhile(shape_size(node.get_shape()));
  if (dynamic_cast<const op::PoolingAttributes*>(&node)) return max_pool_bf16_supported(node);
  if (auto sum = dynamic_cast<const op::Sum*>(&node))
    return column_sum_takes(node.get_input_shape(0), sum->get_reduction_axes());
  return true;
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

void store_bf16(ExecutionPlan& plan) {
  if (!plan.casts) return;  // f32, or no bf16 instructions
  auto is_cast = [](const Node& n) { return n.get_type_name() == PrecisionCast::type_name; };
  plan.bf16_values = ngraph::pass::store_bf16(*plan.function, bf16_kernel, is_cast);
  plan.casts = 0;  // those left: removed casts are read by nothing
  for (const auto& node : plan.function->get_ordered_ops()) plan.casts += is_cast(*node);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
