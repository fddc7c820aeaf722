// Reference kernels of the neural-network ops: pooling and its gradients, LRN and its
// gradient, batch normalization (training, inference, backprop), layer normalization and its
// backprop, dropout. Arithmetic in double.
#include <cmath>
#include <limits>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/random.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {
namespace {

// --------------------------------------------------------------------------------- pooling

// f(output index, offsets of the window's data cells) for every window: output cell o of a
// spatial axis covers the padded data [o * stride, o * stride + window), i.e. the data cells
// from o * stride - padding_below that exist.
template <typename F>
void for_each_window(const Shape& data, const Shape& out, const op::PoolingAttributes& p, F&& f) {
  size_t k = data.size() - 2;
  Shape in_sp(data.begin() + 2, data.end()), out_sp(out.begin() + 2, out.end());
  auto in_strides = signed_strides(in_sp);
  const Shape& window = p.get_window_shape();
  size_t planes = data[0] * data[1], plane = shape_size(in_sp), cells_per_window = shape_size(window);
  std::vector<size_t> cells;
  size_t o_flat = 0;
  for (size_t pl = 0; pl < planes; ++pl) {
    std::vector<size_t> o(k, 0);
    for (size_t oi = 0; oi < shape_size(out_sp); ++oi, ++o_flat) {
      cells.clear();
      std::vector<size_t> w(k, 0);
      for (size_t wi = 0; wi < cells_per_window; ++wi) {
        std::ptrdiff_t offset = 0;
        bool inside = true;
        for (size_t i = 0; i < k && inside; ++i) {
          auto pos = static_cast<std::ptrdiff_t>(o[i] * p.get_window_movement_strides()[i] + w[i]) -
                     static_cast<std::ptrdiff_t>(p.get_padding_below()[i]);
          inside = pos >= 0 && pos < static_cast<std::ptrdiff_t>(in_sp[i]);
          offset += pos * in_strides[i];
        }
        if (inside) cells.push_back(pl * plane + static_cast<size_t>(offset));
        for (size_t i = k; i-- > 0;) {
          if (++w[i] < window[i]) break;
          w[i] = 0;
        }
      }
      f(o_flat, cells);
      for (size_t i = k; i-- > 0;) {
        if (++o[i] < out_sp[i]) break;
        o[i] = 0;
      }
    }
  }
}

// What an average divides by: the window's data cells, or the whole window with the padding.
double divisor(const op::PoolingAttributes& p, bool include_padding, size_t cells) {
  return static_cast<double>(include_padding ? shape_size(p.get_window_shape()) : cells);
}

template <typename F>
void real_types(const KernelCall& c, F&& f) {
  dispatch(c.node, c.node.get_output_element_type(0), [&](auto tag) {
    if constexpr (is_real_v<decltype(tag)>) f(tag);
  });
}

// The maximum of the window (NaN propagates); -inf for a window without data.
NGRAPH_INTERPRETER_KERNEL("MaxPool", [](KernelCall& c) {
  auto& p = static_cast<const op::MaxPool&>(c.node);
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    T* y = c.output<T>(0);
    for_each_window(p.get_input_shape(0), p.get_shape(), p, [&](size_t o, const std::vector<size_t>& cells) {
      T m = -std::numeric_limits<T>::infinity();
      for (size_t i : cells)
        if (is_nan(x[i]) || x[i] > m || is_nan(m)) m = is_nan(m) ? m : x[i];
      y[o] = m;
    });
  });
});

NGRAPH_INTERPRETER_KERNEL("AvgPool", [](KernelCall& c) {
  auto& p = static_cast<const op::AvgPool&>(c.node);
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    T* y = c.output<T>(0);
    for_each_window(p.get_input_shape(0), p.get_shape(), p, [&](size_t o, const std::vector<size_t>& cells) {
      double sum = 0;
      for (size_t i : cells) sum += x[i];
      y[o] = static_cast<T>(sum / divisor(p, p.get_include_padding_in_avg_computation(), cells.size()));
    });
  });
});

// Each delta goes to the first maximum of its window, in row-major order.
NGRAPH_INTERPRETER_KERNEL("MaxPoolBackprop", [](KernelCall& c) {
  auto& p = static_cast<const op::MaxPoolBackprop&>(c.node);
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    const T* delta = c.input<T>(1);
    std::vector<double> dx(shape_size(p.get_shape()), 0.0);
    for_each_window(p.get_shape(), p.get_input_shape(1), p, [&](size_t o, const std::vector<size_t>& cells) {
      if (cells.empty()) return;
      size_t best = cells[0];
      for (size_t i : cells)
        if (x[i] > x[best]) best = i;
      dx[best] += delta[o];
    });
    T* y = c.output<T>(0);
    for (size_t i = 0; i < dx.size(); ++i) y[i] = static_cast<T>(dx[i]);
  });
});

