// Reference contractions: Dot, MatMul (batched, broadcast, transposed) and the three
// convolution ops (groups, window and data dilation, negative padding), each a sum of
// products accumulated in double for floats (wrapping unsigned arithmetic for integers).
#include <algorithm>
#include <cstring>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {
namespace {

// C[b] (m x n) = A[a_of[b]] (m x k) * B[b_of[b]] (k x n); A or B stored transposed when asked.
struct Gemm {
  size_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  std::vector<size_t> a_of{0}, b_of{0};  // the matrices of A and B each output batch uses
};

void gemm(KernelCall& c, const Gemm& g) {
  dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = Accumulator<T>;
    const T* A = c.input<T>(0);
    const T* B = c.input<T>(1);
    T* C = c.output<T>(0);
    for (size_t batch = 0; batch < g.a_of.size(); ++batch) {
      const T* a = A + g.a_of[batch] * g.m * g.k;
      const T* b = B + g.b_of[batch] * g.k * g.n;
      T* out = C + batch * g.m * g.n;
      for (size_t i = 0; i < g.m; ++i)
        for (size_t j = 0; j < g.n; ++j) {
          Acc sum = 0;
          for (size_t p = 0; p < g.k; ++p) {
            Acc x = static_cast<Acc>(g.trans_a ? a[p * g.m + i] : a[i * g.k + p]);
            Acc y = static_cast<Acc>(g.trans_b ? b[j * g.k + p] : b[p * g.n + j]);
            sum = static_cast<Acc>(sum + static_cast<Acc>(x * y));
          }
          out[i * g.n + j] = static_cast<T>(sum);
        }
    }
  });
}

// The last `count` axes of arg0 against the first `count` of arg1.
NGRAPH_INTERPRETER_KERNEL("Dot", [](KernelCall& c) {
  auto& d = static_cast<const op::Dot&>(c.node);
  const Shape& a = d.get_input_shape(0);
  const Shape& b = d.get_input_shape(1);
  size_t count = d.get_reduction_axes_count();
  Gemm g;
  for (size_t i = 0; i < a.size(); ++i) (i < a.size() - count ? g.m : g.k) *= a[i];
  for (size_t i = count; i < b.size(); ++i) g.n *= b[i];
  gemm(c, g);
});

// NumPy's matmul: 1-D arguments promoted to a row (left) or a column (right), batch axes
// broadcast, transposes of the last two axes of arguments of rank >= 2.
NGRAPH_INTERPRETER_KERNEL("MatMul", [](KernelCall& c) {
  auto& mm = static_cast<const op::MatMul&>(c.node);
  Shape a = mm.get_input_shape(0), b = mm.get_input_shape(1);
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  Gemm g;
  g.trans_a = mm.get_transpose_a() && !a_vec;
  g.trans_b = mm.get_transpose_b() && !b_vec;
  g.m = g.trans_a ? a.back() : a[a.size() - 2];
  g.k = g.trans_a ? a[a.size() - 2] : a.back();
  g.n = g.trans_b ? b[b.size() - 2] : b.back();
  Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  size_t rank = std::max(a_batch.size(), b_batch.size());
  Shape batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    size_t da = i + a_batch.size() < rank ? 1 : a_batch[i + a_batch.size() - rank];
    size_t db = i + b_batch.size() < rank ? 1 : b_batch[i + b_batch.size() - rank];
    batch[i] = da == 1 ? db : da;  // NumPy broadcasting: 1 stretches, 0 stays 0
  }
  g.a_of = broadcast_offsets(a_batch, batch);
  g.b_of = broadcast_offsets(b_batch, batch);
  gemm(c, g);
});

// --------------------------------------------------------------------------- convolution

struct ConvProblem {
  Shape data, filters, out;
  const op::ConvolutionWindow* window;
};

ConvProblem conv_problem(const Node& node) {
  const std::string& t = node.get_type_name();
  if (t == op::Convolution::type_name)
    return {node.get_input_shape(0), node.get_input_shape(1), node.get_shape(),
            &static_cast<const op::Convolution&>(node).get_window()};
  if (t == op::ConvolutionBackpropData::type_name)
    return {node.get_shape(), node.get_input_shape(0), node.get_input_shape(1),
            &static_cast<const op::ConvolutionBackpropData&>(node).get_window()};
  return {node.get_input_shape(0), node.get_shape(), node.get_input_shape(1),
          &static_cast<const op::ConvolutionBackpropFilters&>(node).get_window()};
}

