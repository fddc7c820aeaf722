// Convolution, ConvolutionBackpropData and ConvolutionBackpropFilters. f32 with undilated
// data and non-negative padding runs on oneDNN's convolution primitives, whose layouts the
// primitive chooses (format_tag::any) through the layout pass; everything else (f64, data
// dilation, negative padding) on a reference loop over (output, filter, input) index triples.
// Mixed precision: the two operands in bf16 and the output (and bias, summand) in f32 run on
// oneDNN's bf16 primitives (f32 accumulation); the reference loops refuse bf16. A forward or
// backprop-data output stored in bf16 (bf16 activations, Node::bf16_sets) is the primitive's
// bf16 dst / diff_src. A bf16 filter gradient with a short reduction (batch x output
// positions, ResNet-50's last stage at 64x64) runs on ngraph's own kernel (filters_bf16.hpp)
// in the layouts oneDNN chose.
#include <algorithm>
#include <cstring>
#include <optional>

#include "ngraph/ops/convolution.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/filters_bf16.hpp"
#include "ngraph/runtime/cpu/op/convolution_bias.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

using dims = dnnl::memory::dims;
using op::ConvolutionWindow;

// The three shapes of a convolution problem, whichever op computes a part of it.
struct ConvShapes {
  Shape data, filters, out;
};

ConvShapes conv_shapes(const Node& node) {
  const std::string& t = node.get_type_name();
  if (t == op::Convolution::type_name || t == ConvolutionBias::type_name)
    return {node.get_input_shape(0), node.get_input_shape(1), node.get_shape()};
  if (t == op::ConvolutionBackpropData::type_name)
    return {node.get_shape(), node.get_input_shape(0), node.get_input_shape(1)};
  return {node.get_input_shape(0), node.get_shape(), node.get_input_shape(1)};
}

const ConvolutionWindow& conv_window(const Node& node) {
  if (auto* c = dynamic_cast<const op::Convolution*>(&node)) return c->get_window();
  if (auto* b = dynamic_cast<const ConvolutionBias*>(&node)) return b->get_window();
  if (auto* d = dynamic_cast<const op::ConvolutionBackpropData*>(&node)) return d->get_window();
  return static_cast<const op::ConvolutionBackpropFilters&>(node).get_window();
}

// ------------------------------------------------------------------------------ reference

// Every (output position, filter position, data position) of one channel pair, as flat
// spatial indices: data position = output * stride - padding_below + filter * dilation,
// undilated by the data dilation, inside the data.
struct Triple {
  size_t out, filter, in;
};

std::vector<Triple> conv_triples(const ConvShapes& s, const ConvolutionWindow& w) {
  size_t k = s.data.size() - 2;
  std::vector<std::vector<std::ptrdiff_t>> maps(k);  // per axis: [o * F + f] -> data index or -1
  for (size_t i = 0; i < k; ++i) {
    size_t O = s.out[i + 2], F = s.filters[i + 2];
    auto D = static_cast<std::ptrdiff_t>(s.data[i + 2]);
    for (size_t o = 0; o < O; ++o)
      for (size_t f = 0; f < F; ++f) {
        std::ptrdiff_t pos = static_cast<std::ptrdiff_t>(o * w.strides[i] + f * w.dilations[i]) - w.padding_below[i];
        auto dd = static_cast<std::ptrdiff_t>(w.data_dilations[i]);
        std::ptrdiff_t q = pos >= 0 && pos % dd == 0 ? pos / dd : -1;
        maps[i].push_back(q < D ? q : -1);
      }
  }
  std::vector<Triple> triples;
  std::vector<size_t> o(k, 0), f(k, 0);
  size_t O = shape_size(Shape(s.out.begin() + 2, s.out.end())), F = shape_size(Shape(s.filters.begin() + 2, s.filters.end()));
  for (size_t of = 0; of < O * F; ++of) {
    size_t orem = of / F, frem = of % F, in = 0;
    bool inside = true;
    for (size_t i = k; i-- > 0 && inside;) {
      size_t oi = orem % s.out[i + 2], fi = frem % s.filters[i + 2];
      orem /= s.out[i + 2];
      frem /= s.filters[i + 2];
      std::ptrdiff_t q = maps[i][oi * s.filters[i + 2] + fi];
      inside = q >= 0;
      size_t stride = 1;
      for (size_t j = i + 1; j < k; ++j) stride *= s.data[j + 2];
      in += static_cast<size_t>(q) * stride;
    }
    if (inside) triples.push_back({of / F, of % F, in});
  }
  return triples;
}

