// Batch normalization and multi-output nodes on the CPU backend: BatchNormTraining,
// BatchNormInference and BatchNormTrainingBackprop against reference loops written here, for
// f32 (oneDNN where it has an implementation) and f64 (the backend's loops), on [N, C],
// [N, C, W], [N, C, H, W] and larger inputs; and GetOutputElement, which names one output of a
// multi-output node and disappears when compiling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ngraph/ops.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using test::all_close;
using test::contains;
using test::make_value;
using test::to_vector;
using test::Value;

namespace {

// ------------------------------------------------------------------------- references

// Values of an input [N, C, ...]: element i belongs to channel (i / S) % C.
struct Layout {
  size_t c, s;
  explicit Layout(const Shape& shape) : c(shape[1]), s(1) {
    for (size_t i = 2; i < shape.size(); ++i) s *= shape[i];
  }
  size_t channel(size_t i) const { return (i / s) % c; }
};

struct Stats {
  std::vector<double> mean, var;
};

Stats ref_stats(const std::vector<double>& x, const Shape& shape) {
  Layout l(shape);
  std::vector<double> sum(l.c, 0), count(l.c, 0), sq(l.c, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    sum[l.channel(i)] += x[i];
    count[l.channel(i)] += 1;
  }
  Stats st{std::vector<double>(l.c), std::vector<double>(l.c)};
  for (size_t c = 0; c < l.c; ++c) st.mean[c] = sum[c] / count[c];
  for (size_t i = 0; i < x.size(); ++i) {
    double d = x[i] - st.mean[l.channel(i)];
    sq[l.channel(i)] += d * d;
  }
  for (size_t c = 0; c < l.c; ++c) st.var[c] = sq[c] / count[c];
  return st;
}

std::vector<double> ref_normalize(const std::vector<double>& x, const Shape& shape,
                                  const std::vector<double>& gamma,
                                  const std::vector<double>& beta, const Stats& st, double eps) {
  Layout l(shape);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = l.channel(i);
    y[i] = gamma[c] * (x[i] - st.mean[c]) / std::sqrt(st.var[c] + eps) + beta[c];
  }
  return y;
}

struct Grads {
  std::vector<double> dx, dgamma, dbeta;
};

// The textbook gradient of the training normalization, with xhat = (x - mean) / sqrt(var + eps).
Grads ref_backprop(const std::vector<double>& x, const Shape& shape,
                   const std::vector<double>& gamma, const Stats& st,
                   const std::vector<double>& dy, double eps) {
  Layout l(shape);
  double m = static_cast<double>(x.size() / l.c);
  Grads g{std::vector<double>(x.size()), std::vector<double>(l.c, 0), std::vector<double>(l.c, 0)};
  auto xhat = [&](size_t i) {
    size_t c = l.channel(i);
    return (x[i] - st.mean[c]) / std::sqrt(st.var[c] + eps);
  };
  for (size_t i = 0; i < x.size(); ++i) {
    g.dbeta[l.channel(i)] += dy[i];
    g.dgamma[l.channel(i)] += dy[i] * xhat(i);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = l.channel(i);
    g.dx[i] = gamma[c] / std::sqrt(st.var[c] + eps) *
              (dy[i] - g.dbeta[c] / m - xhat(i) * g.dgamma[c] / m);
  }
  return g;
}

// ------------------------------------------------------------------------------ data

std::vector<double> wave(size_t n, double scale, double offset, double phase) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = offset + scale * std::sin(0.37 * static_cast<double>(i) + phase);
  return v;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
Value value(const Shape& shape, const std::vector<double>& v) {
  return make_value(shape, cast<T>(v));
}

template <typename T>
::testing::AssertionResult close(const Value& got, const std::vector<double>& expected) {
  double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  return all_close(to_vector<T>(got), cast<T>(expected), tol, tol);
}

std::shared_ptr<op::Parameter> param(element::Type t, const Shape& s) {
  return std::make_shared<op::Parameter>(t, s);
}

// Runs `f` with and without the graph passes; both must agree byte for byte.
std::vector<Value> run_both(const std::shared_ptr<Function>& f, const std::vector<Value>& in) {
  auto optimized = test::run_function(f, in, true);
  auto plain = test::run_function(f, in, false);
  EXPECT_EQ(optimized.size(), plain.size());
  for (size_t i = 0; i < optimized.size() && i < plain.size(); ++i)
    EXPECT_EQ(optimized[i].bytes, plain[i].bytes) << "result " << i;
  return optimized;
}

// Ranks 2 to 6 (oneDNN covers up to 5), channel counts that fill and that do not fill a
// vector block, one element per channel.
const std::vector<Shape> kShapes = {{4, 3}, {2, 3, 5}, {2, 3, 4, 5}, {2, 16, 3, 3},
                                    {1, 8, 1, 1}, {2, 3, 2, 2, 2}, {2, 2, 1, 2, 1, 3}};
const std::vector<double> kEpsilons = {1e-5, 0.5};

template <typename T>
class batch_norm_exec : public ::testing::Test {};
using RealTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(batch_norm_exec, RealTypes);

}  // namespace

