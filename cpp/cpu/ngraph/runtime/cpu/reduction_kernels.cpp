// Reductions (Sum, Product, Max, Min), index reductions (ArgMax, ArgMin) and Softmax.
// f32 sums and products go through oneDNN's reduction where it applies; Softmax over the innermost
// axes through the row loop of attention_kernels.cpp (row_softmax.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/bf16_convert.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/row_softmax.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

// Strides of the reduced output seen from the input's index space (0 along reduced axes).
std::vector<std::ptrdiff_t> reduced_strides(const Shape& in, const AxisSet& axes) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!axes.count(d)) out.push_back(in[d]);
  Strides os = row_major_strides(out);
  std::vector<std::ptrdiff_t> result(in.size(), 0);
  size_t k = 0;
  for (size_t d = 0; d < in.size(); ++d)
    if (!axes.count(d)) result[d] = static_cast<std::ptrdiff_t>(os[k++]);
  return result;
}

// acc[out(i)] = f(acc[out(i)], x[i]) over the input's index space.
template <typename T, typename F>
void accumulate(const StridedLoop& loop, T* acc, const T* x, F f) {
  loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
    T* o = acc + off[0];
    const T* a = x + off[1];
    std::ptrdiff_t so = inner[0], sa = inner[1];
    if (so == 0) {
      T v = *o;
      for (size_t i = 0; i < n; ++i) v = f(v, a[static_cast<std::ptrdiff_t>(i) * sa]);
      *o = v;
    } else if (so == 1 && sa == 1) {
      for (size_t i = 0; i < n; ++i) o[i] = f(o[i], a[i]);
    } else {
      for (size_t i = 0; i < n; ++i) {
        auto ii = static_cast<std::ptrdiff_t>(i);
        o[ii * so] = f(o[ii * so], a[ii * sa]);
      }
    }
  });
}

template <typename T>
T lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}
template <typename T>
T highest() {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::max();
}

Kernel dnnl_reduction(KernelContext& ctx, const Shape& in, const AxisSet& axes,
                      dnnl::algorithm alg) {
  Shape kept = in;
  for (auto a : axes) kept[a] = 1;
  auto src_md = plain_desc(in), dst_md = plain_desc(kept);
  dnnl::reduction::desc d(alg, src_md, dst_md, 0.f, 0.f);
  dnnl::reduction::primitive_desc pd(d, dnnl_attr(), dnnl_engine());
  return dnnl_kernel(ctx, dnnl::reduction(pd), pd.scratchpad_desc(),
                     {{DNNL_ARG_SRC, src_md, true, 0}, {DNNL_ARG_DST, dst_md, false, 0}});
}

// An f32 column sum (the reduced axes lead, e.g. a bias gradient [batch, length, width] ->
// [width]): four rows a pass over the output, each column summed in row order as the strided
// loop does (the same roundings), in 16 lanes where the CPU has AVX-512 (the twins'
// dispatch, kernel.hpp); the columns are shared out among the threads. X is the data's
// storage: f32, or bf16 (std::uint16_t; mixed precision, Sum's bf16_sets), read exactly as f32
// (bf16_convert.hpp), so every twin gives the same bits.
#define NGRAPH_CPU_DEFINE_COLUMN_SUM(Name, Attributes)                                            \
  template <typename X>                                                                           \
  Attributes void Name(const X* __restrict__ x, float* __restrict__ acc, size_t rows,           \
                       size_t cols, size_t c0, size_t c1) {                                       \
    for (size_t j = c0; j < c1; ++j) acc[j] = 0.0f;                                               \
    size_t r = 0;                                                                                 \
    for (; r + 4 <= rows; r += 4) {                                                               \
      const X* a = x + r * cols;                                                                  \
      const X *b = a + cols, *c = b + cols, *d = c + cols;                                        \
      for (size_t j = c0; j < c1; ++j)                                                            \
        acc[j] = acc[j] + widen(a[j]) + widen(b[j]) + widen(c[j]) + widen(d[j]);                 \
    }                                                                                             \
    for (; r < rows; ++r)                                                                         \
      for (size_t j = c0; j < c1; ++j) acc[j] += widen(x[r * cols + j]);                          \
  }
