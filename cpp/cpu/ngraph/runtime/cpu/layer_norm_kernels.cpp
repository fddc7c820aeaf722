// Layer normalization: oneDNN's layer_normalization primitives for f32 (forward training with
// the statistics as outputs; backward with the gradients of scale and shift), loops for f64
// and wherever oneDNN has no implementation (empty data). The data is seen as [rows, columns]
// (the axes before begin_norm_axis, and from it), plain row-major; scale and bias are bound as
// oneDNN's separate scale and shift of `columns` elements.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

using ln_forward = dnnl::layer_normalization_forward;
using ln_backward = dnnl::layer_normalization_backward;

struct Geometry {
  size_t rows = 0, cols = 0;
  double eps = 0;
  bool affine = false;
};

template <typename Op>
Geometry geometry(const Node& node) {
  auto& ln = static_cast<const Op&>(node);
  Geometry g;
  ln.get_rows_columns(node, g.rows, g.cols);
  g.eps = ln.get_epsilon();
  g.affine = ln.has_affine();
  return g;
}

// The backward reads the shift when it has the flag (oneDNN checks every argument its flags
// name), and LayerNormBackprop has no bias input: it runs with the scale only and the bias's
// gradient, a column sum of delta, is a loop after it.
dnnl::normalization_flags flags(bool affine, bool shift = true) {
  if (!affine) return dnnl::normalization_flags::none;
  return shift ? dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift
               : dnnl::normalization_flags::use_scale;
}

dnnl::memory::desc data_md(const Geometry& g) {
  return plain_desc(Shape{g.rows, g.cols});
}
dnnl::memory::desc stat_md(const Geometry& g) { return flat_desc(g.rows); }

