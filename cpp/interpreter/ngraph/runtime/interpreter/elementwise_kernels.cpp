// Elementwise reference kernels: unary math, binary arithmetic, comparisons and logic with
// NumPy broadcasting, Select and Convert. Integer arithmetic wraps (as NumPy's does) instead
// of overflowing; NaN propagates through Maximum, Minimum and Sign as in NumPy.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {
namespace {

// Integer arithmetic in the unsigned type of the same width: wraps instead of overflowing.
template <typename T, typename F>
T wrapping(T a, T b, F f) {
  if constexpr (std::is_integral_v<T> && !is_boolean_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return static_cast<T>(f(a, b));
  }
}


// x < 0, written so that unsigned types compile without a comparison that is always false.
template <typename T>
bool is_negative(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0);
  (void)x;
  return false;
}

// ------------------------------------------------------------------------------- scalars

struct Negative {
  template <typename T> T operator()(T x) const {
    return wrapping(T(0), x, [](auto a, auto b) { return a - b; });
  }
};
struct Abs {
  template <typename T> T operator()(T x) const {
    if constexpr (is_real_v<T>) return std::fabs(x);
    else return is_negative(x) ? Negative{}(x) : x;
  }
};
struct Sign {
  template <typename T> T operator()(T x) const {
    if (is_nan(x)) return x;
    return static_cast<T>((T(0) < x) - is_negative(x));
  }
};
struct Floor {
  template <typename T> T operator()(T x) const {
    if constexpr (is_real_v<T>) return std::floor(x); else return x;
  }
};
struct Ceiling {
  template <typename T> T operator()(T x) const {
    if constexpr (is_real_v<T>) return std::ceil(x); else return x;
  }
};
struct Relu {
  template <typename T> T operator()(T x) const { return is_negative(x) ? T(0) : x; }
};
// The real-valued functions: instantiated for every type of the list, applied only to floats
// (the ops' type rules allow nothing else).
#define NGRAPH_REAL_FUNCTION(Name, expr)                                  \
  struct Name {                                                           \
    template <typename T> T operator()(T x) const {                       \
      if constexpr (is_real_v<T>) return expr; else return x;             \
    }                                                                     \
  };
NGRAPH_REAL_FUNCTION(Exp, std::exp(x))
NGRAPH_REAL_FUNCTION(Log, std::log(x))
NGRAPH_REAL_FUNCTION(Sqrt, std::sqrt(x))
NGRAPH_REAL_FUNCTION(Sin, std::sin(x))
NGRAPH_REAL_FUNCTION(Cos, std::cos(x))
NGRAPH_REAL_FUNCTION(Tan, std::tan(x))
NGRAPH_REAL_FUNCTION(Asin, std::asin(x))
NGRAPH_REAL_FUNCTION(Acos, std::acos(x))
NGRAPH_REAL_FUNCTION(Atan, std::atan(x))
NGRAPH_REAL_FUNCTION(Sinh, std::sinh(x))
NGRAPH_REAL_FUNCTION(Cosh, std::cosh(x))
NGRAPH_REAL_FUNCTION(Tanh, std::tanh(x))
NGRAPH_REAL_FUNCTION(Sigmoid, T(1) / (T(1) + std::exp(-x)))
NGRAPH_REAL_FUNCTION(Erf, std::erf(x))
NGRAPH_REAL_FUNCTION(Gelu, x * T(0.5) * (T(1) + std::erf(x / std::sqrt(T(2)))))
#undef NGRAPH_REAL_FUNCTION

struct Add {
  template <typename T> T operator()(T a, T b) const {
    return wrapping(a, b, [](auto x, auto y) { return x + y; });
  }
};
struct Subtract {
  template <typename T> T operator()(T a, T b) const {
    return wrapping(a, b, [](auto x, auto y) { return x - y; });
  }
};
struct Multiply {
  template <typename T> T operator()(T a, T b) const {
    return wrapping(a, b, [](auto x, auto y) { return x * y; });
  }
};
struct Maximum {
  template <typename T> T operator()(T a, T b) const {
    return is_nan(a) ? a : is_nan(b) ? b : a < b ? b : a;
  }
};
struct Minimum {
  template <typename T> T operator()(T a, T b) const {
    return is_nan(a) ? a : is_nan(b) ? b : b < a ? b : a;
  }
};
// Integers: exponentiation by squaring (wrapping); a negative exponent gives 0 unless the
// base is 1 or -1 (the integer part of the real result).
struct Power {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (is_real_v<T>) {
      return std::pow(a, b);
    } else {
      if constexpr (std::is_signed_v<T>)
        if (b < 0) return a == 1 ? T(1) : a == T(-1) ? (b % 2 ? T(-1) : T(1)) : T(0);
      T result = 1;
      for (; b; b /= 2) {
        if (b % 2) result = Multiply{}(result, a);
        a = Multiply{}(a, a);
      }
      return result;
    }
  }
};