NGRAPH_CPU_DEFINE_COLUMN_SUM(column_sum, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define NGRAPH_CPU_HAVE_AVX2_COLUMN_SUM 1
NGRAPH_CPU_DEFINE_COLUMN_SUM(column_sum_avx2, __attribute__((target("avx2,fma"))))
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX512F__)
#define NGRAPH_CPU_HAVE_AVX512_COLUMN_SUM 1
NGRAPH_CPU_DEFINE_COLUMN_SUM(column_sum_avx512,
                             __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,"
                                                   "prefer-vector-width=512"))))
#endif
#undef NGRAPH_CPU_DEFINE_COLUMN_SUM

// The column sum's kernel of data stored as X when the reduced axes are the leading k
// (column_sum_takes), else none.
template <typename X>
Kernel column_sum_kernel(const Shape& in, const AxisSet& axes) {
  if (!column_sum_takes(in, axes)) return Kernel{};
  size_t rows = 1, cols = 1;
  for (size_t d = 0; d < in.size(); ++d) (d < axes.size() ? rows : cols) *= in[d];
  auto run = &column_sum<X>;
#ifdef NGRAPH_CPU_HAVE_AVX2_COLUMN_SUM
  if (use_avx2_twins()) run = &column_sum_avx2<X>;
#endif
#ifdef NGRAPH_CPU_HAVE_AVX512_COLUMN_SUM
  if (use_avx512_twins()) run = &column_sum_avx512<X>;
#endif
  // Columns per thread: at least 64, and about 64K elements of input each.
  size_t grain = std::max<size_t>(64, (size_t{1} << 16) / rows);
  return [run, rows, cols, grain](const void* const* i, void* const* o) {
    auto x = static_cast<const X*>(i[0]);
    auto acc = static_cast<float*>(o[0]);
    parallel_for(cols, grain, [&](size_t c0, size_t c1) { run(x, acc, rows, cols, c0, c1); });
  };
}

}  // namespace

bool column_sum_takes(const Shape& in, const AxisSet& axes) {
  size_t k = axes.size();
  if (k == 0 || k >= in.size() || *axes.rbegin() != k - 1) return false;
  size_t rows = 1, cols = 1;
  for (size_t d = 0; d < in.size(); ++d) (d < k ? rows : cols) *= in[d];
  return rows >= 2 && cols > 0;
}

