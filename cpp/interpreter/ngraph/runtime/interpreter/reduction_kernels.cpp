// Reference reductions: Sum, Product, Max, Min over axis sets, ArgMax and ArgMin along one
// axis, and Softmax. Sums of floats accumulate in double; Max and Min propagate NaN (as
// NumPy does), an empty Max/Min is the lowest/highest value of the type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {
namespace {

template <typename T>
T lowest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <typename T>
T highest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

enum class Reduce { sum, product, max, min };

Kernel reduction(Reduce kind) {
  return [kind](KernelCall& c) {
    const auto& axes = dynamic_cast<const op::ReductionAxes&>(c.node).get_reduction_axes();
    auto to = reduction_offsets(c.node.get_input_shape(0), axes);
    size_t n = shape_size(c.node.get_shape());
    dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = c.input<T>(0);
      T* y = c.output<T>(0);
      if (kind == Reduce::sum || kind == Reduce::product) {
        std::vector<Accumulator<T>> acc(n, Accumulator<T>(kind == Reduce::sum ? 0 : 1));
        for (size_t i = 0; i < to.size(); ++i) {
          auto v = static_cast<Accumulator<T>>(x[i]);
          acc[to[i]] = kind == Reduce::sum ? Accumulator<T>(acc[to[i]] + v) : Accumulator<T>(acc[to[i]] * v);
        }
        for (size_t j = 0; j < n; ++j) y[j] = static_cast<T>(acc[j]);
        return;
      }
      bool max = kind == Reduce::max;
      for (size_t j = 0; j < n; ++j) y[j] = max ? lowest<T>() : highest<T>();
      for (size_t i = 0; i < to.size(); ++i) {
        T& r = y[to[i]];
        if (is_nan(r)) continue;
        if (is_nan(x[i]) || (max ? x[i] > r : x[i] < r)) r = x[i];
      }
    });
  };
}

NGRAPH_INTERPRETER_KERNEL("Sum", reduction(Reduce::sum));
NGRAPH_INTERPRETER_KERNEL("Product", reduction(Reduce::product));
NGRAPH_INTERPRETER_KERNEL("Max", reduction(Reduce::max));
NGRAPH_INTERPRETER_KERNEL("Min", reduction(Reduce::min));

// The index of the first extreme element along the axis; the first NaN wins (as in NumPy).
template <bool IsMax>
void index_reduction(KernelCall& c, size_t axis) {
  const Shape& in = c.node.get_input_shape(0);
  size_t outer = 1, inner = 1, n = in[axis];
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  bool i64 = c.node.get_element_type() == element::i64;
  dispatch(c.node, c.node.get_input_element_type(0), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    for (size_t a = 0; a < outer; ++a)
      for (size_t b = 0; b < inner; ++b) {
        size_t best = 0;
        for (size_t k = 1; k < n && !is_nan(x[(a * n + best) * inner + b]); ++k) {
          T v = x[(a * n + k) * inner + b], cur = x[(a * n + best) * inner + b];
          if (is_nan(v) || (IsMax ? v > cur : v < cur)) best = k;
        }
        if (i64) c.output<int64_t>(0)[a * inner + b] = static_cast<int64_t>(best);
        else c.output<int32_t>(0)[a * inner + b] = static_cast<int32_t>(best);
      }
  });
}

NGRAPH_INTERPRETER_KERNEL("ArgMax", [](KernelCall& c) {
  index_reduction<true>(c, static_cast<const op::ArgMax&>(c.node).get_reduction_axis());
});
NGRAPH_INTERPRETER_KERNEL("ArgMin", [](KernelCall& c) {
  index_reduction<false>(c, static_cast<const op::ArgMin&>(c.node).get_reduction_axis());
});

// TopK: each row along the axis sorted (stably) best first, the first k kept with their
// indices. Best: largest (compute_max) or smallest; NaN counts as larger than any number, as
// in NumPy's sort.
NGRAPH_INTERPRETER_KERNEL("TopK", [](KernelCall& c) {
  const auto& node = static_cast<const op::TopK&>(c.node);
  const Shape& in = node.get_input_shape(0);
  size_t axis = node.get_axis(), k = node.get_k(), n = in[axis];
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  bool is_max = node.get_compute_max(), i64 = node.get_output_element_type(1) == element::i64;
  dispatch(c.node, node.get_input_element_type(0), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.input<T>(0);
    auto larger = [](T a, T b) { return is_nan(b) ? false : is_nan(a) || a > b; };
    for (size_t a = 0; a < outer; ++a)
      for (size_t b = 0; b < inner; ++b) {
        std::vector<std::pair<T, size_t>> row;
        for (size_t j = 0; j < n; ++j) row.emplace_back(x[(a * n + j) * inner + b], j);
        std::stable_sort(row.begin(), row.end(), [&](const auto& u, const auto& v) {
          return is_max ? larger(u.first, v.first) : larger(v.first, u.first);
        });
        for (size_t j = 0; j < k; ++j) {
          size_t at = (a * k + j) * inner + b;
          c.output<T>(0)[at] = row[j].first;
          if (i64) c.output<int64_t>(1)[at] = static_cast<int64_t>(row[j].second);
          else c.output<int32_t>(1)[at] = static_cast<int32_t>(row[j].second);
        }
      }
  });
});

// exp(x - max) / sum(exp(x - max)) over the axes, in double.
NGRAPH_INTERPRETER_KERNEL("Softmax", [](KernelCall& c) {
  auto& s = static_cast<const op::Softmax&>(c.node);
  auto to = reduction_offsets(s.get_shape(), s.get_axes());
  size_t groups = 1;
  for (size_t d = 0; d < s.get_shape().size(); ++d)
    if (!s.get_axes().count(d)) groups *= s.get_shape()[d];
  dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_real_v<T>) {
      const T* x = c.input<T>(0);
      T* y = c.output<T>(0);
      std::vector<double> max(groups, -std::numeric_limits<double>::infinity()), sum(groups, 0.0);
      for (size_t i = 0; i < to.size(); ++i) max[to[i]] = std::max<double>(max[to[i]], x[i]);
      for (size_t i = 0; i < to.size(); ++i) sum[to[i]] += std::exp(double(x[i]) - max[to[i]]);
      for (size_t i = 0; i < to.size(); ++i)
        y[i] = static_cast<T>(std::exp(double(x[i]) - max[to[i]]) / sum[to[i]]);
    }
  });
});

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
