// Elementwise kernels: unary math, binary arithmetic/comparison/logic with NumPy
// broadcasting, Select and Convert. f32 goes through oneDNN eltwise/binary where it has the
// operation; everything else is a tight loop over coalesced strides.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

// Calls f(T{}) for the numeric storage types only.
template <typename F>
decltype(auto) dispatch_numeric(const Node& node, element::Type t, F&& f) {
  switch (t.get_type_enum()) {
    case element::Type_t::f32: return f(float{});
    case element::Type_t::f64: return f(double{});
    case element::Type_t::i32: return f(int32_t{});
    case element::Type_t::i64: return f(int64_t{});
    default: break;
  }
  node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
}

// oneDNN's per-execution overhead (about a microsecond) is more than a loop over a few
// thousand elements costs: small tensors stay on the loops.
bool dnnl_worthwhile(const Shape& s) { return dnnl_rank_ok(s) && shape_size(s) >= 4096; }

// ---------------------------------------------------------------------------------- unary

template <typename T, typename F>
Kernel unary_loop(size_t n, F f) {
  return [n, f](const void* const* in, void* const* out) {
    const T* a = static_cast<const T*>(in[0]);
    T* o = static_cast<T*>(out[0]);
    for (size_t i = 0; i < n; ++i) o[i] = f(a[i]);
  };
}

Kernel dnnl_eltwise(const Shape& shape, dnnl::algorithm alg, float alpha, float beta) {
  auto md = plain_desc(shape);
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
  dnnl::eltwise_forward::primitive_desc pd(d, dnnl_engine());
  dnnl::eltwise_forward prim(pd);
  dnnl::memory src(md, dnnl_engine(), DNNL_MEMORY_NONE), dst(md, dnnl_engine(), DNNL_MEMORY_NONE);
  return [prim, src, dst](const void* const* in, void* const* out) mutable {
    src.set_data_handle(const_cast<void*>(in[0]));
    dst.set_data_handle(out[0]);
    prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  };
}

// Unary op kernel: f32 via oneDNN `alg` when has_alg, else the loop `f`.
template <typename F>
KernelBuilder unary(F f, bool real_only, bool has_alg = false,
                    dnnl::algorithm alg = dnnl::algorithm::undef, float alpha = 0.f) {
  return [=](const Node& node) -> Kernel {
    const Shape& shape = node.get_shape();
    size_t n = shape_size(shape);
    element::Type t = node.get_element_type();
    if (has_alg && t == element::f32 && dnnl_worthwhile(shape)) return dnnl_eltwise(shape, alg, alpha, 0.f);
    if (real_only) {
      if (t == element::f32) return unary_loop<float>(n, [f](float x) { return static_cast<float>(f(x)); });
      if (t == element::f64) return unary_loop<double>(n, [f](double x) { return static_cast<double>(f(x)); });
      node.fail_type("CPU kernel needs f32 or f64, got " + t.get_type_name());
    }
    return dispatch_numeric(node, t, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      return unary_loop<T>(n, [f](T x) { return static_cast<T>(f(x)); });
    });
  };
}

using dnnl::algorithm;
NGRAPH_CPU_KERNEL("Negative", unary([](auto x) { return -x; }, false, true, algorithm::eltwise_linear, -1.f));
NGRAPH_CPU_KERNEL("Abs", unary([](auto x) { return x < 0 ? -x : x; }, false, true, algorithm::eltwise_abs));
NGRAPH_CPU_KERNEL("Sign", unary([](auto x) { return static_cast<decltype(x)>((x > 0) - (x < 0)); }, false));
NGRAPH_CPU_KERNEL("Floor", unary([](auto x) {
  if constexpr (std::is_floating_point_v<decltype(x)>) return std::floor(x); else return x;
}, false));
NGRAPH_CPU_KERNEL("Ceiling", unary([](auto x) {
  if constexpr (std::is_floating_point_v<decltype(x)>) return std::ceil(x); else return x;
}, false));
NGRAPH_CPU_KERNEL("Relu", unary([](auto x) { return x > 0 ? x : decltype(x){0}; }, false, true, algorithm::eltwise_relu));
NGRAPH_CPU_KERNEL("Exp", unary([](auto x) { return std::exp(x); }, true, true, algorithm::eltwise_exp));
// Not oneDNN's eltwise_log: near 1 it is off by ~1e-6 absolute (log(1) != 0, 0.1% relative
// error at 0.999), which std::log is not.
NGRAPH_CPU_KERNEL("Log", unary([](auto x) { return std::log(x); }, true));
NGRAPH_CPU_KERNEL("Sqrt", unary([](auto x) { return std::sqrt(x); }, true, true, algorithm::eltwise_sqrt));
NGRAPH_CPU_KERNEL("Sin", unary([](auto x) { return std::sin(x); }, true));
NGRAPH_CPU_KERNEL("Cos", unary([](auto x) { return std::cos(x); }, true));
NGRAPH_CPU_KERNEL("Tanh", unary([](auto x) { return std::tanh(x); }, true, true, algorithm::eltwise_tanh));
NGRAPH_CPU_KERNEL("Sigmoid", unary([](auto x) -> decltype(x) {
  using T = decltype(x);
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}, true, true, algorithm::eltwise_logistic));

