// Elementwise kernels: unary math, binary arithmetic/comparison/logic with NumPy
// broadcasting, Select and Convert. The math is scalar_ops.hpp's; the kernels are registered
// from its lists. f32 goes through oneDNN eltwise/binary where it has the operation;
// everything else is a tight loop over coalesced strides.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/scalar_ops.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

// Calls f(T{}) for the numeric storage types only (element::dispatch's list without boolean).
template <typename F>
Kernel dispatch_numeric(const Node& node, element::Type t, F&& f) {
  if (!t.is_numeric())
    node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
  return element::dispatch(t, [&](auto tag) -> Kernel {
    if constexpr (std::is_same_v<decltype(tag), element::boolean_t>) return Kernel{};
    else return f(tag);
  });
}

// ---------------------------------------------------------------------------------- unary

// Unary kernels run over the storage elements (padding included when the layout rule passed
// a blocked layout through: the op then keeps zeros zero).
template <typename T, typename F>
Kernel unary_loop(size_t n, F f) {
  return [n, f](const void* const* in, void* const* out) {
    const T* a = static_cast<const T*>(in[0]);
    T* o = static_cast<T*>(out[0]);
    for (size_t i = 0; i < n; ++i) o[i] = f(a[i]);
  };
}

template <typename F>
Kernel unary_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  size_t n = ctx.output(0).elements();
  element::Type t = node.get_element_type();
  // Stored in bf16 (bf16_sets: Gelu): oneDNN's eltwise reads and writes bf16, computes in f32.
  bool bf16 = t == element::bf16 && node.is_bf16_stored_output(0);
  if (bf16) t = element::f32;
  if (bf16 && (F::dnnl == dnnl::algorithm::undef || !dnnl_worthwhile(n)))
    node.fail_type("CPU kernel stores bf16 through oneDNN only, from 4096 elements");
  if (F::dnnl != dnnl::algorithm::undef && t == element::f32 && dnnl_worthwhile(n)) {
    auto md = bf16 ? dnnl::memory::desc({static_cast<int64_t>(n)}, dnnl::memory::data_type::bf16,
                                        dnnl::memory::format_tag::a)
                   : flat_desc(n);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, F::dnnl, md, F::alpha, 0.f);
    dnnl::eltwise_forward::primitive_desc pd(d, dnnl_attr(), dnnl_engine());
    return dnnl_kernel(ctx, dnnl::eltwise_forward(pd), pd.scratchpad_desc(),
                       {{DNNL_ARG_SRC, md, true, 0}, {DNNL_ARG_DST, md, false, 0}});
  }
  if (F::real_only) {
    if (t == element::f32) return unary_loop<float>(n, F{});
    if (t == element::f64) return unary_loop<double>(n, F{});
    node.fail_type("CPU kernel needs f32 or f64, got " + t.get_type_name());
  }
  return dispatch_numeric(node, t, [&](auto tag) -> Kernel { return unary_loop<decltype(tag)>(n, F{}); });
}

#define NGRAPH_CPU_UNARY_KERNEL(Name) \
  NGRAPH_CPU_KERNEL(#Name, unary_kernel<scalar::Name>, elementwise_layout(scalar::Name::zero_preserving));
NGRAPH_CPU_UNARY_OPS(NGRAPH_CPU_UNARY_KERNEL)
#undef NGRAPH_CPU_UNARY_KERNEL

NGRAPH_CPU_KERNEL("StopGradient", [](KernelContext& ctx) -> Kernel {
  size_t bytes = ctx.output(0).bytes();
  return [bytes](const void* const* in, void* const* out) {
    if (bytes) std::memcpy(out[0], in[0], bytes);
  };
}, elementwise_layout(true));

NGRAPH_CPU_KERNEL("LogicalNot", [](KernelContext& ctx) -> Kernel {
  return unary_loop<char>(ctx.output(0).elements(), [](char x) { return static_cast<char>(!x); });
});

// --------------------------------------------------------------------------------- binary

// out[i] = f(a[i], b[i]) over the broadcast of a and b; over the storage elements when the
// layout rule passed a blocked layout through (then both inputs have the output's layout).
template <typename T, typename R, typename F>
Kernel binary_loop(KernelContext& ctx, F f) {
  const Node& node = ctx.node;
  bool flat = !ctx.output(0).is_plain();
  Shape out = flat ? Shape{ctx.output(0).elements()} : node.get_shape();
  StridedLoop loop(out, {to_signed(row_major_strides(out)),
                         flat ? to_signed(row_major_strides(out)) : broadcast_strides(node.get_input_shape(0), out),
                         flat ? to_signed(row_major_strides(out)) : broadcast_strides(node.get_input_shape(1), out)});
  return [loop, f](const void* const* in, void* const* outp) {
    const T* a = static_cast<const T*>(in[0]);
    const T* b = static_cast<const T*>(in[1]);
    R* o = static_cast<R*>(outp[0]);
    loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
      R* po = o + off[0];
      const T* pa = a + off[1];
      const T* pb = b + off[2];
      std::ptrdiff_t sa = inner[1], sb = inner[2];
      if (sa == 1 && sb == 1) {
        for (size_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(pa[i], pb[i]));
      } else if (sa == 1 && sb == 0) {
        T vb = *pb;
        for (size_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(pa[i], vb));
      } else if (sa == 0 && sb == 1) {
        T va = *pa;
        for (size_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(va, pb[i]));
      } else {
        for (size_t i = 0; i < n; ++i) {
          auto ii = static_cast<std::ptrdiff_t>(i);
          po[i] = static_cast<R>(f(pa[ii * sa], pb[ii * sb]));
        }
      }
    });
  };
}