namespace {

enum class Reduce { sum, product, max, min };

KernelBuilder reduction(Reduce kind) {
  return [kind](KernelContext& ctx) -> Kernel {
    const Node& node = ctx.node;
    const Shape& in = node.get_input_shape(0);
    const AxisSet& axes = dynamic_cast<const op::ReductionAxes&>(node).get_reduction_axes();
    element::Type t = node.get_element_type();
    // oneDNN rejects a reduction whose source and destination dims are equal, which is the
    // case when every reduced axis has size 1: the loop below handles that (it only copies).
    // Max and Min stay on the loop, which propagates NaN as the other types do; oneDNN's
    // reduction_max/min skip it.
    bool reduces = std::any_of(axes.begin(), axes.end(), [&](size_t a) { return in[a] > 1; });
    // oneDNN 2.6's reduction is fast when the reduced axes are the innermost ones (row sums);
    // reducing an outer axis (a column sum, e.g. a bias gradient) it runs ~40x slower than the
    // vectorised loop below, which then wins.
    bool innermost = !in.empty() && axes.count(in.size() - 1);
    if (t == element::f32 && dnnl_rank_ok(in) && reduces && innermost &&
        (kind == Reduce::sum || kind == Reduce::product)) {
      return dnnl_reduction(ctx, in, axes, kind == Reduce::sum ? dnnl::algorithm::reduction_sum
                                                          : dnnl::algorithm::reduction_mul);
    }
    if (node.is_bf16_stored_input(0)) {  // mixed precision: the column sum alone reads bf16
      Kernel k = ctx.output(0).is_plain() ? column_sum_kernel<std::uint16_t>(in, axes) : Kernel{};
      if (!k) node.fail_type("CPU kernel sums bf16 data only over leading axes (column sum)");
      return k;
    }
    if (t == element::f32 && kind == Reduce::sum && ctx.output(0).is_plain())
      if (Kernel k = column_sum_kernel<float>(in, axes)) return k;
    StridedLoop loop(in, {reduced_strides(in, axes), to_signed(row_major_strides(in))});
    size_t out_n = ctx.output(0).elements();
    return element::dispatch(t, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      return [loop, out_n, kind](const void* const* i, void* const* o) {
        const T* x = static_cast<const T*>(i[0]);
        T* acc = static_cast<T*>(o[0]);
        switch (kind) {
          case Reduce::sum:
            std::fill(acc, acc + out_n, T(0));
            accumulate(loop, acc, x, [](T a, T b) { return static_cast<T>(a + b); });
            break;
          case Reduce::product:
            std::fill(acc, acc + out_n, T(1));
            accumulate(loop, acc, x, [](T a, T b) { return static_cast<T>(a * b); });
            break;
          case Reduce::max:
            std::fill(acc, acc + out_n, lowest<T>());
            accumulate(loop, acc, x, [](T a, T b) { return b > a || b != b ? b : a; });
            break;
          case Reduce::min:
            std::fill(acc, acc + out_n, highest<T>());
            accumulate(loop, acc, x, [](T a, T b) { return b < a || b != b ? b : a; });
            break;
        }
      };
    });
  };
}

NGRAPH_CPU_KERNEL("Sum", reduction(Reduce::sum));
NGRAPH_CPU_KERNEL("Product", reduction(Reduce::product));
NGRAPH_CPU_KERNEL("Max", reduction(Reduce::max));
NGRAPH_CPU_KERNEL("Min", reduction(Reduce::min));

template <bool IsMax>
Kernel index_reduction(const Node& node, size_t axis) {
  const Shape& in = node.get_input_shape(0);
  size_t outer = 1, inner = 1, n = in[axis];
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  bool i64 = node.get_element_type() == element::i64;
  return element::dispatch(node.get_input_element_type(0), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [outer, inner, n, i64](const void* const* i, void* const* o) {
      const T* x = static_cast<const T*>(i[0]);
      for (size_t a = 0; a < outer; ++a)
        for (size_t b = 0; b < inner; ++b) {
          const T* p = x + a * n * inner + b;
          size_t best = 0;
          for (size_t k = 1; k < n; ++k) {
            T v = p[k * inner], cur = p[best * inner];
            if (cur != cur) break;  // NaN wins, as in NumPy
            if (IsMax ? (v > cur || v != v) : (v < cur || v != v)) best = k;
          }
          if (i64) static_cast<int64_t*>(o[0])[a * inner + b] = static_cast<int64_t>(best);
          else static_cast<int32_t*>(o[0])[a * inner + b] = static_cast<int32_t>(best);
        }
    };
  });
}

NGRAPH_CPU_KERNEL("ArgMax", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  return index_reduction<true>(node, static_cast<const op::ArgMax&>(node).get_reduction_axis());
});
NGRAPH_CPU_KERNEL("ArgMin", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  return index_reduction<false>(node, static_cast<const op::ArgMin&>(node).get_reduction_axis());
});