NGRAPH_CPU_KERNEL("StopGradient", [](const Node& node) -> Kernel {
  size_t bytes = shape_size(node.get_shape()) * node.get_element_type().size();
  return [bytes](const void* const* in, void* const* out) {
    if (bytes) std::memcpy(out[0], in[0], bytes);
  };
});

NGRAPH_CPU_KERNEL("LogicalNot", [](const Node& node) -> Kernel {
  return unary_loop<char>(shape_size(node.get_shape()), [](char x) { return static_cast<char>(!x); });
});

// --------------------------------------------------------------------------------- binary

// out[i] = f(a[i], b[i]) over the broadcast of a and b.
template <typename T, typename R, typename F>
Kernel binary_loop(const Node& node, F f) {
  const Shape& out = node.get_shape();
  StridedLoop loop(out, {to_signed(row_major_strides(out)),
                         broadcast_strides(node.get_input_shape(0), out),
                         broadcast_strides(node.get_input_shape(1), out)});
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
bool dnnl_binary_ok(const Node& node) {
  const Shape& out = node.get_shape();
  return node.get_input_element_type(0) == element::f32 && node.get_input_shape(0) == out &&
         dnnl_worthwhile(out) && shape_size(node.get_input_shape(1)) > 0;
}

Kernel dnnl_binary(const Node& node, dnnl::algorithm alg) {
  const Shape& out = node.get_shape();
  size_t rank = std::max<size_t>(out.size(), 1);
  auto md0 = plain_desc(node.get_input_shape(0), rank);
  auto md1 = plain_desc(node.get_input_shape(1), rank);
  auto mdo = plain_desc(out, rank);
  dnnl::binary::desc d(alg, md0, md1, mdo);
  dnnl::binary::primitive_desc pd(d, dnnl_engine());
  dnnl::binary prim(pd);
  dnnl::memory m0(md0, dnnl_engine(), DNNL_MEMORY_NONE), m1(md1, dnnl_engine(), DNNL_MEMORY_NONE),
      mo(mdo, dnnl_engine(), DNNL_MEMORY_NONE);
  return [prim, m0, m1, mo](const void* const* in, void* const* outp) mutable {
    m0.set_data_handle(const_cast<void*>(in[0]));
    m1.set_data_handle(const_cast<void*>(in[1]));
    mo.set_data_handle(outp[0]);
    prim.execute(dnnl_stream(), {{DNNL_ARG_SRC_0, m0}, {DNNL_ARG_SRC_1, m1}, {DNNL_ARG_DST, mo}});
  };
}

template <typename F>
KernelBuilder arithmetic(F f, bool has_alg = false, dnnl::algorithm alg = dnnl::algorithm::undef) {
  return [=](const Node& node) -> Kernel {
    if (shape_size(node.get_shape()) == 0) return [](const void* const*, void* const*) {};
    if (has_alg && dnnl_binary_ok(node)) return dnnl_binary(node, alg);
    return dispatch_numeric(node, node.get_input_element_type(0), [&](auto tag) -> Kernel {
      using T = decltype(tag);
      return binary_loop<T, T>(node, [f](T a, T b) { return static_cast<T>(f(a, b)); });
    });
  };
}

template <typename F>
KernelBuilder comparison(F f) {
  return [=](const Node& node) -> Kernel {
    return element::dispatch(node.get_input_element_type(0), [&](auto tag) -> Kernel {
      using T = decltype(tag);
      return binary_loop<T, char>(node, [f](T a, T b) { return static_cast<char>(f(a, b)); });
    });
  };
}

template <typename T>
T int_power(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp % 2) ? -1 : 1) : 0;
  T result = 1;
  while (exp) {
    if (exp & 1) result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}

