// Batch normalization: oneDNN's batch_normalization primitives for f32 and bf16 data (bf16
// activations under mixed precision: src, dst, diff_dst and diff_src in bf16, the statistics,
// scale, shift and their gradients f32) (forward training with
// its statistics as outputs, forward inference with given statistics, backward with the
// gradients of gamma and beta), reference loops for f64 and wherever oneDNN has no
// implementation (ranks above 5, empty inputs).
//
// gamma and beta are bound as the primitive's separate scale and shift (the use_scale and
// use_shift flags of oneDNN 2.3+, DNNL_ARG_SCALE/SHIFT and DNNL_ARG_DIFF_SCALE/SHIFT), so they
// are read and written where the plan put them: no packing into a [2, C] scale_shift tensor.
//
// BatchNormRelu with a mask output writes the primitive's workspace there (fuse_norm_relu's
// ReLU mask), and BatchNormReluBackprop hands it to the backward primitive with the same flag,
// which applies ReLU's gradient to delta as it reads it. The reference loops write and read one
// byte per element instead; a plain mask means the loops made it. One difference from the
// unfused Select(y > 0, delta, 0): where a normalized value is NaN (its whole channel is then
// NaN, and so are d_input and d_gamma either way), oneDNN's implementations for plain layouts
// mark it positive, so d_beta sums delta there instead of skipping it.
//
// Layouts: oneDNN's batch normalization has no format_tag::any (it follows its data's layout),
// so the layout rule keeps the layout the data is produced in (e.g. a convolution's nChw8c),
// and gives the normalized output (d_input for the backprop, which also reads delta in it) that
// layout, when a non-reference oneDNN implementation takes it; otherwise everything is plain
// and the layout pass reorders blocked producers.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/op/batch_norm_relu.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

using BN = op::BatchNormBase;
using bn_forward = dnnl::batch_normalization_forward;
using bn_backward = dnnl::batch_normalization_backward;

const BN& batch_norm(const Node& node) { return dynamic_cast<const BN&>(node); }

// Forward ops: BatchNormTraining, BatchNormInference, and BatchNormRelu (either, then ReLU).
bool is_training(const Node& node) {
  if (auto* fused = dynamic_cast<const BatchNormRelu*>(&node)) return fused->is_training();
  return node.get_type_name() == op::BatchNormTraining::type_name;
}
bool has_relu(const Node& node) { return node.get_type_name() == BatchNormRelu::type_name; }
bool has_mask(const Node& node) {
  auto* fused = dynamic_cast<const BatchNormRelu*>(&node);
  return fused && fused->has_mask();
}
bool is_relu_backprop(const Node& node) { return node.get_type_name() == BatchNormReluBackprop::type_name; }
bool is_backprop(const Node& node) {
  return is_relu_backprop(node) || node.get_type_name() == op::BatchNormTrainingBackprop::type_name;
}

// ------------------------------------------------------------------------------- oneDNN

dnnl::normalization_flags bn_flags(bool global_stats, bool relu = false) {
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  return global_stats ? flags | dnnl::normalization_flags::use_global_stats : flags;
}

