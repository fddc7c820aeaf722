// Dot and MatMul: oneDNN's matmul for f32 (transposes given as strides, batch axes
// broadcast by oneDNN), loops for the other types. Mixed precision: bf16 operands with an f32
// output (and bias) run on oneDNN's bf16 matmul (f32 accumulation); the loops refuse them.
#include <cstring>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/op/matmul_bias.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/scalar_ops.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

using dims = dnnl::memory::dims;

// A batched GEMM problem: C[b] (M x N) = A[b] (M x K) * B[b] (K x N), with element strides
// for every axis of A, B and C (batch strides may be 0 for broadcast batches).
struct Gemm {
  dims batch;                 // broadcast batch shape (may be empty)
  dims a_batch, b_batch;      // per-operand batch sizes (1 where broadcast)
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  dnnl::memory::data_type operands = dnnl::memory::data_type::f32;  // A's and B's
  dnnl::memory::data_type result = dnnl::memory::data_type::f32;    // C's (bf16 activations)
};

// Row-major storage of a (possibly transposed) matrix, with batch axes in front.
dnnl::memory::desc gemm_desc(const dims& batch, int64_t rows, int64_t cols, bool trans, size_t r,
                             dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  dims d = batch;
  d.push_back(rows);
  d.push_back(cols);
  dims s(r, 0);
  s[r - 1] = trans ? rows : 1;
  s[r - 2] = trans ? 1 : cols;
  int64_t acc = rows * cols;
  for (size_t i = batch.size(); i-- > 0;) {
    s[i] = acc;
    acc *= batch[i];
  }
  return dnnl::memory::desc(d, type, s);
}

struct GemmPrimitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::memory::desc a, b, c, bias;
};

// The oneDNN matmul of `g`; `b_md` replaces the row-major weights when given (a layout the
// primitive chose). bias: add a row vector of n elements (input 2); relu: then ReLU.
GemmPrimitive gemm_primitive(const Gemm& g, bool bias, bool relu,
                             const dnnl::memory::desc* b_md = nullptr) {
  size_t r = g.batch.size() + 2;
  GemmPrimitive p;
  p.a = gemm_desc(g.a_batch, g.m, g.k, g.trans_a, r, g.operands);
  p.b = b_md ? *b_md : gemm_desc(g.b_batch, g.k, g.n, g.trans_b, r, g.operands);
  p.c = gemm_desc(g.batch, g.m, g.n, false, r, g.result);
  dnnl::primitive_attr attr = dnnl_attr();
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  dnnl::memory::dims bias_dims(r, 1);
  bias_dims[r - 1] = g.n;
  p.bias = plain_desc(Shape(bias_dims.begin(), bias_dims.end()));
  dnnl::matmul::desc d = bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  p.pd = dnnl::matmul::primitive_desc(d, attr, dnnl_engine());
  return p;
}

Kernel dnnl_gemm(KernelContext& ctx, const Gemm& g, bool bias = false, bool relu = false) {
  const TensorDesc& weights = ctx.input(1);
  auto p = gemm_primitive(g, bias, relu, weights.is_plain() ? nullptr : &weights.md());
  std::vector<DnnlArg> args{{DNNL_ARG_SRC, p.a, true, 0}, {DNNL_ARG_WEIGHTS, p.b, true, 1},
                            {DNNL_ARG_DST, p.c, false, 0}};
  if (bias) args.push_back({DNNL_ARG_BIAS, p.bias, true, 2});
  return dnnl_kernel(ctx, dnnl::matmul(p.pd), p.pd.scratchpad_desc(), args);
}

