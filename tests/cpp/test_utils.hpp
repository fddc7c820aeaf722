// Helpers shared by the C++ suites: host values, running functions on the CPU backend (and
// on INTERPRETER, the reference it must agree with),
// comparing results and checking error messages.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"

namespace ngraph {
namespace test {

// A host value: element type, shape and row-major bytes.
struct Value {
  element::Type type;
  Shape shape;
  std::vector<char> bytes;
};

// `T` is the storage type: float, double, int32_t, int64_t, or char for boolean.
template <typename T>
Value make_value(const Shape& shape, const std::vector<T>& values) {
  if (values.size() != shape_size(shape))
    throw std::logic_error("test value: " + std::to_string(values.size()) + " values for shape " +
                           to_braces(shape));
  Value v{element::from<T>(), shape, std::vector<char>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(v.bytes.data(), values.data(), v.bytes.size());
  return v;
}

template <typename T>
std::vector<T> to_vector(const Value& v) {
  if (v.type != element::from<T>())
    throw std::logic_error("test value holds " + v.type.get_type_name() + ", read as " +
                           element::from<T>().get_type_name());
  std::vector<T> out(v.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
  return out;
}

// Literal lists converted to T, so one list serves every element type in typed tests.
template <typename T>
std::vector<T> vec(std::initializer_list<double> values) {
  std::vector<T> out;
  for (double v : values) out.push_back(static_cast<T>(v));
  return out;
}

inline std::shared_ptr<runtime::Backend> cpu_backend() {
  static auto backend = runtime::Backend::create("CPU");
  return backend;
}

// Runs a compiled function once on host values, through the checked call path.
inline std::vector<Value> run_executable(runtime::Backend& backend, runtime::Executable& exe,
                                         const std::vector<Value>& inputs) {
  std::vector<std::shared_ptr<runtime::Tensor>> in, out;
  for (const auto& v : inputs) {
    in.push_back(backend.create_tensor(v.type, v.shape));
    in.back()->write(v.bytes.data(), v.bytes.size());
  }
  for (const auto& r : exe.get_results())
    out.push_back(backend.create_tensor(r->get_element_type(), r->get_shape()));
  exe.call(out, in);
  std::vector<Value> values;
  for (const auto& t : out) {
    Value v{t->get_element_type(), t->get_shape(), std::vector<char>(t->get_size_in_bytes())};
    t->read(v.bytes.data(), v.bytes.size());
    values.push_back(std::move(v));
  }
  return values;
}

// Compiles `f` on the CPU backend (with or without the graph passes) and runs it once.
inline std::vector<Value> run_function(const std::shared_ptr<Function>& f,
                                       const std::vector<Value>& inputs, bool optimize = true) {
  auto backend = cpu_backend();
  auto cpu = std::dynamic_pointer_cast<runtime::cpu::CPUBackend>(backend);
  if (!cpu) throw std::logic_error("the CPU backend is not a CPUBackend");
  return run_executable(*backend, *cpu->compile(f, runtime::cpu::CompileOptions{optimize}), inputs);
}

// Compiles `f` on the CPU backend with `options` and runs it once; the step list (one line per
// step, see CPUExecutable::get_schedule) goes to `schedule` when given.
inline std::vector<Value> run_compiled(const std::shared_ptr<Function>& f,
                                       const std::vector<Value>& inputs,
                                       const runtime::cpu::CompileOptions& options,
                                       std::vector<std::string>* schedule = nullptr) {
  auto backend = cpu_backend();
  auto cpu = std::dynamic_pointer_cast<runtime::cpu::CPUBackend>(backend);
  if (!cpu) throw std::logic_error("the CPU backend is not a CPUBackend");
  auto exe = cpu->compile(f, options);
  if (schedule)
    *schedule = std::dynamic_pointer_cast<runtime::cpu::CPUExecutable>(exe)->get_schedule();
  return run_executable(*backend, *exe, inputs);
}

// How many steps of a schedule run the op `type` (a step line starts with "<type>_<id>").
inline size_t count_steps(const std::vector<std::string>& schedule, const std::string& type) {
  size_t n = 0;
  for (const auto& step : schedule) n += step.rfind(type + "_", 0) == 0;
  return n;
}

inline std::shared_ptr<runtime::Backend> interpreter_backend() {
  static auto backend = runtime::Backend::create("INTERPRETER");
  return backend;
}

// Runs `f` once on the INTERPRETER backend (the reference executor).
inline std::vector<Value> run_on_interpreter(const std::shared_ptr<Function>& f,
                                             const std::vector<Value>& inputs) {
  auto backend = interpreter_backend();
  return run_executable(*backend, *backend->compile(f), inputs);
}

// Whether two values agree: the same bytes, or for floats within a relative tolerance of the
// type's precision (NaN matching NaN).
inline bool values_agree(const Value& a, const Value& b) {
  if (a.type != b.type || a.shape != b.shape) return false;
  if (!a.type.is_real()) return a.bytes == b.bytes;
  if (a.type.is_storage_only()) {  // f16, bf16: rounded the same way, so equal (NaN: any NaN)
    bool agree = true;
    element::dispatch_storage(a.type, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_low_precision_v<T>) {
        std::vector<T> x(a.bytes.size() / 2), y(b.bytes.size() / 2);
        std::memcpy(x.data(), a.bytes.data(), a.bytes.size());
        std::memcpy(y.data(), b.bytes.data(), b.bytes.size());
        for (size_t i = 0; i < x.size() && agree; ++i)
          agree = (x[i].is_nan() && y[i].is_nan()) || x[i].bits() == y[i].bits();
      }
    });
    return agree;
  }
  double tol = a.type == element::f32 ? 1e-4 : 1e-10;
  bool agree = true;
  element::dispatch(a.type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<T> x = to_vector<T>(a), y = to_vector<T>(b);
      for (size_t i = 0; i < x.size() && agree; ++i)
        agree = (std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i] ||
                std::fabs(double(x[i]) - double(y[i])) <= tol * (1 + std::fabs(double(y[i])));
    }
  });
  return agree;
}