enum class Role { forward, backprop_data, backprop_filters };

// out = x (*) w, dx += dy * w, dw += dy * x: one loop over channel pairs and triples.
template <typename T>
Kernel reference_conv(KernelContext& ctx, Role role) {
  ConvShapes s = conv_shapes(ctx.node);
  const ConvolutionWindow& w = conv_window(ctx.node);
  auto triples = conv_triples(s, w);
  size_t N = s.data[0], C = s.data[1], OC = s.filters[0], G = static_cast<size_t>(w.groups);
  size_t icg = C / G, ocg = OC / G;
  size_t IN = shape_size(s.data) / std::max<size_t>(N * C, 1);
  size_t OUT = shape_size(s.out) / std::max<size_t>(N * OC, 1);
  size_t FS = shape_size(s.filters) / std::max<size_t>(OC * icg, 1);
  size_t out_bytes = ctx.output(0).bytes();
  return [=](const void* const* in, void* const* out) {
    std::memset(out[0], 0, out_bytes);
    const T* a = static_cast<const T*>(in[0]);
    const T* b = static_cast<const T*>(in[1]);
    T* r = static_cast<T*>(out[0]);
    for (size_t n = 0; n < N; ++n)
      for (size_t oc = 0; oc < OC; ++oc)
        for (size_t ic = 0; ic < icg; ++ic) {
          size_t x_off = (n * C + oc / ocg * icg + ic) * IN, y_off = (n * OC + oc) * OUT;
          size_t w_off = (oc * icg + ic) * FS;
          for (const auto& t : triples) {
            switch (role) {
              case Role::forward: r[y_off + t.out] += a[x_off + t.in] * b[w_off + t.filter]; break;
              // inputs (filters, delta)
              case Role::backprop_data: r[x_off + t.in] += b[y_off + t.out] * a[w_off + t.filter]; break;
              // inputs (data, delta)
              case Role::backprop_filters: r[w_off + t.filter] += b[y_off + t.out] * a[x_off + t.in]; break;
            }
          }
        }
  };
}

// ---------------------------------------------------------------------------------- oneDNN


struct DnnlConv {
  dims strides, dilations, pad_l, pad_r;
  dnnl::memory::desc any(const Shape& shape, bool weights, int64_t groups,
                         element::Type type = element::f32) const {
    dims d = to_dims(shape);
    if (weights && groups > 1) {
      d[0] /= groups;
      d.insert(d.begin(), groups);
    }
    return dnnl::memory::desc(d, dnnl_type(type), dnnl::memory::format_tag::any);
  }
};

DnnlConv dnnl_params(const ConvolutionWindow& w) {
  DnnlConv p;
  for (size_t i = 0; i < w.strides.size(); ++i) {
    p.strides.push_back(static_cast<int64_t>(w.strides[i]));
    p.dilations.push_back(static_cast<int64_t>(w.dilations[i]) - 1);
    p.pad_l.push_back(w.padding_below[i]);
    p.pad_r.push_back(w.padding_above[i]);
  }
  return p;
}