TYPED_TEST(batch_norm_exec, training_matches_reference) {
  using T = TypeParam;
  element::Type t = element::from<T>();
  for (const Shape& shape : kShapes)
    for (double eps : kEpsilons) {
      SCOPED_TRACE(to_braces(shape) + " eps " + std::to_string(eps));
      size_t c = shape[1];
      auto x = param(t, shape), gamma = param(t, {c}), beta = param(t, {c});
      auto bn = std::make_shared<op::BatchNormTraining>(x, gamma, beta, eps);
      auto f = std::make_shared<Function>(bn->outputs(), ParameterVector{gamma, beta, x});
      auto xv = wave(shape_size(shape), 2.0, 0.5, 0.0);
      auto gv = wave(c, 0.5, 1.0, 1.0), bv = wave(c, 1.0, 0.0, 2.0);
      auto out = run_both(f, {value<T>({c}, gv), value<T>({c}, bv), value<T>(shape, xv)});
      Stats st = ref_stats(xv, shape);
      EXPECT_TRUE(close<T>(out[0], ref_normalize(xv, shape, gv, bv, st, eps)));
      EXPECT_TRUE(close<T>(out[1], st.mean));
      EXPECT_TRUE(close<T>(out[2], st.var));
    }
}

TYPED_TEST(batch_norm_exec, inference_matches_reference) {
  using T = TypeParam;
  element::Type t = element::from<T>();
  for (const Shape& shape : kShapes)
    for (double eps : kEpsilons) {
      SCOPED_TRACE(to_braces(shape) + " eps " + std::to_string(eps));
      size_t c = shape[1];
      auto x = param(t, shape), gamma = param(t, {c}), beta = param(t, {c});
      auto mean = param(t, {c}), var = param(t, {c});
      auto bn = std::make_shared<op::BatchNormInference>(x, gamma, beta, mean, var, eps);
      auto f = std::make_shared<Function>(OutputVector{bn},
                                          ParameterVector{x, gamma, beta, mean, var});
      auto xv = wave(shape_size(shape), 2.0, 0.5, 0.0);
      auto gv = wave(c, 0.5, 1.0, 1.0), bv = wave(c, 1.0, 0.0, 2.0);
      Stats st{wave(c, 0.3, 0.2, 3.0), wave(c, 0.4, 1.0, 4.0)};  // variances in [0.6, 1.4]
      auto out = run_both(f, {value<T>(shape, xv), value<T>({c}, gv), value<T>({c}, bv),
                              value<T>({c}, st.mean), value<T>({c}, st.var)});
      EXPECT_TRUE(close<T>(out[0], ref_normalize(xv, shape, gv, bv, st, eps)));
    }
}

TYPED_TEST(batch_norm_exec, backprop_matches_reference) {
  using T = TypeParam;
  element::Type t = element::from<T>();
  for (const Shape& shape : kShapes)
    for (double eps : kEpsilons) {
      SCOPED_TRACE(to_braces(shape) + " eps " + std::to_string(eps));
      size_t c = shape[1];
      auto x = param(t, shape), gamma = param(t, {c}), beta = param(t, {c});
      auto mean = param(t, {c}), var = param(t, {c}), delta = param(t, shape);
      auto bp = std::make_shared<op::BatchNormTrainingBackprop>(x, gamma, beta, mean, var, delta,
                                                                eps);
      auto f = std::make_shared<Function>(bp->outputs(),
                                          ParameterVector{x, gamma, beta, mean, var, delta});
      auto xv = wave(shape_size(shape), 2.0, 0.5, 0.0), dy = wave(shape_size(shape), 1.0, 0.1, 5.0);
      auto gv = wave(c, 0.5, 1.0, 1.0), bv = wave(c, 1.0, 0.0, 2.0);
      Stats st = ref_stats(xv, shape);  // the statistics BatchNormTraining gives
      auto out = run_both(f, {value<T>(shape, xv), value<T>({c}, gv), value<T>({c}, bv),
                              value<T>({c}, st.mean), value<T>({c}, st.var), value<T>(shape, dy)});
      Grads g = ref_backprop(xv, shape, gv, st, dy, eps);
      EXPECT_TRUE(close<T>(out[0], g.dx));
      EXPECT_TRUE(close<T>(out[1], g.dgamma));
      EXPECT_TRUE(close<T>(out[2], g.dbeta));
    }
}

TYPED_TEST(batch_norm_exec, by_hand) {
  using T = TypeParam;
  element::Type t = element::from<T>();
  // Channel 0: {1, 3} (mean 2, variance 1); channel 1: {4, 4} (mean 4, variance 0).
  auto x = param(t, {2, 2}), gamma = param(t, {2}), beta = param(t, {2});
  auto bn = std::make_shared<op::BatchNormTraining>(x, gamma, beta, 0.0);
  auto f = std::make_shared<Function>(bn->outputs(), ParameterVector{x, gamma, beta});
  auto out = run_both(f, {value<T>({2, 2}, {1, 4, 3, 4}), value<T>({2}, {2, 1}),
                          value<T>({2}, {10, -1})});
  // y = gamma * (x - mean) / sqrt(var) + beta; channel 1 divides 0 by 0.
  auto y = to_vector<T>(out[0]);
  EXPECT_EQ(y[0], T(8));
  EXPECT_EQ(y[2], T(12));
  EXPECT_TRUE(std::isnan(y[1]) && std::isnan(y[3]));
  EXPECT_EQ(to_vector<T>(out[1]), (std::vector<T>{2, 4}));
  EXPECT_EQ(to_vector<T>(out[2]), (std::vector<T>{1, 0}));
}