template <typename T>
Kernel loop_gemm(const Gemm& g) {
  // Batch offsets computed once: for every output batch index, the A and B matrix indices.
  std::vector<size_t> a_idx, b_idx;
  size_t nb = 1;
  for (auto d : g.batch) nb *= static_cast<size_t>(d);
  for (size_t bi = 0; bi < nb; ++bi) {
    size_t rem = bi, ai = 0, bj = 0, amul = 1, bmul = 1;
    for (size_t d = g.batch.size(); d-- > 0;) {
      size_t c = rem % static_cast<size_t>(g.batch[d]);
      rem /= static_cast<size_t>(g.batch[d]);
      if (g.a_batch[d] != 1) ai += c * amul;
      if (g.b_batch[d] != 1) bj += c * bmul;
      amul *= static_cast<size_t>(g.a_batch[d]);
      bmul *= static_cast<size_t>(g.b_batch[d]);
    }
    a_idx.push_back(ai);
    b_idx.push_back(bj);
  }
  auto m = static_cast<size_t>(g.m), n = static_cast<size_t>(g.n), k = static_cast<size_t>(g.k);
  bool ta = g.trans_a, tb = g.trans_b;
  return [=](const void* const* in, void* const* out) {
    const T* A = static_cast<const T*>(in[0]);
    const T* B = static_cast<const T*>(in[1]);
    T* C = static_cast<T*>(out[0]);
    for (size_t bi = 0; bi < a_idx.size(); ++bi) {
      const T* a = A + a_idx[bi] * m * k;
      const T* b = B + b_idx[bi] * k * n;
      T* c = C + bi * m * n;
      std::fill(c, c + m * n, T(0));
      for (size_t i = 0; i < m; ++i)
        for (size_t p = 0; p < k; ++p) {
          T av = ta ? a[p * m + i] : a[i * k + p];
          if (av == T(0)) continue;
          T* crow = c + i * n;
          if (tb) {
            for (size_t j = 0; j < n; ++j) crow[j] += av * b[j * k + p];
          } else {
            const T* brow = b + p * n;
            for (size_t j = 0; j < n; ++j) crow[j] += av * brow[j];
          }
        }
    }
  };
}

// bf16 operands (mixed precision), which only oneDNN computes.
bool bf16_operands(const Node& node) { return node.get_input_element_type(0) == element::bf16; }

// The product of bf16 operands stored in bf16 (Node::bf16_sets): oneDNN's matmul writes a bf16
// dst from its f32 accumulators; the kernel is chosen as for an f32 result.
element::Type result_type(const Node& node, Gemm& g) {
  if (bf16_operands(node)) g.operands = dnnl::memory::data_type::bf16;
  if (node.get_element_type() != element::bf16 || !node.is_bf16_stored_output(0)) return node.get_element_type();
  g.result = dnnl::memory::data_type::bf16;
  return element::f32;
}

Kernel gemm_kernel(KernelContext& ctx, Gemm g) {
  const Node& node = ctx.node;
  size_t out_bytes = ctx.output(0).bytes();
  if (out_bytes == 0) return [](const void* const*, void* const*) {};
  if (g.k == 0)
    return [out_bytes](const void* const*, void* const* out) { std::memset(out[0], 0, out_bytes); };
  element::Type t = result_type(node, g);
  if (t == element::f32 && g.batch.size() + 2 <= DNNL_MAX_NDIMS) return dnnl_gemm(ctx, g);
  if (bf16_operands(node))
    node.fail_type("CPU kernel computes bf16 operands on oneDNN only, which holds at most " +
                   std::to_string(DNNL_MAX_NDIMS) + " axes; convert the operands to f32");
  if (!t.is_numeric())
    node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
  return element::dispatch(t, [&](auto tag) -> Kernel { return loop_gemm<decltype(tag)>(g); });
}

// Bias and ReLU after a loop GEMM (types oneDNN does not cover).
template <typename T>
Kernel with_bias_relu(Kernel gemm, size_t m, size_t n, bool bias, bool relu) {
  return [gemm, m, n, bias, relu](const void* const* in, void* const* out) {
    gemm(in, out);
    T* c = static_cast<T*>(out[0]);
    const T* b = bias ? static_cast<const T*>(in[2]) : nullptr;
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        T v = static_cast<T>(c[i * n + j] + (b ? b[j] : T(0)));
        c[i * n + j] = relu && scalar::is_negative(v) ? T(0) : v;
      }
  };
}

Gemm matmul_bias_gemm(const MatMulBias& mm) {
  Gemm g;
  g.trans_a = mm.get_transpose_a();
  g.trans_b = mm.get_transpose_b();
  size_t m = 0, n = 0, k = 0;
  mm.get_gemm(m, n, k);
  g.m = static_cast<int64_t>(m);
  g.n = static_cast<int64_t>(n);
  g.k = static_cast<int64_t>(k);
  return g;
}