// The forward primitive descriptor for the given layouts (format_tag::any where the caller
// lets oneDNN choose); with a bias of `bias` elements, and post-ops when asked: the sum with
// what dst holds (a residual summand), then ReLU.
dnnl::convolution_forward::primitive_desc forward_pd(const DnnlConv& p, const dnnl::memory::desc& src,
                                                     const dnnl::memory::desc& weights,
                                                     const dnnl::memory::desc& dst, size_t bias = 0,
                                                     bool relu = false, bool sum = false) {
  auto kind = dnnl::prop_kind::forward_training;
  auto alg = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr = dnnl_attr();
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (sum || relu) attr.set_post_ops(ops);
  if (bias) {
    dnnl::convolution_forward::desc d(kind, alg, src, weights, flat_desc(bias), dst, p.strides, p.dilations,
                                      p.pad_l, p.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, attr, dnnl_engine());
  }
  dnnl::convolution_forward::desc d(kind, alg, src, weights, dst, p.strides, p.dilations, p.pad_l, p.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, attr, dnnl_engine());
}

struct ConvDescs {
  dnnl::memory::desc data, weights, out;
};

// Primitive descriptors of each op for given layouts of (data, weights, out).
dnnl::primitive_desc conv_pd(const Node& node, const ConvDescs& m) {
  const ConvolutionWindow& w = conv_window(node);
  DnnlConv p = dnnl_params(w);
  ConvShapes s = conv_shapes(node);
  const std::string& t = node.get_type_name();
  if (t == op::Convolution::type_name) return forward_pd(p, m.data, m.weights, m.out);
  if (t == ConvolutionBias::type_name) {
    auto& cb = static_cast<const ConvolutionBias&>(node);
    return forward_pd(p, m.data, m.weights, m.out, s.out[1], cb.get_relu(), cb.has_summand());
  }
  // The forward problem in the operands' type (bf16 under mixed precision).
  element::Type t_in = node.get_input_element_type(0);
  auto hint = forward_pd(p, p.any(s.data, false, 1, t_in), p.any(s.filters, true, w.groups, t_in),
                         p.any(s.out, false, 1, t_in));
  if (t == op::ConvolutionBackpropData::type_name) {
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, m.data, m.weights, m.out,
                                            p.strides, p.dilations, p.pad_l, p.pad_r);
    return dnnl::convolution_backward_data::primitive_desc(d, dnnl_attr(), dnnl_engine(), hint);
  }
  dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, m.data, m.weights, m.out,
                                             p.strides, p.dilations, p.pad_l, p.pad_r);
  return dnnl::convolution_backward_weights::primitive_desc(d, dnnl_attr(), dnnl_engine(), hint);
}

// The layouts oneDNN chooses: (data, weights, out) of the problem.
ConvDescs chosen(const dnnl::primitive_desc& pd, const std::string& t) {
  using q = dnnl::query;
  if (t == op::Convolution::type_name || t == ConvolutionBias::type_name)
    return {pd.query_md(q::src_md), pd.query_md(q::weights_md), pd.query_md(q::dst_md)};
  if (t == op::ConvolutionBackpropData::type_name)
    return {pd.query_md(q::diff_src_md), pd.query_md(q::weights_md), pd.query_md(q::diff_dst_md)};
  return {pd.query_md(q::src_md), pd.query_md(q::diff_weights_md), pd.query_md(q::diff_dst_md)};
}

// Input and output positions of (data, weights, out) for each op: forward reads data and
// weights; backprop data reads weights and delta; backprop filters reads data and delta.
struct Roles {
  int data, weights, out;  // >= 0: input index; -1: the output
};
Roles roles(const std::string& t) {
  if (t == op::Convolution::type_name || t == ConvolutionBias::type_name) return {0, 1, -1};
  if (t == op::ConvolutionBackpropData::type_name) return {-1, 0, 1};
  return {0, -1, 1};
}

// The element type of a role: its input's, or the output's.
element::Type role_type(const Node& node, int role) {
  return role >= 0 ? node.get_input_element_type(static_cast<size_t>(role)) : node.get_element_type();
}