// f32 with arg0 already of the output's shape: oneDNN binary (arg1 may broadcast).
bool dnnl_binary_ok(const KernelContext& ctx) {
  const Node& node = ctx.node;
  const Shape& out = node.get_shape();
  return node.get_input_element_type(0) == element::f32 && ctx.output(0).is_plain() &&
         node.get_input_shape(0) == out && dnnl_rank_ok(out) &&
         dnnl_worthwhile(ctx.output(0).elements()) && shape_size(node.get_input_shape(1)) > 0;
}

Kernel dnnl_binary(KernelContext& ctx, dnnl::algorithm alg) {
  const Node& node = ctx.node;
  const Shape& out = node.get_shape();
  size_t rank = std::max<size_t>(out.size(), 1);
  auto md0 = plain_desc(node.get_input_shape(0), rank);
  auto md1 = plain_desc(node.get_input_shape(1), rank);
  auto mdo = plain_desc(out, rank);
  dnnl::binary::desc d(alg, md0, md1, mdo);
  dnnl::binary::primitive_desc pd(d, dnnl_attr(), dnnl_engine());
  return dnnl_kernel(ctx, dnnl::binary(pd), pd.scratchpad_desc(),
                     {{DNNL_ARG_SRC_0, md0, true, 0}, {DNNL_ARG_SRC_1, md1, true, 1},
                      {DNNL_ARG_DST, mdo, false, 0}});
}

template <typename F>
Kernel arithmetic_kernel(KernelContext& ctx) {
  if (ctx.output(0).elements() == 0) return [](const void* const*, void* const*) {};
  if (F::dnnl != dnnl::algorithm::undef && dnnl_binary_ok(ctx)) return dnnl_binary(ctx, F::dnnl);
  return dispatch_numeric(ctx.node, ctx.node.get_input_element_type(0), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return binary_loop<T, T>(ctx, F{});
  });
}

template <typename F>
Kernel comparison_kernel(KernelContext& ctx) {
  return element::dispatch(ctx.node.get_input_element_type(0), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return binary_loop<T, char>(ctx, [](T a, T b) { return static_cast<char>(F{}(a, b)); });
  });
}