NGRAPH_CPU_KERNEL("Add", arithmetic([](auto a, auto b) { return a + b; }, true, algorithm::binary_add));
NGRAPH_CPU_KERNEL("Subtract", arithmetic([](auto a, auto b) { return a - b; }, true, algorithm::binary_sub));
NGRAPH_CPU_KERNEL("Multiply", arithmetic([](auto a, auto b) { return a * b; }, true, algorithm::binary_mul));
// NaN in either argument gives NaN, as NumPy's maximum/minimum and the Max/Min reductions do
// (oneDNN's binary_max/min return the other argument when the first is NaN).
NGRAPH_CPU_KERNEL("Maximum", arithmetic([](auto a, auto b) { return a < b || b != b ? b : a; }));
NGRAPH_CPU_KERNEL("Minimum", arithmetic([](auto a, auto b) { return b < a || b != b ? b : a; }));
NGRAPH_CPU_KERNEL("Power", arithmetic([](auto a, auto b) {
  using T = decltype(a);
  if constexpr (std::is_floating_point_v<T>) return std::pow(a, b); else return int_power<T>(a, b);
}));

NGRAPH_CPU_KERNEL("Divide", [](const Node& node) -> Kernel {
  if (shape_size(node.get_shape()) == 0) return [](const void* const*, void* const*) {};
  element::Type t = node.get_input_element_type(0);
  if (t.is_real()) {
    if (dnnl_binary_ok(node)) return dnnl_binary(node, algorithm::binary_div);
    if (t == element::f32) return binary_loop<float, float>(node, [](float a, float b) { return a / b; });
    return binary_loop<double, double>(node, [](double a, double b) { return a / b; });
  }
  bool pythondiv = static_cast<const op::Divide&>(node).is_pythondiv();
  std::string name = node.get_name();
  auto int_divide = [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return binary_loop<T, T>(node, [pythondiv, name](T a, T b) -> T {
      if (b == 0) throw std::domain_error("[Divide] integer division by zero in " + name);
      // MIN / -1 traps and -MIN overflows: negate in unsigned arithmetic, which wraps to MIN.
      if (b == -1) return static_cast<T>(0u - static_cast<std::make_unsigned_t<T>>(a));
      T q = a / b;
      if (pythondiv && (a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    });
  };
  if (t == element::i32) return int_divide(int32_t{});
  return int_divide(int64_t{});
});

NGRAPH_CPU_KERNEL("Equal", comparison([](auto a, auto b) { return a == b; }));
NGRAPH_CPU_KERNEL("NotEqual", comparison([](auto a, auto b) { return a != b; }));
NGRAPH_CPU_KERNEL("Greater", comparison([](auto a, auto b) { return a > b; }));
NGRAPH_CPU_KERNEL("GreaterEq", comparison([](auto a, auto b) { return a >= b; }));
NGRAPH_CPU_KERNEL("Less", comparison([](auto a, auto b) { return a < b; }));
NGRAPH_CPU_KERNEL("LessEq", comparison([](auto a, auto b) { return a <= b; }));
NGRAPH_CPU_KERNEL("LogicalAnd", [](const Node& node) -> Kernel {
  return binary_loop<char, char>(node, [](char a, char b) { return static_cast<char>(a && b); });
});
NGRAPH_CPU_KERNEL("LogicalOr", [](const Node& node) -> Kernel {
  return binary_loop<char, char>(node, [](char a, char b) { return static_cast<char>(a || b); });
});

// ------------------------------------------------------------------------- select, convert

NGRAPH_CPU_KERNEL("Select", [](const Node& node) -> Kernel {
  const Shape& out = node.get_shape();
  StridedLoop loop(out, {to_signed(row_major_strides(out)),
                         broadcast_strides(node.get_input_shape(0), out),
                         broadcast_strides(node.get_input_shape(1), out),
                         broadcast_strides(node.get_input_shape(2), out)});
  return element::dispatch(node.get_element_type(), [&](auto tag) -> Kernel {
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

NGRAPH_CPU_KERNEL("Convert", [](const Node& node) -> Kernel {
  size_t n = shape_size(node.get_shape());
  element::Type to = node.get_element_type();
  return element::dispatch(node.get_input_element_type(0), [&](auto from_tag) -> Kernel {
    using S = decltype(from_tag);
    return element::dispatch(to, [&](auto to_tag) -> Kernel {
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