std::optional<ln_forward::primitive_desc> forward_pd(const Geometry& g, bool shift = true) {
  if (g.rows == 0 || g.cols == 0) return std::nullopt;
  try {
    ln_forward::desc d(dnnl::prop_kind::forward_training, data_md(g), stat_md(g),
                       static_cast<float>(g.eps), flags(g.affine, shift));
    return ln_forward::primitive_desc(d, dnnl_attr(), dnnl_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

std::optional<ln_backward::primitive_desc> backward_pd(const Geometry& g) {
  auto hint = forward_pd(g, false);
  if (!hint) return std::nullopt;
  try {
    auto prop = g.affine ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data;
    ln_backward::desc d(prop, data_md(g), data_md(g), stat_md(g), static_cast<float>(g.eps),
                        flags(g.affine, false));
    return ln_backward::primitive_desc(d, dnnl_attr(), dnnl_engine(), *hint);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// ------------------------------------------------------------------------------ loops

// in: data, [scale, bias]; out: y, mean, variance. Statistics accumulate in double.
template <typename T>
Kernel forward_loops(const Geometry& g) {
  return [g](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    const T* scale = g.affine ? static_cast<const T*>(in[1]) : nullptr;
    const T* bias = g.affine ? static_cast<const T*>(in[2]) : nullptr;
    T* y = static_cast<T*>(out[0]);
    T* mean = static_cast<T*>(out[1]);
    T* var = static_cast<T*>(out[2]);
    for (size_t r = 0; r < g.rows; ++r) {
      const T* xr = x + r * g.cols;
      double m = 0, v = 0;
      for (size_t j = 0; j < g.cols; ++j) m += xr[j];
      m /= static_cast<double>(g.cols);  // NaN for an empty row, as NumPy's mean
      for (size_t j = 0; j < g.cols; ++j) v += (xr[j] - m) * (xr[j] - m);
      v /= static_cast<double>(g.cols);
      double rstd = 1.0 / std::sqrt(v + g.eps);
      T* yr = y + r * g.cols;
      for (size_t j = 0; j < g.cols; ++j) {
        double h = (xr[j] - m) * rstd;
        yr[j] = static_cast<T>(scale ? h * scale[j] + bias[j] : h);
      }
      mean[r] = static_cast<T>(m);
      var[r] = static_cast<T>(v);
    }
  };
}

// in: data, delta, mean, variance, [scale]; out: d_data, [d_scale, d_bias].
template <typename T>
Kernel backward_loops(const Geometry& g) {
  return [g](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    const T* dy = static_cast<const T*>(in[1]);
    const T* mean = static_cast<const T*>(in[2]);
    const T* var = static_cast<const T*>(in[3]);
    const T* scale = g.affine ? static_cast<const T*>(in[4]) : nullptr;
    T* dx = static_cast<T*>(out[0]);
    std::vector<double> dscale(g.affine ? g.cols : 0, 0.0), dbias(g.affine ? g.cols : 0, 0.0);
    for (size_t r = 0; r < g.rows; ++r) {
      double rstd = 1.0 / std::sqrt(static_cast<double>(var[r]) + g.eps);
      double m = mean[r], mg = 0, mgh = 0;
      const T* xr = x + r * g.cols;
      const T* dyr = dy + r * g.cols;
      for (size_t j = 0; j < g.cols; ++j) {
        double h = (xr[j] - m) * rstd;
        double gj = scale ? dyr[j] * static_cast<double>(scale[j]) : static_cast<double>(dyr[j]);
        mg += gj;
        mgh += gj * h;
        if (scale) {
          dscale[j] += dyr[j] * h;
          dbias[j] += dyr[j];
        }
      }
      mg /= static_cast<double>(g.cols);
      mgh /= static_cast<double>(g.cols);
      T* dxr = dx + r * g.cols;
      for (size_t j = 0; j < g.cols; ++j) {
        double h = (xr[j] - m) * rstd;
        double gj = scale ? dyr[j] * static_cast<double>(scale[j]) : static_cast<double>(dyr[j]);
        dxr[j] = static_cast<T>(rstd * (gj - mg - h * mgh));
      }
    }
    if (scale)
      for (size_t j = 0; j < g.cols; ++j) {
        static_cast<T*>(out[1])[j] = static_cast<T>(dscale[j]);
        static_cast<T*>(out[2])[j] = static_cast<T>(dbias[j]);
      }
  };
}

template <template <typename> class Make>
Kernel loops_for(const Node& node, const Geometry& g) {
  element::Type t = node.get_input_element_type(0);
  if (t == element::f32) return Make<float>::make(g);
  if (t == element::f64) return Make<double>::make(g);
  node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
}
template <typename T>
struct Forward {
  static Kernel make(const Geometry& g) { return forward_loops<T>(g); }
};
template <typename T>
struct Backward {
  static Kernel make(const Geometry& g) { return backward_loops<T>(g); }
};

NGRAPH_CPU_KERNEL("LayerNorm", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  Geometry g = geometry<op::LayerNorm>(node);
  if (node.get_input_element_type(0) == element::f32)
    if (auto pd = forward_pd(g)) {
      std::vector<DnnlArg> args{{DNNL_ARG_SRC, data_md(g), true, 0},
                                {DNNL_ARG_DST, data_md(g), false, 0},
                                {DNNL_ARG_MEAN, stat_md(g), false, 1},
                                {DNNL_ARG_VARIANCE, stat_md(g), false, 2}};
      if (g.affine) {
        args.push_back({DNNL_ARG_SCALE, flat_desc(g.cols), true, 1});
        args.push_back({DNNL_ARG_SHIFT, flat_desc(g.cols), true, 2});
      }
      return dnnl_kernel(ctx, ln_forward(*pd), pd->scratchpad_desc(), args);
    }
  return loops_for<Forward>(node, g);
});

NGRAPH_CPU_KERNEL("LayerNormBackprop", [](KernelContext& ctx) -> Kernel {
  using B = op::LayerNormBackprop;
  const Node& node = ctx.node;
  Geometry g = geometry<B>(node);
  if (node.get_input_element_type(0) == element::f32)
    if (auto pd = backward_pd(g)) {
      std::vector<DnnlArg> args{{DNNL_ARG_SRC, data_md(g), true, B::INPUT_DATA},
                                {DNNL_ARG_DIFF_DST, data_md(g), true, B::INPUT_DELTA},
                                {DNNL_ARG_MEAN, stat_md(g), true, B::INPUT_MEAN},
                                {DNNL_ARG_VARIANCE, stat_md(g), true, B::INPUT_VARIANCE},
                                {DNNL_ARG_DIFF_SRC, data_md(g), false, 0}};
      if (!g.affine) return dnnl_kernel(ctx, ln_backward(*pd), pd->scratchpad_desc(), args);
      args.push_back({DNNL_ARG_SCALE, flat_desc(g.cols), true, B::INPUT_SCALE});
      args.push_back({DNNL_ARG_DIFF_SCALE, flat_desc(g.cols), false, 1});
      Kernel primitive = dnnl_kernel(ctx, ln_backward(*pd), pd->scratchpad_desc(), args);
      size_t rows = g.rows, cols = g.cols;
      return [primitive, rows, cols](const void* const* in, void* const* out) {
        primitive(in, out);
        const float* dy = static_cast<const float*>(in[B::INPUT_DELTA]);
        float* dbias = static_cast<float*>(out[2]);
        std::fill(dbias, dbias + cols, 0.0f);
        for (size_t r = 0; r < rows; ++r)
          for (size_t j = 0; j < cols; ++j) dbias[j] += dy[r * cols + j];
      };
    }
  return loops_for<Backward>(node, g);
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