void conv_layout(LayoutContext& lc) {
  if (!dnnl_takes_convolution(lc.node)) return;
  const std::string& t = lc.node.get_type_name();
  ConvShapes s = conv_shapes(lc.node);
  const ConvolutionWindow& w = conv_window(lc.node);
  DnnlConv p = dnnl_params(w);
  Roles r = roles(t);
  element::Type t_data = role_type(lc.node, r.data), t_weights = role_type(lc.node, r.weights),
                t_out = role_type(lc.node, r.out);
  ConvDescs any{p.any(s.data, false, 1, t_data), p.any(s.filters, true, w.groups, t_weights),
                p.any(s.out, false, 1, t_out)};
  ConvDescs c = chosen(conv_pd(lc.node, any), t);
  // A first layer (1 or 3 channels) would have its data padded to the channel block (8x the
  // bytes and work for 1 channel): take the data as it is when oneDNN has a fast kernel for
  // that (its "first convolution" kernels read plain NCHW).
  if (c.data.get_size() > shape_size(s.data) * t_data.size()) {
    ConvDescs plain_data = any;
    plain_data.data = plain_desc(s.data, 0, t_data);
    try {
      dnnl::primitive_desc pd = conv_pd(lc.node, plain_data);
      if (std::string(pd.impl_info_str()).find("ref") == std::string::npos) c = chosen(pd, t);
    } catch (const dnnl::error&) {  // no implementation for plain data: keep the blocked one
    }
  }
  auto set = [&](int role, const Shape& shape, const dnnl::memory::desc& md) {
    TensorDesc d = TensorDesc::with_layout(role_type(lc.node, role), shape, md);
    if (role >= 0) lc.wanted[static_cast<size_t>(role)] = d;
    else lc.outputs[0] = d;
  };
  set(r.data, s.data, c.data);
  set(r.weights, s.filters, c.weights);
  set(r.out, s.out, c.out);
  // The residual summand is added in place in the result: it must have the result's layout.
  if (auto* cb = dynamic_cast<const ConvolutionBias*>(&lc.node); cb && cb->has_summand())
    lc.wanted[ConvolutionBias::INPUT_SUMMAND] = lc.outputs[0];
}

// The bf16 filter gradient of a short reduction on ngraph's kernel, where it takes the
// problem (2-D, one group, undilated, in the layouts oneDNN chose; see filters_bf16.hpp).
std::optional<Kernel> own_filters_bf16(const Node& node, const ConvDescs& m) {
  if (node.get_type_name() != std::string(op::ConvolutionBackpropFilters::type_name) ||
      node.get_input_element_type(0) != element::bf16)
    return std::nullopt;
  ConvShapes s = conv_shapes(node);
  const ConvolutionWindow& w = conv_window(node);
  if (s.data.size() != 4 || w.groups != 1 || w.dilations != Strides{1, 1}) return std::nullopt;
  auto i = [](size_t v) { return static_cast<int64_t>(v); };
  FilterProblem p{i(s.data[0]),    i(s.data[1]),    i(s.data[2]),    i(s.data[3]), i(s.out[1]),
                  i(s.out[2]),     i(s.out[3]),     i(s.filters[2]), i(s.filters[3]),
                  i(w.strides[0]), i(w.strides[1]), w.padding_below[0], w.padding_below[1]};
  return filters_bf16(p, m.data, m.out, m.weights);
}