TYPED_TEST(batch_norm_exec, empty_batch) {
  using T = TypeParam;
  element::Type t = element::from<T>();
  Shape shape{0, 3, 2};
  auto x = param(t, shape), gamma = param(t, {3}), beta = param(t, {3});
  auto bn = std::make_shared<op::BatchNormTraining>(x, gamma, beta, 1e-3);
  auto mean = param(t, {3}), var = param(t, {3}), delta = param(t, shape);
  auto bi = std::make_shared<op::BatchNormInference>(x, gamma, beta, mean, var, 1e-3);
  auto bp = std::make_shared<op::BatchNormTrainingBackprop>(x, gamma, beta, mean, var, delta, 1e-3);
  OutputVector results = bn->outputs();
  results.push_back(bi);
  for (const auto& o : bp->outputs()) results.push_back(o);
  auto f = std::make_shared<Function>(results,
                                      ParameterVector{x, gamma, beta, mean, var, delta});
  std::vector<double> c3{1, 2, 3};
  auto out = run_both(f, {value<T>(shape, {}), value<T>({3}, c3), value<T>({3}, c3),
                          value<T>({3}, c3), value<T>({3}, c3), value<T>(shape, {})});
  EXPECT_TRUE(out[0].bytes.empty());
  for (T v : to_vector<T>(out[1])) EXPECT_TRUE(std::isnan(v));  // the mean of nothing
  for (T v : to_vector<T>(out[2])) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(out[3].bytes.empty());
  EXPECT_TRUE(out[4].bytes.empty());
  EXPECT_EQ(to_vector<T>(out[5]), (std::vector<T>{0, 0, 0}));  // sums over nothing
  EXPECT_EQ(to_vector<T>(out[6]), (std::vector<T>{0, 0, 0}));
}

// ----------------------------------------------------------------------- GetOutputElement

TEST(get_output_element, is_removed_when_compiling) {
  auto x = param(element::f32, {4, 3}), gamma = param(element::f32, {3});
  auto beta = param(element::f32, {3});
  auto bn = std::make_shared<op::BatchNormTraining>(x, gamma, beta, 1e-5);
  auto y = std::make_shared<op::GetOutputElement>(bn, 0);
  auto var = std::make_shared<op::GetOutputElement>(bn, 2);
  auto z = std::make_shared<op::Multiply>(y, std::make_shared<op::GetOutputElement>(bn, 0));
  auto f = std::make_shared<Function>(OutputVector{z, var, y}, ParameterVector{x, gamma, beta});
  for (bool optimize : {true, false}) {
    SCOPED_TRACE(optimize ? "optimized" : "not optimized");
    runtime::cpu::CPUBackend backend;
    auto exe = std::dynamic_pointer_cast<runtime::cpu::CPUExecutable>(
        backend.compile(f, runtime::cpu::CompileOptions{optimize}));
    for (const auto& step : exe->get_schedule())
      EXPECT_FALSE(contains(step, "GetOutputElement")) << step;
    EXPECT_EQ(exe->get_step_count(), 2u);  // the batch norm and the multiply
    for (const auto& node : exe->get_function()->get_ordered_ops())
      EXPECT_NE(node->get_type_name(), "GetOutputElement");
  }
  auto xv = wave(12, 2.0, 0.5, 0.0), gv = wave(3, 0.5, 1.0, 1.0), bv = wave(3, 1.0, 0.0, 2.0);
  auto out = run_both(f, {value<float>({4, 3}, xv), value<float>({3}, gv), value<float>({3}, bv)});
  Stats st = ref_stats(xv, {4, 3});
  auto yv = ref_normalize(xv, {4, 3}, gv, bv, st, 1e-5);
  std::vector<double> y2;
  for (double v : yv) y2.push_back(v * v);
  EXPECT_TRUE(close<float>(out[0], y2));
  EXPECT_TRUE(close<float>(out[1], st.var));
  EXPECT_TRUE(close<float>(out[2], yv));
}

TEST(get_output_element, of_a_single_output_node_is_the_node) {
  auto x = param(element::f64, {3});
  auto e = std::make_shared<op::Exp>(x);
  EXPECT_EQ(op::get_output_element(e->output(0)), e);
  auto goe = std::make_shared<op::GetOutputElement>(e, 0);  // allowed: an identity
  auto f = std::make_shared<Function>(OutputVector{goe}, ParameterVector{x});
  auto out = run_both(f, {value<double>({3}, {0, 1, 2})});
  EXPECT_TRUE(close<double>(out[0], {1, std::exp(1.0), std::exp(2.0)}));
}