#define NGRAPH_CPU_BINARY_KERNEL(Name) \
  NGRAPH_CPU_KERNEL(#Name, arithmetic_kernel<scalar::Name>, elementwise_layout(scalar::Name::zero_preserving));
NGRAPH_CPU_BINARY_OPS(NGRAPH_CPU_BINARY_KERNEL)
#undef NGRAPH_CPU_BINARY_KERNEL
#define NGRAPH_CPU_COMPARE_KERNEL(Name) NGRAPH_CPU_KERNEL(#Name, comparison_kernel<scalar::Name>);
NGRAPH_CPU_COMPARE_OPS(NGRAPH_CPU_COMPARE_KERNEL)
#undef NGRAPH_CPU_COMPARE_KERNEL

NGRAPH_CPU_KERNEL("Divide", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  element::Type t = node.get_input_element_type(0);
  if (t.is_real()) return arithmetic_kernel<scalar::Divide>(ctx);
  if (ctx.output(0).elements() == 0) return [](const void* const*, void* const*) {};
  bool pythondiv = static_cast<const op::Divide&>(node).is_pythondiv();
  std::string name = node.get_name();
  return dispatch_numeric(node, t, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    if constexpr (!std::is_integral_v<T>) return Kernel{};  // reals: handled above
    else return binary_loop<T, T>(ctx, [pythondiv, name](T a, T b) -> T {
      if (b == 0) throw std::domain_error("[Divide] integer division by zero in " + name);
      if constexpr (std::is_signed_v<T>) {
        // MIN / -1 traps and -MIN overflows: negate in unsigned arithmetic, which wraps to MIN.
        if (b == -1) return static_cast<T>(0u - static_cast<std::make_unsigned_t<T>>(a));
        T q = static_cast<T>(a / b);
        if (pythondiv && (a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return static_cast<T>(a / b);
      }
    });
  });
}, elementwise_layout(scalar::Divide::zero_preserving));

NGRAPH_CPU_KERNEL("LogicalAnd", [](KernelContext& ctx) -> Kernel {
  return binary_loop<char, char>(ctx, [](char a, char b) { return static_cast<char>(a && b); });
});
NGRAPH_CPU_KERNEL("LogicalOr", [](KernelContext& ctx) -> Kernel {
  return binary_loop<char, char>(ctx, [](char a, char b) { return static_cast<char>(a || b); });
});

// ------------------------------------------------------------------------- select, convert

NGRAPH_CPU_KERNEL("Select", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  const Shape& out = node.get_shape();
  StridedLoop loop(out, {to_signed(row_major_strides(out)),
                         broadcast_strides(node.get_input_shape(0), out),
                         broadcast_strides(node.get_input_shape(1), out),
                         broadcast_strides(node.get_input_shape(2), out)});
  return element::dispatch_storage(node.get_element_type(), [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [loop](const void* const* in, void* const* outp) {
      const char* c = static_cast<const char*>(in[0]);
      const T* a = static_cast<const T*>(in[1]);
      const T* b = static_cast<const T*>(in[2]);
      T* o = static_cast<T*>(outp[0]);
      loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
        T* po = o + off[0];
        const char* pc = c + off[1];
        const T* pa = a + off[2];
        const T* pb = b + off[3];
        if (inner[0] == 1 && inner[1] == 1 && inner[2] == 1 && inner[3] == 1) {
          for (size_t i = 0; i < n; ++i) po[i] = pc[i] ? pa[i] : pb[i];
        } else if (inner[0] == 1 && inner[1] == 1 && inner[2] == 1 && inner[3] == 0) {
          T vb = *pb;
          for (size_t i = 0; i < n; ++i) po[i] = pc[i] ? pa[i] : vb;
        } else if (inner[0] == 1 && inner[1] == 1 && inner[2] == 0 && inner[3] == 1) {
          T va = *pa;
          for (size_t i = 0; i < n; ++i) po[i] = pc[i] ? va : pb[i];
        } else {
          for (size_t i = 0; i < n; ++i) {
            auto ii = static_cast<std::ptrdiff_t>(i);
            po[ii * inner[0]] = pc[ii * inner[1]] ? pa[ii * inner[2]] : pb[ii * inner[3]];
          }
        }
      });
    };
  });
});

// Values convert as C++ converts them (integers from reals truncate toward zero); to boolean
// means != 0; to f16/bf16 rounds to nearest even (ngraph/low_precision.hpp). Not oneDNN's
// reorder, which has f32 <-> f16/bf16: in oneDNN 2.6 on AVX2 (its "simple:any" reorder) it
// turns -0.0 into +0.0 both ways and flushes float32 subnormals to zero on the way to bf16.
NGRAPH_CPU_KERNEL("Convert", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  size_t n = ctx.output(0).elements();
  element::Type from = node.get_input_element_type(0), to = node.get_element_type();
  return element::dispatch_storage(from, [&](auto from_tag) -> Kernel {
    using S = decltype(from_tag);
    return element::dispatch_storage(to, [&](auto to_tag) -> Kernel {
      using D = decltype(to_tag);
      bool to_bool = to == element::boolean;
      return [n, to_bool](const void* const* in, void* const* out) {
        const S* a = static_cast<const S*>(in[0]);
        D* o = static_cast<D*>(out[0]);
        if (to_bool) {
          for (size_t i = 0; i < n; ++i) o[i] = static_cast<D>(a[i] != S(0));
        } else {
          for (size_t i = 0; i < n; ++i) o[i] = static_cast<D>(a[i]);
        }
      };
    });
  });
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