Kernel dnnl_conv(KernelContext& ctx) {
  const Node& node = ctx.node;
  const std::string& t = node.get_type_name();
  ConvShapes s = conv_shapes(node);
  const ConvolutionWindow& w = conv_window(node);
  Roles r = roles(t);
  auto desc_of = [&](int role) -> const TensorDesc& { return role >= 0 ? ctx.input(static_cast<size_t>(role)) : ctx.output(0); };
  DnnlConv p = dnnl_params(w);
  dnnl::memory::desc weights_any = p.any(s.filters, true, w.groups, role_type(node, r.weights));
  // Plain filters are given in the grouped view oneDNN wants ([G, O/G, I/G, ...]).
  ConvDescs m{desc_of(r.data).dnnl_desc(), desc_of(r.weights).dnnl_desc_like(weights_any),
              desc_of(r.out).dnnl_desc()};
  if (std::optional<Kernel> own = own_filters_bf16(node, m)) return *own;
  dnnl::primitive_desc pd = conv_pd(node, m);
  // The primitive argument of a role: `as_input` when the op reads it, `as_output` otherwise.
  auto arg = [&](int role, int as_input, int as_output) {
    return DnnlArg{role >= 0 ? as_input : as_output, role == r.weights ? m.weights : role == r.data ? m.data : m.out,
                   role >= 0, role >= 0 ? static_cast<size_t>(role) : 0};
  };
  std::vector<DnnlArg> args;
  if (t == op::Convolution::type_name || t == ConvolutionBias::type_name) {
    args = {arg(r.data, DNNL_ARG_SRC, 0), arg(r.weights, DNNL_ARG_WEIGHTS, 0), arg(r.out, 0, DNNL_ARG_DST)};
    if (t == ConvolutionBias::type_name) args.push_back({DNNL_ARG_BIAS, flat_desc(s.out[1]), true, 2});
  } else if (t == op::ConvolutionBackpropData::type_name) {
    args = {arg(r.weights, DNNL_ARG_WEIGHTS, 0), arg(r.out, DNNL_ARG_DIFF_DST, 0), arg(r.data, 0, DNNL_ARG_DIFF_SRC)};
  } else {
    args = {arg(r.data, DNNL_ARG_SRC, 0), arg(r.out, DNNL_ARG_DIFF_DST, 0), arg(r.weights, 0, DNNL_ARG_DIFF_WEIGHTS)};
  }
  Kernel kernel = dnnl_kernel(ctx, dnnl::primitive(pd), pd.scratchpad_desc(), args);
  auto* cb = dynamic_cast<const ConvolutionBias*>(&node);
  if (!cb || !cb->has_summand()) return kernel;
  // The sum post-op adds what dst holds: put the summand there first.
  size_t bytes = ctx.output(0).bytes();
  return [kernel, bytes](const void* const* in, void* const* out) {
    const void* summand = in[ConvolutionBias::INPUT_SUMMAND];
    if (summand != out[0]) std::memcpy(out[0], summand, bytes);
    kernel(in, out);
  };
}

Kernel conv_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (ctx.output(0).elements() == 0) return [](const void* const*, void* const*) {};
  const std::string& t = node.get_type_name();
  if (dnnl_takes_convolution(node)) return dnnl_conv(ctx);
  Role role = t == op::Convolution::type_name ? Role::forward
              : t == op::ConvolutionBackpropData::type_name ? Role::backprop_data
                                                             : Role::backprop_filters;
  element::Type et = node.get_element_type();
  if (node.get_input_element_type(0) == element::bf16)
    node.fail_type("CPU kernel computes bf16 operands on oneDNN only, which does not take this convolution "
                   "(data dilation, negative padding or an empty axis); convert the operands to f32");
  if (et == element::f32) return reference_conv<float>(ctx, role);
  if (et == element::f64) return reference_conv<double>(ctx, role);
  node.fail_type("CPU kernel needs f32 or f64, got " + et.get_type_name());
}

NGRAPH_CPU_KERNEL(op::Convolution::type_name, conv_kernel, conv_layout);
NGRAPH_CPU_KERNEL(op::ConvolutionBackpropData::type_name, conv_kernel, conv_layout);
NGRAPH_CPU_KERNEL(op::ConvolutionBackpropFilters::type_name, conv_kernel, conv_layout);
// Formed only where oneDNN takes the convolution (see fuse_convolution_bias_relu).
NGRAPH_CPU_KERNEL(ConvolutionBias::type_name, dnnl_conv, conv_layout);

}  // namespace

bool dnnl_takes_convolution(const Node& node) {
  const ConvolutionWindow& w = conv_window(node);
  ConvShapes s = conv_shapes(node);
  bool real = node.get_element_type() == element::f32 || node.get_element_type() == element::bf16;
  if (!real || s.data.size() < 3 || s.data.size() > 5) return false;
  if (shape_size(s.data) == 0 || shape_size(s.out) == 0) return false;
  for (size_t i = 0; i < w.strides.size(); ++i)
    if (w.data_dilations[i] != 1 || w.padding_below[i] < 0 || w.padding_above[i] < 0) return false;
  return true;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