using OpFactory = std::function<std::shared_ptr<Node>(const OutputVector&)>;

// One Parameter per input, the op built on them, run with and without the passes (both must
// agree byte for byte) and on the INTERPRETER backend (which must agree within the float
// type's precision); returns the op's value.
inline Value run_op_value(const OpFactory& make, const std::vector<Value>& inputs) {
  ParameterVector params;
  OutputVector args;
  for (const auto& v : inputs) {
    auto p = std::make_shared<op::Parameter>(v.type, v.shape);
    params.push_back(p);
    args.push_back(p);
  }
  auto node = make(args);
  auto f = std::make_shared<Function>(OutputVector{node->output(0)}, params);
  Value optimized = run_function(f, inputs, true).at(0);
  Value plain = run_function(f, inputs, false).at(0);
  EXPECT_EQ(optimized.bytes, plain.bytes)
      << "optimised and unoptimised runs differ for " << node->get_type_name();
  EXPECT_TRUE(values_agree(optimized, run_on_interpreter(f, inputs).at(0)))
      << "the CPU and INTERPRETER backends differ for " << node->description();
  EXPECT_EQ(optimized.shape, node->get_shape());
  return optimized;
}

template <typename R>
std::vector<R> run_op(const OpFactory& make, const std::vector<Value>& inputs) {
  return to_vector<R>(run_op_value(make, inputs));
}

// Element-by-element comparison: exact for integers, relative+absolute tolerance for floats
// (NaN equals NaN, infinities must match).
template <typename T>
::testing::AssertionResult all_close(const std::vector<T>& actual, const std::vector<T>& expected,
                                     double rtol = 1e-5, double atol = 1e-6) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      double a = actual[i], e = expected[i];
      if (std::isnan(e))
        ok = std::isnan(a);
      else if (std::isinf(e))
        ok = a == e;
      else
        ok = std::fabs(a - e) <= atol + rtol * std::fabs(e);
    } else {
      ok = actual[i] == expected[i];
    }
    if (!ok)
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << +actual[i] << ", expected " << +expected[i];
  }
  return ::testing::AssertionSuccess();
}

// The message of the exception `f` throws, which must be an E. Shape errors must not be
// ElementTypeErrors, so checking NodeValidationFailure excludes them.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    if constexpr (!std::is_same_v<E, std::exception>) {
      if (!dynamic_cast<const E*>(&e)) {
        ADD_FAILURE() << "threw the wrong exception type: " << e.what();
        return "";
      }
    }
    if constexpr (std::is_same_v<E, NodeValidationFailure>) {
      if (dynamic_cast<const ElementTypeError*>(&e))
        ADD_FAILURE() << "expected a shape error, got an ElementTypeError: " << e.what();
    }
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace test
}  // namespace ngraph