struct Equal {
  template <typename T> bool operator()(T a, T b) const { return a == b; }
};
struct NotEqual {
  template <typename T> bool operator()(T a, T b) const { return a != b; }
};
struct Greater {
  template <typename T> bool operator()(T a, T b) const { return a > b; }
};
struct GreaterEq {
  template <typename T> bool operator()(T a, T b) const { return a >= b; }
};
struct Less {
  template <typename T> bool operator()(T a, T b) const { return a < b; }
};
struct LessEq {
  template <typename T> bool operator()(T a, T b) const { return a <= b; }
};
struct LogicalAnd {
  template <typename T> bool operator()(T a, T b) const { return a && b; }
};
struct LogicalOr {
  template <typename T> bool operator()(T a, T b) const { return a || b; }
};

// ------------------------------------------------------------------------------- kernels

template <typename F>
Kernel unary() {
  return [](KernelCall& c) {
    dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = c.input<T>(0);
      T* y = c.output<T>(0);
      for (size_t i = 0, n = shape_size(c.node.get_shape()); i < n; ++i) y[i] = F{}(x[i]);
    });
  };
}

// out[i] = f(a, b) over the NumPy broadcast of the inputs (equal shapes for "none"); R is the
// result's storage type (boolean for comparisons) or void for the inputs' type.
template <typename F, bool BoolOut>
Kernel binary() {
  return [](KernelCall& c) {
    const Shape& out = c.node.get_shape();
    auto ia = broadcast_offsets(c.node.get_input_shape(0), out);
    auto ib = broadcast_offsets(c.node.get_input_shape(1), out);
    dispatch(c.node, c.node.get_input_element_type(0), [&](auto tag) {
      using T = decltype(tag);
      using R = std::conditional_t<BoolOut, element::boolean_t, T>;
      const T* a = c.input<T>(0);
      const T* b = c.input<T>(1);
      R* y = c.output<R>(0);
      for (size_t i = 0; i < ia.size(); ++i) y[i] = static_cast<R>(F{}(a[ia[i]], b[ib[i]]));
    });
  };
}

#define NGRAPH_UNARY(Name) NGRAPH_INTERPRETER_KERNEL(#Name, unary<Name>());
NGRAPH_UNARY(Negative)
NGRAPH_UNARY(Abs)
NGRAPH_UNARY(Sign)
NGRAPH_UNARY(Floor)
NGRAPH_UNARY(Ceiling)
NGRAPH_UNARY(Relu)
NGRAPH_UNARY(Exp)
NGRAPH_UNARY(Log)
NGRAPH_UNARY(Sqrt)
NGRAPH_UNARY(Sin)
NGRAPH_UNARY(Cos)
NGRAPH_UNARY(Tan)
NGRAPH_UNARY(Asin)
NGRAPH_UNARY(Acos)
NGRAPH_UNARY(Atan)
NGRAPH_UNARY(Sinh)
NGRAPH_UNARY(Cosh)
NGRAPH_UNARY(Tanh)
NGRAPH_UNARY(Sigmoid)
NGRAPH_UNARY(Erf)
NGRAPH_UNARY(Gelu)
#undef NGRAPH_UNARY