// TopK: per row along the axis, the k best (value, index) pairs by a partial sort; ties go to
// the lower index, NaN counts as larger than any number (as in NumPy's sort).
NGRAPH_CPU_KERNEL("TopK", [](KernelContext& ctx) -> Kernel {
  const auto& node = static_cast<const op::TopK&>(ctx.node);
  const Shape& in = node.get_input_shape(0);
  size_t axis = node.get_axis(), k = node.get_k(), n = in[axis];
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  bool is_max = node.get_compute_max();
  bool i64 = node.get_output_element_type(1) == element::i64;
  return element::dispatch(node.get_input_element_type(0), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [outer, inner, n, k, is_max, i64](const void* const* i, void* const* o) {
      const T* x = static_cast<const T*>(i[0]);
      T* values = static_cast<T*>(o[0]);
      std::vector<size_t> order(n);
      auto before = [&](const T* p, size_t a, size_t b) {
        T va = p[a * inner], vb = p[b * inner];
        bool na = va != va, nb = vb != vb;  // NaN: the largest
        if (na || nb) {
          if (na && nb) return a < b;
          return is_max ? na : nb;
        }
        if (va != vb) return is_max ? va > vb : va < vb;
        return a < b;
      };
      for (size_t a = 0; a < outer; ++a)
        for (size_t b = 0; b < inner; ++b) {
          const T* p = x + a * n * inner + b;
          for (size_t j = 0; j < n; ++j) order[j] = j;
          std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k),
                            order.end(), [&](size_t u, size_t v) { return before(p, u, v); });
          for (size_t j = 0; j < k; ++j) {
            size_t at = a * k * inner + j * inner + b;
            values[at] = p[order[j] * inner];
            if (i64) static_cast<int64_t*>(o[1])[at] = static_cast<int64_t>(order[j]);
            else static_cast<int32_t*>(o[1])[at] = static_cast<int32_t>(order[j]);
          }
        }
    };
  });
});

NGRAPH_CPU_KERNEL("Softmax", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& s = static_cast<const op::Softmax&>(node);
  const Shape& shape = s.get_shape();
  const AxisSet& axes = s.get_axes();
  element::Type t = s.get_element_type();
  // Over the innermost axes (a PyTorch softmax(dim=-1), attention's probabilities) each row is
  // contiguous: f32 and f64 go row by row, vectorised and across threads (row_softmax.hpp),
  // with this loop's results (NaN and all -inf rows included) within rounding.
  if ((t == element::f32 || t == element::f64) && !axes.empty() &&
      *axes.begin() == shape.size() - axes.size()) {
    size_t n = 1;
    for (size_t d : axes) n *= shape[d];
    return softmax_rows_kernel(t, n ? shape_size(shape) / n : 0, n);
  }
  // Other axes: max, exp(x - max), sum, divide; the reduced values live in a planned scratch
  // buffer. A NaN makes its whole row NaN, as in NumPy and PyTorch (oneDNN's softmax gives 0 for
  // the others).
  Shape reduced;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!axes.count(d)) reduced.push_back(shape[d]);
  size_t rn = shape_size(reduced);
  StridedLoop loop(shape, {reduced_strides(shape, axes), to_signed(row_major_strides(shape))});
  return element::dispatch(t, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    size_t scratch = ctx.scratch(std::max<size_t>(rn, 1) * sizeof(T));
    return [loop, scratch, rn](const void* const* i, void* const* o) {
      const T* x = static_cast<const T*>(i[0]);
      T* y = static_cast<T*>(o[0]);
      T* m = static_cast<T*>(o[scratch]);
      std::fill(m, m + rn, lowest<T>());
      accumulate(loop, m, x, [](T a, T b) { return b > a || b != b ? b : a; });  // NaN wins
      loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
        for (size_t k = 0; k < n; ++k) {
          auto kk = static_cast<std::ptrdiff_t>(k);
          y[off[1] + kk * inner[1]] = std::exp(x[off[1] + kk * inner[1]] - m[off[0] + kk * inner[0]]);
        }
      });
      std::fill(m, m + rn, T(0));
      accumulate(loop, m, static_cast<const T*>(y), [](T a, T b) { return a + b; });
      loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
        for (size_t k = 0; k < n; ++k) {
          auto kk = static_cast<std::ptrdiff_t>(k);
          y[off[1] + kk * inner[1]] /= m[off[0] + kk * inner[0]];
        }
      });
    };
  });
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