// Each delta spread over its window's data cells, divided as the forward divides.
NGRAPH_INTERPRETER_KERNEL("AvgPoolBackprop", [](KernelCall& c) {
  auto& p = static_cast<const op::AvgPoolBackprop&>(c.node);
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* delta = c.input<T>(0);
    std::vector<double> dx(shape_size(p.get_shape()), 0.0);
    for_each_window(p.get_shape(), p.get_input_shape(0), p, [&](size_t o, const std::vector<size_t>& cells) {
      double share = delta[o] / divisor(p, p.get_include_padding_in_avg_computation(), cells.size());
      for (size_t i : cells) dx[i] += share;
    });
    T* y = c.output<T>(0);
    for (size_t i = 0; i < dx.size(); ++i) y[i] = static_cast<T>(dx[i]);
  });
});

// ------------------------------------------------------------------------------------- LRN

// s[c] = bias + alpha / size * (sum of x^2 over the channels c - (size - 1) / 2 ..
// c + (size - 1) / 2 that exist), per position; f(index of channel c at a position, s, the
// channel's window [first, last), the stride between channels).
template <typename T, typename F>
void for_each_lrn(const KernelCall& c, const T* x, F&& f) {
  auto& a = dynamic_cast<const op::LRNAttributes&>(c.node);
  const Shape& shape = c.node.get_input_shape(0);
  size_t channels = shape[1], inner = shape_size(shape) / std::max<size_t>(shape[0] * shape[1], 1);
  size_t half = (a.get_nsize() - 1) / 2;
  for (size_t n = 0; n < shape[0]; ++n)
    for (size_t i = 0; i < inner; ++i)
      for (size_t ch = 0; ch < channels; ++ch) {
        size_t first = ch > half ? ch - half : 0, last = std::min(channels, ch + half + 1);
        size_t base = n * channels * inner + i;
        double sum = 0;
        for (size_t j = first; j < last; ++j) sum += double(x[base + j * inner]) * double(x[base + j * inner]);
        double s = a.get_bias() + a.get_alpha() / static_cast<double>(a.get_nsize()) * sum;
        f(base + ch * inner, s, base, first, last, inner);
      }
}

NGRAPH_INTERPRETER_KERNEL("LRN", [](KernelCall& c) {
  double beta = static_cast<const op::LRN&>(c.node).get_beta();
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    T* y = c.output<T>(0);
    for_each_lrn(c, x, [&](size_t k, double s, size_t, size_t, size_t, size_t) {
      y[k] = static_cast<T>(x[k] * std::pow(s, -beta));
    });
  });
});

// y_i = x_i s_i^-beta, and s_i depends on x_j for j in i's window (j's window holds i), so
// dx_j = delta_j s_j^-beta - 2 alpha beta / size * x_j * sum over i in j's window of
// delta_i x_i s_i^(-beta - 1).
NGRAPH_INTERPRETER_KERNEL("LRNBackprop", [](KernelCall& c) {
  auto& a = static_cast<const op::LRNBackprop&>(c.node);
  double beta = a.get_beta(), k = 2 * a.get_alpha() * beta / static_cast<double>(a.get_nsize());
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    const T* delta = c.input<T>(1);
    size_t n = shape_size(a.get_shape());
    std::vector<double> s(n), t(n);
    for_each_lrn(c, x, [&](size_t i, double si, size_t, size_t, size_t, size_t) {
      s[i] = si;
      t[i] = double(delta[i]) * double(x[i]) * std::pow(si, -beta - 1);
    });
    T* dx = c.output<T>(0);
    for_each_lrn(c, x, [&](size_t j, double, size_t base, size_t first, size_t last, size_t inner) {
      double sum = 0;
      for (size_t i = first; i < last; ++i) sum += t[base + i * inner];
      dx[j] = static_cast<T>(double(delta[j]) * std::pow(s[j], -beta) - k * double(x[j]) * sum);
    });
  });
});

// ------------------------------------------------------------------------ batch normalization

using BN = op::BatchNormBase;