// Every (data, filter, output) element triple of the convolution whose product adds to the
// output: the data coordinate along each spatial axis is o * stride + f * dilation -
// padding_below in the dilated, padded data, which must be a data element (a multiple of the
// data dilation, inside the data). f(data index, filter index, output index).
template <typename F>
void for_each_product(const ConvProblem& p, F&& f) {
  const op::ConvolutionWindow& w = *p.window;
  size_t k = p.data.size() - 2;
  Shape out_sp(p.out.begin() + 2, p.out.end()), f_sp(p.filters.begin() + 2, p.filters.end()),
      d_sp(p.data.begin() + 2, p.data.end());
  auto d_strides = signed_strides(d_sp);
  // Spatial (output, filter, data) offsets, the same for every channel pair.
  struct Spatial {
    size_t out, filter, data;
  };
  std::vector<Spatial> spatial;
  size_t n_out = shape_size(out_sp), n_f = shape_size(f_sp);
  std::vector<size_t> o(k, 0);
  for (size_t oi = 0; oi < n_out; ++oi) {
    std::vector<size_t> fc(k, 0);
    for (size_t fi = 0; fi < n_f; ++fi) {
      std::ptrdiff_t data_index = 0;
      bool inside = true;
      for (size_t i = 0; i < k && inside; ++i) {
        auto pos = static_cast<std::ptrdiff_t>(o[i] * w.strides[i] + fc[i] * w.dilations[i]) -
                   w.padding_below[i];
        auto dd = static_cast<std::ptrdiff_t>(w.data_dilations[i]);
        inside = pos >= 0 && pos % dd == 0 && pos / dd < static_cast<std::ptrdiff_t>(d_sp[i]);
        data_index += inside ? pos / dd * d_strides[i] : 0;
      }
      if (inside) spatial.push_back({oi, fi, static_cast<size_t>(data_index)});
      for (size_t i = k; i-- > 0;) {
        if (++fc[i] < f_sp[i]) break;
        fc[i] = 0;
      }
    }
    for (size_t i = k; i-- > 0;) {
      if (++o[i] < out_sp[i]) break;
      o[i] = 0;
    }
  }
  size_t batch = p.data[0], channels = p.data[1], out_channels = p.filters[0];
  auto groups = static_cast<size_t>(w.groups);
  size_t in_per_group = channels / groups, out_per_group = out_channels / groups;
  size_t d_size = shape_size(d_sp);
  for (size_t n = 0; n < batch; ++n)
    for (size_t oc = 0; oc < out_channels; ++oc)
      for (size_t ic = 0; ic < in_per_group; ++ic) {
        size_t data_base = (n * channels + oc / out_per_group * in_per_group + ic) * d_size;
        size_t filter_base = (oc * in_per_group + ic) * n_f;
        size_t out_base = (n * out_channels + oc) * n_out;
        for (const auto& s : spatial) f(data_base + s.data, filter_base + s.filter, out_base + s.out);
      }
}

// The three ops sum the same products into different places: the forward into the output,
// the data gradient into the data, the filters gradient into the filters.
enum class Role { forward, backprop_data, backprop_filters };

Kernel convolution(Role role) {
  return [role](KernelCall& c) {
    ConvProblem p = conv_problem(c.node);
    dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
      using T = decltype(tag);
      std::vector<double> sum(shape_size(c.node.get_shape()), 0.0);
      const T* in0 = c.input<T>(0);
      const T* in1 = c.input<T>(1);
      for_each_product(p, [&](size_t d, size_t f, size_t o) {
        switch (role) {
          case Role::forward: sum[o] += double(in0[d]) * double(in1[f]); break;  // (data, filters)
          case Role::backprop_data: sum[d] += double(in1[o]) * double(in0[f]); break;  // (filters, delta)
          case Role::backprop_filters: sum[f] += double(in1[o]) * double(in0[d]); break;  // (data, delta)
        }
      });
      T* y = c.output<T>(0);
      for (size_t i = 0; i < sum.size(); ++i) y[i] = static_cast<T>(sum[i]);
    });
  };
}

NGRAPH_INTERPRETER_KERNEL(op::Convolution::type_name, convolution(Role::forward));
NGRAPH_INTERPRETER_KERNEL(op::ConvolutionBackpropData::type_name, convolution(Role::backprop_data));
NGRAPH_INTERPRETER_KERNEL(op::ConvolutionBackpropFilters::type_name,
                          convolution(Role::backprop_filters));

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