// The forward primitive on data laid out as `data` (training: statistics computed and
// returned; inference: given; ReLU fused when asked), or nothing when oneDNN has no
// implementation for it.
std::optional<bn_forward::primitive_desc> forward_pd(const dnnl::memory::desc& data, double eps,
                                                     bool training, bool relu = false) {
  try {
    auto prop = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    bn_forward::desc d(prop, data, static_cast<float>(eps), bn_flags(!training, relu));
    return bn_forward::primitive_desc(d, dnnl_attr(), dnnl_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// The backward primitive (prop_kind::backward: d_input through the batch statistics, and the
// gradients of scale and shift), delta and d_input laid out as the data; with `relu`, delta is
// masked by the forward's workspace.
std::optional<bn_backward::primitive_desc> backward_pd(const dnnl::memory::desc& data, double eps,
                                                       bool relu = false) {
  auto hint = forward_pd(data, eps, true, relu);
  if (!hint) return std::nullopt;
  try {
    bn_backward::desc d(dnnl::prop_kind::backward, data, data, static_cast<float>(eps),
                        bn_flags(false, relu));
    return bn_backward::primitive_desc(d, dnnl_attr(), dnnl_engine(), *hint);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// Whether oneDNN runs `node` on f32 data laid out as `data`; `fast_only` refuses its
// reference implementation (used to decide whether a blocked layout is worth keeping).
// BatchNormReluBackprop decides as its forward does (its mask is in the layout the forward's
// primitive wrote), given oneDNN has the backward too.
bool dnnl_runs(const Node& node, const TensorDesc& data, bool fast_only) {
  bool real = data.type() == element::f32 || data.type() == element::bf16;
  if (!real || !dnnl_rank_ok(data.shape())) return false;
  double eps = batch_norm(node).get_eps_value();
  std::string impl;
  const std::string& type = node.get_type_name();
  if (type == op::BatchNormTrainingBackprop::type_name) {
    auto pd = backward_pd(data.dnnl_desc(), eps);
    if (!pd) return false;
    impl = pd->impl_info_str();
  } else if (is_relu_backprop(node)) {
    auto fwd = forward_pd(data.dnnl_desc(), eps, true, true);
    if (!fwd || !backward_pd(data.dnnl_desc(), eps, true)) return false;
    impl = fwd->impl_info_str();
  } else {
    auto pd = forward_pd(data.dnnl_desc(), eps, is_training(node), has_relu(node));
    if (!pd) return false;
    // A mask is for BatchNormReluBackprop, which decides as this does only if oneDNN has the
    // backward too.
    if (has_mask(node) && !backward_pd(data.dnnl_desc(), eps, true)) return false;
    impl = pd->impl_info_str();
  }
  return !fast_only || impl.find("ref") == std::string::npos;
}

// The ReLU mask a BatchNormRelu's primitive writes on data laid out as `data`, or nothing where
// the loops run (they write one byte per element, plain).
std::optional<dnnl::memory::desc> mask_desc(const Node& node, const TensorDesc& data) {
  if (!dnnl_runs(node, data, false)) return std::nullopt;
  return forward_pd(data.dnnl_desc(), batch_norm(node).get_eps_value(), true, true)->workspace_desc();
}

void batch_norm_layout(LayoutContext& lc) {
  const Node& node = lc.node;
  const TensorDesc& data = lc.produced[BN::INPUT_DATA];
  // A mask is read as its forward wrote it.
  if (is_relu_backprop(node))
    lc.wanted[BatchNormReluBackprop::INPUT_MASK] = lc.produced[BatchNormReluBackprop::INPUT_MASK];
  bool keep = !data.is_plain() && dnnl_runs(node, data, true);
  if (keep) {
    lc.wanted[BN::INPUT_DATA] = data;
    lc.outputs[0] = data;
    if (is_backprop(node)) lc.wanted[BN::INPUT_DELTA] = data;
  }
  if (has_mask(node)) {
    TensorDesc seen = keep ? data : TensorDesc::plain(data.type(), data.shape());
    if (auto ws = mask_desc(node, seen))
      lc.outputs[BatchNormRelu::OUTPUT_MASK] = TensorDesc::with_layout(element::u8, data.shape(), *ws);
  }
}

// The mask input of a BatchNormReluBackprop that oneDNN runs is the workspace its forward
// primitive writes on the same data layout, which is the one `ws` the backward primitive (made
// with that forward as its hint) reads.
void check_mask(const KernelContext& ctx, const dnnl::memory::desc& ws) {
  const TensorDesc& mask = ctx.input(BatchNormReluBackprop::INPUT_MASK);
  if (mask.is_plain() || mask.md() != ws)
    throw ngraph_error("[CPU] internal: the ReLU mask of " + ctx.node.get_name() +
                       " is not the workspace its forward primitive writes on " +
                       ctx.input(BN::INPUT_DATA).to_string());
}

Kernel dnnl_forward(KernelContext& ctx, bool training, bool relu) {
  const TensorDesc& data = ctx.input(BN::INPUT_DATA);
  auto pd = *forward_pd(data.dnnl_desc(), batch_norm(ctx.node).get_eps_value(), training, relu);
  std::vector<DnnlArg> args{{DNNL_ARG_SRC, pd.src_desc(), true, BN::INPUT_DATA},
                            {DNNL_ARG_SCALE, pd.weights_desc(), true, BN::INPUT_GAMMA},
                            {DNNL_ARG_SHIFT, pd.weights_desc(), true, BN::INPUT_BETA},
                            {DNNL_ARG_DST, pd.dst_desc(), false, 0}};
  // Statistics: outputs 1 and 2 in training, inputs (mean, variance) in inference.
  args.push_back({DNNL_ARG_MEAN, pd.mean_desc(), !training, training ? size_t{1} : BN::INPUT_MEAN});
  args.push_back({DNNL_ARG_VARIANCE, pd.variance_desc(), !training,
                  training ? size_t{2} : BN::INPUT_VARIANCE});
  // Training with a fused ReLU also writes the ReLU's mask: output 3 where BatchNormReluBackprop
  // reads it, else scratch.
  if (auto ws = pd.workspace_desc(); ws.get_size()) {
    if (has_mask(ctx.node)) {
      const TensorDesc& out = ctx.output(BatchNormRelu::OUTPUT_MASK);
      if (out.is_plain() || out.md() != ws)
        throw ngraph_error("[CPU] internal: the mask output of " + ctx.node.get_name() +
                           " is not laid out as its primitive's workspace");
      args.push_back({DNNL_ARG_WORKSPACE, ws, false, BatchNormRelu::OUTPUT_MASK});
    } else {
      args.push_back({DNNL_ARG_WORKSPACE, ws, false, ctx.scratch(ws.get_size())});
    }
  }
  return dnnl_kernel(ctx, bn_forward(pd), pd.scratchpad_desc(), args);
}

Kernel dnnl_backprop(KernelContext& ctx) {
  const TensorDesc& data = ctx.input(BN::INPUT_DATA);
  double eps = batch_norm(ctx.node).get_eps_value();
  bool relu = is_relu_backprop(ctx.node);
  auto pd = *backward_pd(data.dnnl_desc(), eps, relu);
  std::vector<DnnlArg> args{{DNNL_ARG_SRC, pd.src_desc(), true, BN::INPUT_DATA},
                      {DNNL_ARG_MEAN, pd.mean_desc(), true, BN::INPUT_MEAN},
                      {DNNL_ARG_VARIANCE, pd.variance_desc(), true, BN::INPUT_VARIANCE},
                      {DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), true, BN::INPUT_DELTA},
                      {DNNL_ARG_SCALE, pd.weights_desc(), true, BN::INPUT_GAMMA},
                      {DNNL_ARG_SHIFT, pd.weights_desc(), true, BN::INPUT_BETA},
                      {DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), false, 0},
                      {DNNL_ARG_DIFF_SCALE, pd.diff_weights_desc(), false, 1},
                      {DNNL_ARG_DIFF_SHIFT, pd.diff_weights_desc(), false, 2}};
  if (relu) {
    check_mask(ctx, pd.workspace_desc());
    args.push_back({DNNL_ARG_WORKSPACE, pd.workspace_desc(), true, BatchNormReluBackprop::INPUT_MASK});
  }
  return dnnl_kernel(ctx, bn_backward(pd), pd.scratchpad_desc(), args);
}

// ---------------------------------------------------------------------- reference loops

// Plain data [N, C, rest...] seen as N x C x S; element (n, c, s) is at (n * C + c) * S + s.
struct Geometry {
  size_t n = 0, c = 0, s = 0;
  explicit Geometry(const Shape& shape) : n(shape[0]), c(shape[1]), s(1) {
    for (size_t i = 2; i < shape.size(); ++i) s *= shape[i];
  }
  size_t count() const { return n * s; }  // elements per channel
  template <typename F>
  void for_channel(size_t ch, F&& f) const {  // f(flat index) over channel ch
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0, base = (i * c + ch) * s; j < s; ++j) f(base + j);
  }
};

// The mean and biased variance of channel ch (two passes, in double); NaN when it is empty.
template <typename T>
std::pair<double, double> channel_stats(const T* x, const Geometry& g, size_t ch) {
  double m = static_cast<double>(g.count()), sum = 0, sq = 0;
  g.for_channel(ch, [&](size_t k) { sum += x[k]; });
  double mean = sum / m;
  g.for_channel(ch, [&](size_t k) { sq += (x[k] - mean) * (x[k] - mean); });
  return {mean, sq / m};
}

// y = (x - mean) * gamma / sqrt(var + eps) + beta, then max(y, 0) with `relu` (NaN stays NaN);
// with `mask`, 1 where y > 0 and 0 elsewhere (where ReLU's gradient passes delta).
template <typename T>
void normalize(const T* x, T* y, std::uint8_t* mask, const Geometry& g, size_t ch, double mean,
               double var, double gamma, double beta, double eps, bool relu) {
  double scale = gamma / std::sqrt(var + eps);
  g.for_channel(ch, [&](size_t k) {
    double v = (x[k] - mean) * scale + beta;
    y[k] = static_cast<T>(relu && v < 0 ? 0.0 : v);
    if (mask) mask[k] = y[k] > 0;
  });
}

template <typename T>
Kernel forward_loop(const Geometry& g, double eps, bool training, bool relu, bool with_mask) {
  return [g, eps, training, relu, with_mask](const void* const* in, void* const* out) {
    const T* gamma = static_cast<const T*>(in[BN::INPUT_GAMMA]);
    const T* beta = static_cast<const T*>(in[BN::INPUT_BETA]);
    const T* x = static_cast<const T*>(in[BN::INPUT_DATA]);
    T* y = static_cast<T*>(out[0]);
    auto* mask = with_mask ? static_cast<std::uint8_t*>(out[BatchNormRelu::OUTPUT_MASK]) : nullptr;
    for (size_t ch = 0; ch < g.c; ++ch) {
      double mean, var;
      if (training) {
        std::tie(mean, var) = channel_stats(x, g, ch);
        static_cast<T*>(out[1])[ch] = static_cast<T>(mean);
        static_cast<T*>(out[2])[ch] = static_cast<T>(var);
      } else {
        mean = static_cast<const T*>(in[BN::INPUT_MEAN])[ch];
        var = static_cast<const T*>(in[BN::INPUT_VARIANCE])[ch];
      }
      normalize(x, y, mask, g, ch, mean, var, gamma[ch], beta[ch], eps, relu);
    }
  };
}

// With s = 1 / sqrt(var + eps) and xhat = (x - mean) s: d_beta = sum(dy), d_gamma =
// sum(dy xhat), d_input = gamma s (dy - d_beta / M - xhat d_gamma / M). With `with_mask`
// (BatchNormReluBackprop), dy is delta where the mask is 1 and 0 elsewhere.
template <typename T>
Kernel backprop_loop(const Geometry& g, double eps, bool with_mask) {
  return [g, eps, with_mask](const void* const* in, void* const* out) {
    const T* gamma = static_cast<const T*>(in[BN::INPUT_GAMMA]);
    const T* x = static_cast<const T*>(in[BN::INPUT_DATA]);
    const T* mean = static_cast<const T*>(in[BN::INPUT_MEAN]);
    const T* var = static_cast<const T*>(in[BN::INPUT_VARIANCE]);
    const T* delta = static_cast<const T*>(in[BN::INPUT_DELTA]);
    const auto* mask =
        with_mask ? static_cast<const std::uint8_t*>(in[BatchNormReluBackprop::INPUT_MASK]) : nullptr;
    auto dy = [&](size_t k) { return mask && !mask[k] ? 0.0 : static_cast<double>(delta[k]); };
    T* dx = static_cast<T*>(out[0]);
    double m = static_cast<double>(g.count());
    for (size_t ch = 0; ch < g.c; ++ch) {
      double s = 1 / std::sqrt(static_cast<double>(var[ch]) + eps), mu = mean[ch];
      double dbeta = 0, dgamma = 0;
      g.for_channel(ch, [&](size_t k) {
        dbeta += dy(k);
        dgamma += dy(k) * (x[k] - mu) * s;
      });
      double gs = gamma[ch] * s;
      g.for_channel(ch, [&](size_t k) {
        dx[k] = static_cast<T>(gs * (dy(k) - dbeta / m - (x[k] - mu) * s * dgamma / m));
      });
      static_cast<T*>(out[1])[ch] = static_cast<T>(dgamma);
      static_cast<T*>(out[2])[ch] = static_cast<T>(dbeta);
    }
  };
}

// f32 or f64 (the op's rule allows nothing else).
template <typename F>
Kernel dispatch_real(const Node& node, F&& f) {
  element::Type t = node.get_input_element_type(BN::INPUT_DATA);
  if (t == element::f32) return f(float{});
  if (t == element::f64) return f(double{});
  node.fail_type("CPU kernel needs f32 or f64, got " + t.get_type_name());
}

Kernel forward_kernel(KernelContext& ctx) {
  const TensorDesc& data = ctx.input(BN::INPUT_DATA);
  bool training = is_training(ctx.node), relu = has_relu(ctx.node);
  if (dnnl_runs(ctx.node, data, false)) return dnnl_forward(ctx, training, relu);
  // The loops write one byte per element of the mask, which the layout rule then left plain.
  if (has_mask(ctx.node) && !ctx.output(BatchNormRelu::OUTPUT_MASK).is_plain())
    throw ngraph_error("[CPU] internal: " + ctx.node.get_name() +
                       " would write a mask of one byte per element into a oneDNN workspace");
  double eps = batch_norm(ctx.node).get_eps_value();
  Geometry g(data.shape());
  return dispatch_real(ctx.node, [&](auto tag) {
    return forward_loop<decltype(tag)>(g, eps, training, relu, has_mask(ctx.node));
  });
}

NGRAPH_CPU_KERNEL(op::BatchNormTraining::type_name, forward_kernel, batch_norm_layout);
NGRAPH_CPU_KERNEL(op::BatchNormInference::type_name, forward_kernel, batch_norm_layout);
NGRAPH_CPU_KERNEL(BatchNormRelu::type_name, forward_kernel, batch_norm_layout);

// BatchNormTrainingBackprop, BatchNormReluBackprop. The latter runs the loops exactly when its
// mask is plain (its forward ran them); dnnl_backprop checks the mask is the workspace.
Kernel backprop_kernel(KernelContext& ctx) {
  const TensorDesc& data = ctx.input(BN::INPUT_DATA);
  bool relu = is_relu_backprop(ctx.node);
  bool loop_mask = relu && ctx.input(BatchNormReluBackprop::INPUT_MASK).is_plain();
  if (!loop_mask && dnnl_runs(ctx.node, data, false)) return dnnl_backprop(ctx);
  double eps = batch_norm(ctx.node).get_eps_value();
  Geometry g(data.shape());
  if (relu && !loop_mask)
    throw ngraph_error("[CPU] internal: " + ctx.node.get_name() +
                       " reads a oneDNN workspace as its ReLU mask but oneDNN does not run it on " +
                       data.to_string());
  if (!data.is_plain())
    throw ngraph_error("[CPU] internal: " + ctx.node.get_name() + " would loop over " + data.to_string());
  return dispatch_real(ctx.node, [&](auto tag) { return backprop_loop<decltype(tag)>(g, eps, relu); });
}

NGRAPH_CPU_KERNEL(op::BatchNormTrainingBackprop::type_name, backprop_kernel, batch_norm_layout);
NGRAPH_CPU_KERNEL(BatchNormReluBackprop::type_name, backprop_kernel, batch_norm_layout);

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