// Data [N, C, rest...]: f(flat index) for every element of channel ch.
template <typename F>
void for_channel(const Shape& shape, size_t ch, F&& f) {
  size_t inner = shape_size(shape) / std::max<size_t>(shape[0] * shape[1], 1);
  for (size_t n = 0; n < shape[0]; ++n)
    for (size_t i = 0; i < inner; ++i) f((n * shape[1] + ch) * inner + i);
}

// Training: each channel's mean and biased variance, then the normalization with them.
// Inference: the normalization with the given statistics.
Kernel batch_norm_forward(bool training) {
  return [training](KernelCall& c) {
    const Shape& shape = c.node.get_input_shape(BN::INPUT_DATA);
    double eps = dynamic_cast<const BN&>(c.node).get_eps_value();
    real_types(c, [&](auto tag) {
      using T = decltype(tag);
      const T* gamma = c.input<T>(BN::INPUT_GAMMA);
      const T* beta = c.input<T>(BN::INPUT_BETA);
      const T* x = c.input<T>(BN::INPUT_DATA);
      T* y = c.output<T>(0);
      double count = static_cast<double>(shape_size(shape) / shape[1]);
      for (size_t ch = 0; ch < shape[1]; ++ch) {
        double mean = 0, var = 0;
        if (training) {
          for_channel(shape, ch, [&](size_t i) { mean += x[i]; });
          mean /= count;
          for_channel(shape, ch, [&](size_t i) { var += (x[i] - mean) * (x[i] - mean); });
          var /= count;
          c.output<T>(1)[ch] = static_cast<T>(mean);
          c.output<T>(2)[ch] = static_cast<T>(var);
        } else {
          mean = c.input<T>(BN::INPUT_MEAN)[ch];
          var = c.input<T>(BN::INPUT_VARIANCE)[ch];
        }
        double scale = gamma[ch] / std::sqrt(var + eps);
        for_channel(shape, ch, [&](size_t i) { y[i] = static_cast<T>((x[i] - mean) * scale + beta[ch]); });
      }
    });
  };
}

NGRAPH_INTERPRETER_KERNEL(op::BatchNormTraining::type_name, batch_norm_forward(true));
NGRAPH_INTERPRETER_KERNEL(op::BatchNormInference::type_name, batch_norm_forward(false));

// With s = 1 / sqrt(var + eps), xhat = (x - mean) s and M elements per channel: d_beta =
// sum(dy), d_gamma = sum(dy xhat), d_input = gamma s (dy - d_beta / M - xhat d_gamma / M).
NGRAPH_INTERPRETER_KERNEL(op::BatchNormTrainingBackprop::type_name, [](KernelCall& c) {
  const Shape& shape = c.node.get_input_shape(BN::INPUT_DATA);
  double eps = dynamic_cast<const BN&>(c.node).get_eps_value();
  real_types(c, [&](auto tag) {
    using T = decltype(tag);
    const T* gamma = c.input<T>(BN::INPUT_GAMMA);
    const T* x = c.input<T>(BN::INPUT_DATA);
    const T* mean = c.input<T>(BN::INPUT_MEAN);
    const T* var = c.input<T>(BN::INPUT_VARIANCE);
    const T* dy = c.input<T>(BN::INPUT_DELTA);
    T* dx = c.output<T>(0);
    double count = static_cast<double>(shape_size(shape) / shape[1]);
    for (size_t ch = 0; ch < shape[1]; ++ch) {
      double s = 1 / std::sqrt(double(var[ch]) + eps), mu = mean[ch], d_beta = 0, d_gamma = 0;
      for_channel(shape, ch, [&](size_t i) {
        d_beta += dy[i];
        d_gamma += dy[i] * (x[i] - mu) * s;
      });
      for_channel(shape, ch, [&](size_t i) {
        dx[i] = static_cast<T>(gamma[ch] * s * (dy[i] - d_beta / count - (x[i] - mu) * s * d_gamma / count));
      });
      c.output<T>(1)[ch] = static_cast<T>(d_gamma);
      c.output<T>(2)[ch] = static_cast<T>(d_beta);
    }
  });
});