#define NGRAPH_BINARY(Name, BoolOut) NGRAPH_INTERPRETER_KERNEL(#Name, binary<Name, BoolOut>());
NGRAPH_BINARY(Add, false)
NGRAPH_BINARY(Subtract, false)
NGRAPH_BINARY(Multiply, false)
NGRAPH_BINARY(Maximum, false)
NGRAPH_BINARY(Minimum, false)
NGRAPH_BINARY(Power, false)
NGRAPH_BINARY(Equal, true)
NGRAPH_BINARY(NotEqual, true)
NGRAPH_BINARY(Greater, true)
NGRAPH_BINARY(GreaterEq, true)
NGRAPH_BINARY(Less, true)
NGRAPH_BINARY(LessEq, true)
NGRAPH_BINARY(LogicalAnd, true)
NGRAPH_BINARY(LogicalOr, true)
#undef NGRAPH_BINARY

NGRAPH_INTERPRETER_KERNEL("LogicalNot", [](KernelCall& c) {
  const auto* x = c.input<element::boolean_t>(0);
  auto* y = c.output<element::boolean_t>(0);
  for (size_t i = 0, n = shape_size(c.node.get_shape()); i < n; ++i) y[i] = !x[i];
});

// StopGradient and GetOutputElement pass their input on.
Kernel copy_input() {
  return [](KernelCall& c) {
    size_t bytes = shape_size(c.node.get_shape()) * c.node.get_element_type().size();
    if (bytes) std::memcpy(c.out[0], c.in[0], bytes);
  };
}
NGRAPH_INTERPRETER_KERNEL("StopGradient", copy_input());
NGRAPH_INTERPRETER_KERNEL(op::GetOutputElement::type_name, copy_input());

// Reals divide; integers round toward negative infinity with pythondiv (Python's //), toward
// zero otherwise, and fail on division by zero.
NGRAPH_INTERPRETER_KERNEL("Divide", [](KernelCall& c) {
  bool pythondiv = static_cast<const op::Divide&>(c.node).is_pythondiv();
  const Shape& out = c.node.get_shape();
  auto ia = broadcast_offsets(c.node.get_input_shape(0), out);
  auto ib = broadcast_offsets(c.node.get_input_shape(1), out);
  dispatch(c.node, c.node.get_element_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = c.input<T>(0);
    const T* b = c.input<T>(1);
    T* y = c.output<T>(0);
    for (size_t i = 0; i < ia.size(); ++i) {
      T x = a[ia[i]], d = b[ib[i]];
      if constexpr (is_real_v<T> || is_boolean_v<T>) {
        y[i] = static_cast<T>(x / d);
      } else {
        if (d == 0)
          throw std::domain_error("[Divide] integer division by zero in " + c.node.get_name());
        if (std::is_signed_v<T> && d == T(-1)) {  // MIN / -1 overflows: negate, wrapping
          y[i] = Negative{}(x);
          continue;
        }
        T q = static_cast<T>(x / d);
        if (pythondiv && x % d != 0 && is_negative(x) != is_negative(d)) --q;
        y[i] = q;
      }
    }
  });
});

NGRAPH_INTERPRETER_KERNEL("Select", [](KernelCall& c) {
  const Shape& out = c.node.get_shape();
  auto ic = broadcast_offsets(c.node.get_input_shape(0), out);
  auto ia = broadcast_offsets(c.node.get_input_shape(1), out);
  auto ib = broadcast_offsets(c.node.get_input_shape(2), out);
  element::dispatch_storage(c.node.get_element_type(), [&](auto tag) {
    using T = decltype(tag);
    const auto* cond = c.input<element::boolean_t>(0);
    const T* a = c.input<T>(1);
    const T* b = c.input<T>(2);
    T* y = c.output<T>(0);
    for (size_t i = 0; i < ic.size(); ++i) y[i] = cond[ic[i]] ? a[ia[i]] : b[ib[i]];
  });
});

// C++ conversion; to boolean means != 0; to f16/bf16 rounds to nearest even.
NGRAPH_INTERPRETER_KERNEL("Convert", [](KernelCall& c) {
  size_t n = shape_size(c.node.get_shape());
  element::dispatch_storage(c.node.get_input_element_type(0), [&](auto from) {
    using S = decltype(from);
    element::dispatch_storage(c.node.get_element_type(), [&](auto to) {
      using D = decltype(to);
      const S* x = c.input<S>(0);
      D* y = c.output<D>(0);
      for (size_t i = 0; i < n; ++i)
        y[i] = is_boolean_v<D> ? static_cast<D>(x[i] != S(0)) : static_cast<D>(x[i]);
    });
  });
});

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