// The weights in the layout oneDNN's matmul picks for this product (format_tag::any), when they
// are a variable that can be kept in it between calls (`free`: its update is written in it,
// so no call reorders it) and are not read transposed (a transpose is free as strides; a
// reorder is not). Weights produced row-major every call (a parameter, a computed value) stay
// row-major: on AVX-512 machines oneDNN picks a blocked layout for them too, which would cost
// a reorder of the weights in every call. Where it picks row-major, as it does on AVX2
// machines, nothing changes.
void matmul_bias_layout(LayoutContext& lc) {
  auto& mm = static_cast<const MatMulBias&>(lc.node);
  Gemm g = matmul_bias_gemm(mm);
  // A 2-D weight whose matrix is itself (split after its first axis), read untransposed.
  if (mm.get_element_type() != element::f32 || bf16_operands(mm) || g.trans_b || g.k == 0 || shape_size(mm.get_shape()) == 0 ||
      mm.get_input_shape(1).size() != 2 || mm.get_input_shape(1) != Shape{static_cast<size_t>(g.k), static_cast<size_t>(g.n)})
    return;
  if (lc.free.size() < 2 || !lc.free[1]) return;
  dnnl::memory::desc any({g.k, g.n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
  auto p = gemm_primitive(g, mm.has_bias(), mm.get_relu(), &any);
  lc.wanted[1] = TensorDesc::with_layout(element::f32, mm.get_input_shape(1), p.pd.weights_desc());
}

NGRAPH_CPU_KERNEL("CPUMatMulBias", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& mm = static_cast<const MatMulBias&>(node);
  Gemm g = matmul_bias_gemm(mm);
  bool bias = mm.has_bias(), relu = mm.get_relu();
  element::Type t = result_type(mm, g);
  size_t out_n = ctx.output(0).elements();
  if (out_n == 0) return [](const void* const*, void* const*) {};
  if (t == element::f32 && g.k > 0) return dnnl_gemm(ctx, g, bias, relu);
  // k == 0 or other types: the plain GEMM (zeros when k == 0), then bias and ReLU.
  Kernel gemm = gemm_kernel(ctx, g);
  auto m = static_cast<size_t>(g.m), n = static_cast<size_t>(g.n);
  if (!t.is_numeric())
    node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
  return element::dispatch(
      t, [&](auto tag) -> Kernel { return with_bias_relu<decltype(tag)>(gemm, m, n, bias, relu); });
}, matmul_bias_layout);

NGRAPH_CPU_KERNEL("Dot", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& d = static_cast<const op::Dot&>(node);
  const Shape& a = d.get_input_shape(0);
  const Shape& b = d.get_input_shape(1);
  size_t r = d.get_reduction_axes_count();
  Gemm g;
  g.m = g.n = g.k = 1;
  for (size_t i = 0; i < a.size() - r; ++i) g.m *= static_cast<int64_t>(a[i]);
  for (size_t i = a.size() - r; i < a.size(); ++i) g.k *= static_cast<int64_t>(a[i]);
  for (size_t i = r; i < b.size(); ++i) g.n *= static_cast<int64_t>(b[i]);
  return gemm_kernel(ctx, g);
});

NGRAPH_CPU_KERNEL("MatMul", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& mm = static_cast<const op::MatMul&>(node);
  Shape a = mm.get_input_shape(0), b = mm.get_input_shape(1);
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  Gemm g;
  g.trans_a = mm.get_transpose_a() && !a_vec;
  g.trans_b = mm.get_transpose_b() && !b_vec;
  g.m = static_cast<int64_t>(g.trans_a ? a.back() : a[a.size() - 2]);
  g.k = static_cast<int64_t>(g.trans_a ? a[a.size() - 2] : a.back());
  g.n = static_cast<int64_t>(g.trans_b ? b[b.size() - 2] : b.back());
  size_t rank = std::max(a.size(), b.size()) - 2;
  g.a_batch.assign(rank, 1);
  g.b_batch.assign(rank, 1);
  for (size_t i = 0; i + 2 < a.size(); ++i) g.a_batch[rank - (a.size() - 2) + i] = static_cast<int64_t>(a[i]);
  for (size_t i = 0; i + 2 < b.size(); ++i) g.b_batch[rank - (b.size() - 2) + i] = static_cast<int64_t>(b[i]);
  for (size_t i = 0; i < rank; ++i) g.batch.push_back(std::max(g.a_batch[i], g.b_batch[i]));
  return gemm_kernel(ctx, g);
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