// LayerNorm: per row of [rows, columns], the mean and the biased variance (in double), then
// y = (x - mean) / sqrt(variance + epsilon) * scale + bias.
NGRAPH_INTERPRETER_KERNEL("LayerNorm", [](KernelCall& c) {
  auto& ln = static_cast<const op::LayerNorm&>(c.node);
  size_t rows = 0, cols = 0;
  ln.get_rows_columns(c.node, rows, cols);
  dispatch(c.node, ln.get_input_element_type(0), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_real_v<T>) {
      const T* x = c.input<T>(0);
      const T* scale = ln.has_affine() ? c.input<T>(1) : nullptr;
      const T* bias = ln.has_affine() ? c.input<T>(2) : nullptr;
      T *y = c.output<T>(0), *mean = c.output<T>(1), *var = c.output<T>(2);
      for (size_t r = 0; r < rows; ++r) {
        const T* xr = x + r * cols;
        double m = 0, v = 0;
        for (size_t j = 0; j < cols; ++j) m += xr[j];
        m /= static_cast<double>(cols);
        for (size_t j = 0; j < cols; ++j) v += (xr[j] - m) * (xr[j] - m);
        v /= static_cast<double>(cols);
        double rstd = 1.0 / std::sqrt(v + ln.get_epsilon());
        for (size_t j = 0; j < cols; ++j) {
          double h = (xr[j] - m) * rstd;
          y[r * cols + j] = static_cast<T>(scale ? h * scale[j] + bias[j] : h);
        }
        mean[r] = static_cast<T>(m);
        var[r] = static_cast<T>(v);
      }
    }
  });
});

// With h = (x - mean) * rstd and g = delta * scale, per row:
// dx = rstd * (g - mean(g) - h * mean(g * h)); d_scale = sum over rows of delta * h,
// d_bias = sum over rows of delta.
NGRAPH_INTERPRETER_KERNEL("LayerNormBackprop", [](KernelCall& c) {
  using B = op::LayerNormBackprop;
  auto& ln = static_cast<const B&>(c.node);
  size_t rows = 0, cols = 0;
  ln.get_rows_columns(c.node, rows, cols);
  dispatch(c.node, ln.get_input_element_type(0), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_real_v<T>) {
      const T* x = c.input<T>(B::INPUT_DATA);
      const T* dy = c.input<T>(B::INPUT_DELTA);
      const T* mean = c.input<T>(B::INPUT_MEAN);
      const T* var = c.input<T>(B::INPUT_VARIANCE);
      const T* scale = ln.has_affine() ? c.input<T>(B::INPUT_SCALE) : nullptr;
      T* dx = c.output<T>(0);
      std::vector<double> dscale(cols, 0.0), dbias(cols, 0.0);
      for (size_t r = 0; r < rows; ++r) {
        double rstd = 1.0 / std::sqrt(static_cast<double>(var[r]) + ln.get_epsilon());
        double mg = 0, mgh = 0;
        for (size_t j = 0; j < cols; ++j) {
          size_t e = r * cols + j;
          double h = (x[e] - static_cast<double>(mean[r])) * rstd;
          double g = dy[e] * (scale ? static_cast<double>(scale[j]) : 1.0);
          mg += g;
          mgh += g * h;
          dscale[j] += dy[e] * h;
          dbias[j] += dy[e];
        }
        mg /= static_cast<double>(cols);
        mgh /= static_cast<double>(cols);
        for (size_t j = 0; j < cols; ++j) {
          size_t e = r * cols + j;
          double h = (x[e] - static_cast<double>(mean[r])) * rstd;
          double g = dy[e] * (scale ? static_cast<double>(scale[j]) : 1.0);
          dx[e] = static_cast<T>(rstd * (g - mg - h * mgh));
        }
      }
      if (scale)
        for (size_t j = 0; j < cols; ++j) {
          c.output<T>(1)[j] = static_cast<T>(dscale[j]);
          c.output<T>(2)[j] = static_cast<T>(dbias[j]);
        }
    }
  });
});

// Dropout: the mask from the op's stream (seed, this process's rank, the call's step).
NGRAPH_INTERPRETER_KERNEL("Dropout", [](KernelCall& c) {
  auto& d = static_cast<const op::Dropout&>(c.node);
  random::Stream stream{d.get_seed(),
                        static_cast<uint64_t>(distributed::get_default_communicator()->rank()),
                        c.call.rng_step};
  size_t n = shape_size(d.get_input_shape(0));
  dispatch(c.node, d.get_input_element_type(0), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_real_v<T>) {
      T* mask = c.output<T>(1);
      random::dropout_mask(stream, d.get_probability(), mask, 0, n);
      const T* x = c.input<T>(0);
      T* y = c.output<T>(0);
      for (size_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
    }
  });
});

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
