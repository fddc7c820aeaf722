// Gradients (autodiff::Adjoints) of every differentiable op against central finite
// differences, in f64 on the CPU backend.
//
// A case builds `out = op(x0, x1, ...)` on one f64 Parameter per input and differentiates
// y = Sum(out * R) over all axes, R a fixed pseudo-random Constant (every output element counts,
// each with its own weight), with respect to every parameter. One compiled function returns y
// and the gradients; each gradient entry is compared with (y(x + h) - y(x - h)) / 2h.
//
// Every op of OpRegistry is either covered here (kCoveredOps: a TEST(autodiff_fd, <Op>) whose
// cases each build a graph containing <Op>), not differentiable (kNotDifferentiable), or
// tested elsewhere (kTestedElsewhere: the collectives, under MPI in tests/cpp/mpi), so that an
// op added without a gradient test fails autodiff.every_op_has_a_gradient_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/backend.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using test::contains;

namespace {

const element::Type F64 = element::f64;
constexpr const char* kFdSuite = "autodiff_fd";

// ------------------------------------------------------------------------- the op lists

// Ops with a TEST(autodiff_fd, <Op>) below.
const std::vector<std::string> kCoveredOps = {
    "Add",     "Subtract", "Multiply", "Divide",  "Power",        "Maximum", "Minimum", "Negative",
    "Abs",     "Exp",      "Log",      "Sqrt",    "Sign",         "Floor",   "Ceiling", "Sin",
    "Cos",     "Tanh",     "Sigmoid",  "Erf",     "Gelu",    "Relu",    "StopGradient", "Dot",     "MatMul",  "Broadcast",
    "Sum",     "Reshape",  "Slice",    "Concat",  "Pad",          "Reverse", "Max",     "Min",
    "Product", "Softmax",  "Select",   "Convert", "Result",  "Convolution",
    "GetOutputElement",    "BatchNormTraining",   "BatchNormInference",
    "MaxPool", "AvgPool",  "AvgPoolBackprop",     "LRN",
    "Tan",     "Asin",     "Acos",     "Atan",    "Sinh",    "Cosh",    "TopK",
    "Gather",  "EmbeddingLookup",      "ScatterAdd", "LayerNorm", "Dropout", "ReplaceSlice",
    "Split",   "Tile",
};

// No gradient: boolean or integer results, leaves and sinks.
const std::vector<std::string> kNotDifferentiable = {
    "ArgMax",    "ArgMin",   "Equal",      "NotEqual",  "Greater",    "GreaterEq",
    "Less",      "LessEq",   "LogicalAnd", "LogicalOr", "LogicalNot", "OneHot",
    "Parameter", "Constant", "Variable",   "Assign",    "Send",       "Recv",
    // The gradients of a convolution: linear in each input, not differentiated again.
    "ConvolutionBackpropData", "ConvolutionBackpropFilters",
    "BatchNormTrainingBackprop",  // the gradient of BatchNormTraining; no second order
    "LayerNormBackprop",          // the gradient of LayerNorm; no second order
    // Gradients of gradients: no rule (AvgPoolBackprop, linear in delta, has its exact one).
    "MaxPoolBackprop", "LRNBackprop",
};

// Collectives have gradient rules, checked across ranks by tests/cpp/mpi/mpi_gradients_test.cpp.
const std::vector<std::string> kTestedElsewhere = {
    "AllReduce",
    "BroadcastDistributed",
    "AllGather",
    "ReduceScatter",
};

// ------------------------------------------------------------------------------ data

struct Array {
  Shape shape;
  std::vector<double> values;
};

// splitmix64: the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : m_state(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  uint64_t next() {
    uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * std::ldexp(static_cast<double>(next() >> 11), -53);
  }

 private:
  uint64_t m_state;
};

// any: [-2, 2); pos: [0.5, 2); nonzero: +-[0.5, 2); away_int: k + 0.5 +- 0.3 (far from
// integers); distinct: no two values within 0.05.
enum class Kind { any, pos, nonzero, away_int, distinct, unit };

Array data(const Shape& shape, Kind kind = Kind::any, uint64_t seed = 0) {
  Rng rng(seed);
  size_t n = shape_size(shape);
  std::vector<double> v(n);
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (kind == Kind::distinct)
    for (size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
      case Kind::any: v[i] = rng.uniform(-2.0, 2.0); break;
      case Kind::pos: v[i] = rng.uniform(0.5, 2.0); break;
      // Inside the domains of asin and acos, away from the poles of tan.
      case Kind::unit: v[i] = rng.uniform(-0.9, 0.9); break;
      case Kind::nonzero: v[i] = rng.uniform(0.5, 2.0) * ((rng.next() & 1) ? 1.0 : -1.0); break;
      case Kind::away_int:
        v[i] = std::floor(rng.uniform(-3.0, 3.0)) + 0.5 + rng.uniform(-0.3, 0.3);
        break;
      case Kind::distinct:
        v[i] = (static_cast<double>(perm[i]) - static_cast<double>(n) / 2) * 0.1 +
               rng.uniform(-0.02, 0.02);
        break;
    }
  }
  return {shape, v};
}

Array array(const Shape& shape, const std::vector<double>& values) {
  return {shape, values};
}

std::vector<double> weights(const Shape& shape, uint64_t seed = 1234) {
  return data(shape, Kind::any, seed).values;
}

std::string sid(const Shape& s) {
  return s.empty() ? "scalar" : join(s, "x");
}

// NumPy broadcasting, for choosing Maximum/Minimum data without ties.
Shape numpy_shape(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    size_t da = d + a.size() < rank ? 1 : a[d + a.size() - rank];
    size_t db = d + b.size() < rank ? 1 : b[d + b.size() - rank];
    out[d] = da == 1 ? db : da;
  }
  return out;
}

size_t broadcast_index(const Shape& shape, const Shape& out, size_t flat) {
  std::vector<size_t> coord(out.size());
  for (size_t d = out.size(); d-- > 0;) {
    coord[d] = flat % out[d];
    flat /= out[d];
  }
  size_t lead = out.size() - shape.size(), idx = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    idx = idx * shape[d] + (shape[d] == 1 ? 0 : coord[lead + d]);
  return idx;
}

double min_broadcast_gap(const Array& a, const Array& b) {
  Shape out = numpy_shape(a.shape, b.shape);
  double gap = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < shape_size(out); ++i)
    gap = std::min(gap, std::fabs(a.values[broadcast_index(a.shape, out, i)] -
                                  b.values[broadcast_index(b.shape, out, i)]));
  return gap;
}

// ----------------------------------------------------------------------- graph helpers

using Builder = std::function<Output(const OutputVector&)>;

Output cst(double v) {
  return std::make_shared<op::Constant>(F64, Shape{}, std::vector<double>{v});
}
Output cst(const Shape& shape, const std::vector<double>& v) {
  return std::make_shared<op::Constant>(F64, shape, v);
}
AxisSet all_axes(const Shape& s) {
  AxisSet axes;
  for (size_t i = 0; i < s.size(); ++i) axes.insert(i);
  return axes;
}
Output sum_all(const Output& x) {
  return std::make_shared<op::Sum>(x, all_axes(x.get_shape()));
}
Output weighted_sum(const Output& out, uint64_t seed = 1234) {
  const Shape& s = out.get_shape();
  return sum_all(std::make_shared<op::Multiply>(out, cst(s, weights(s, seed))));
}
Output mul(const Output& a, const Output& b) {
  return std::make_shared<op::Multiply>(a, b, "numpy");
}
Output add(const Output& a, const Output& b) {
  return std::make_shared<op::Add>(a, b, "numpy");
}

// The gradient of the scalar y with respect to x (seed 1).
Output gradient(const Output& y, const Output& x) {
  autodiff::Adjoints adj(OutputVector{y}, OutputVector{cst(1.0)});
  return adj.backprop_output(x);
}

bool graph_has(const Output& out, const std::string& op) {
  for (const auto& n : topological_sort({out.get_node_shared_ptr()}))
    if (n->get_type_name() == op) return true;
  return false;
}

// A function compiled on the CPU backend, run on f64 host arrays.
class Compiled {
 public:
  explicit Compiled(const std::shared_ptr<Function>& f) : m_backend(backend()) {
    m_exe = m_backend->compile(f);
    for (const auto& p : f->get_parameters())
      m_in.push_back(m_backend->create_tensor(p->get_element_type(), p->get_shape()));
    for (const auto& r : f->get_results())
      m_out.push_back(m_backend->create_tensor(r->get_element_type(), r->get_shape()));
  }
  std::vector<std::vector<double>> run(const std::vector<Array>& inputs) {
    if (inputs.size() != m_in.size()) throw std::logic_error("wrong number of inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (m_in[i]->get_element_type() != F64 || m_in[i]->get_shape() != inputs[i].shape)
        throw std::logic_error("input " + std::to_string(i) + " is f64" +
                               to_braces(inputs[i].shape) + ", not the parameter's type and shape");
      m_in[i]->write(inputs[i].values.data(), inputs[i].values.size() * sizeof(double));
    }
    m_exe->set_rng_step(0);  // random ops (Dropout) draw the same values in every run
    m_exe->call(m_out, m_in);
    std::vector<std::vector<double>> out;
    for (const auto& t : m_out) {
      if (t->get_element_type() != F64) throw std::logic_error("output is not f64");
      std::vector<double> v(t->get_element_count());
      t->read(v.data(), v.size() * sizeof(double));
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  static std::shared_ptr<runtime::Backend> backend() {
    static auto b = runtime::Backend::create("CPU");
    return b;
  }
  std::shared_ptr<runtime::Backend> m_backend;
  std::shared_ptr<runtime::Executable> m_exe;
  std::vector<std::shared_ptr<runtime::Tensor>> m_in, m_out;
};

// Builds `outputs(params)` on one f64 Parameter per input and runs it once.
std::vector<std::vector<double>> evaluate(
    const std::function<OutputVector(const OutputVector&)>& outputs,
    const std::vector<Array>& inputs) {
  ParameterVector params;
  OutputVector args;
  for (const auto& a : inputs) {
    params.push_back(std::make_shared<op::Parameter>(F64, a.shape));
    args.push_back(params.back());
  }
  return Compiled(std::make_shared<Function>(outputs(args), params)).run(inputs);
}

// ---------------------------------------------------------------- the finite-difference check

struct Tol {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-7;
};

// In TEST(autodiff_fd, <Op>), the op every case's graph must contain.
std::string op_under_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!info || std::string(info->test_suite_name()) != kFdSuite) return "";
  return info->name();
}

// Checks the gradients of y = Sum(build(params) * R) (of build(params) itself when `scalar`)
// against central differences; returns the computed gradients (empty if building failed).
std::vector<std::vector<double>> check_gradients(const std::string& id, const Builder& build,
                                                 const std::vector<Array>& inputs, Tol tol = {},
                                                 bool scalar = false) {
  SCOPED_TRACE(id);
  ParameterVector params;
  OutputVector args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].values.size() != shape_size(inputs[i].shape)) {
      ADD_FAILURE() << "input " << i << " has " << inputs[i].values.size() << " values for shape "
                    << inputs[i].shape;
      return {};
    }
    auto p = std::make_shared<op::Parameter>(F64, inputs[i].shape);
    p->set_friendly_name("x" + std::to_string(i));
    params.push_back(p);
    args.push_back(p);
  }
  Output out = build(args);
  if (out.get_element_type() != F64) {
    ADD_FAILURE() << "the case's output is " << out.get_element_type().get_type_name();
    return {};
  }
  std::string op = op_under_test();
  if (!op.empty() && !graph_has(out, op)) {
    ADD_FAILURE() << "the graph has no " << op << " node";
    return {};
  }
  Output y = scalar ? out : weighted_sum(out);
  if (!y.get_shape().empty()) {
    ADD_FAILURE() << "the differentiated value has shape " << y.get_shape();
    return {};
  }
  autodiff::Adjoints adj(OutputVector{y}, OutputVector{cst(1.0)});
  OutputVector results{y};
  for (const auto& p : params) {
    Output g = adj.backprop_output(p);
    EXPECT_EQ(g.get_shape(), p->get_shape()) << "gradient of " << p->get_friendly_name();
    EXPECT_EQ(g.get_element_type(), F64) << "gradient of " << p->get_friendly_name();
    if (g.get_shape() != p->get_shape() || g.get_element_type() != F64) return {};
    results.push_back(g);
  }
  Compiled compiled(std::make_shared<Function>(results, params));
  auto at_x = compiled.run(inputs);
  std::vector<std::vector<double>> analytic(at_x.begin() + 1, at_x.end());
  std::vector<Array> shifted = inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t bad = 0;
    std::ostringstream report;
    report << std::setprecision(12);
    for (size_t j = 0; j < inputs[i].values.size(); ++j) {
      double x = inputs[i].values[j];
      shifted[i].values[j] = x + tol.eps;
      double plus = compiled.run(shifted)[0][0];
      shifted[i].values[j] = x - tol.eps;
      double minus = compiled.run(shifted)[0][0];
      shifted[i].values[j] = x;
      double numeric = (plus - minus) / (2 * tol.eps);
      double a = analytic[i][j];
      bool ok =
          std::isfinite(a) && std::fabs(a - numeric) <= tol.atol + tol.rtol * std::fabs(numeric);
      if (!ok && bad++ < 5)
        report << "\n  d/dx" << i << "[" << j << "]: autodiff " << a << ", finite differences "
               << numeric << " (x = " << x << ")";
    }
    EXPECT_EQ(bad, 0u) << "d/dx" << i << " (shape " << inputs[i].shape << "): " << bad << " of "
                       << inputs[i].values.size() << " entries differ" << report.str();
  }
  return analytic;
}

// ------------------------------------------------------------------------ case families

const std::vector<Shape> kUnaryShapes = {{}, {1}, {4}, {2, 3}, {2, 1, 3}};

struct ShapePair {
  Shape a, b;
};
// Equal shapes, leading axes, size-1 axes on both sides, rank 0.
const std::vector<ShapePair> kBinaryShapes = {
    {{3, 4}, {3, 4}},    {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}}, {{3, 1}, {1, 4}},
    {{2, 1, 3}, {5, 1}}, {{}, {2, 3}},     {{2, 3}, {}},     {{}, {}},
    {{1, 1}, {2, 3}},    {{0, 3}, {1, 3}}, {{1, 3}, {0, 3}}, {{2, 0}, {2, 1}},
};

template <typename Op>
Builder unary_op() {
  return [](const OutputVector& in) -> Output { return std::make_shared<Op>(in[0]); };
}

template <typename Op>
std::vector<std::vector<std::vector<double>>> check_unary(Kind kind = Kind::any) {
  std::vector<std::vector<std::vector<double>>> grads;
  const std::string name = Op::type_name;
  for (size_t i = 0; i < kUnaryShapes.size(); ++i)
    grads.push_back(check_gradients(name + "-" + sid(kUnaryShapes[i]), unary_op<Op>(),
                                    {data(kUnaryShapes[i], kind, i)}));
  return grads;
}

// Every shape pair with auto_broadcast "numpy", and equal shapes with the default "none".
template <typename Op>
void check_binary(Kind kind0 = Kind::any, Kind kind1 = Kind::any, bool no_ties = false) {
  const std::string name = Op::type_name;
  for (size_t i = 0; i < kBinaryShapes.size(); ++i) {
    const auto& s = kBinaryShapes[i];
    Array a = data(s.a, kind0, i), b = data(s.b, kind1, 100 + i);
    for (uint64_t seed = 200; no_ties && min_broadcast_gap(a, b) < 0.1; ++seed)
      b = data(s.b, kind1, seed);
    check_gradients(name + "-" + sid(s.a) + "-" + sid(s.b),
                    [](const OutputVector& in) -> Output {
                      return std::make_shared<Op>(in[0], in[1], "numpy");
                    },
                    {a, b});
  }
  Array a = data({2, 3}, kind0, 50), b = data({2, 3}, kind1, 51);
  for (uint64_t seed = 300; no_ties && min_broadcast_gap(a, b) < 0.1; ++seed)
    b = data({2, 3}, kind1, seed);
  check_gradients(
      name + "-no-broadcast",
      [](const OutputVector& in) -> Output { return std::make_shared<Op>(in[0], in[1]); }, {a, b});
}

void expect_all_zero(const std::vector<std::vector<std::vector<double>>>& grads) {
  for (const auto& per_case : grads)
    for (const auto& g : per_case)
      for (double v : g) EXPECT_EQ(v, 0.0);
}

}  // namespace

// ============================================================ finite differences, op by op

TEST(autodiff_fd, Add) {
  check_binary<op::Add>();
}
TEST(autodiff_fd, Subtract) {
  check_binary<op::Subtract>();
}
TEST(autodiff_fd, Multiply) {
  check_binary<op::Multiply>();
}
TEST(autodiff_fd, Divide) {
  check_binary<op::Divide>(Kind::any, Kind::nonzero);
}

TEST(autodiff_fd, Power) {
  check_binary<op::Power>(Kind::pos, Kind::any);
  auto power = [](const Output& a, const Output& b) -> Output {
    return std::make_shared<op::Power>(a, b, "numpy");
  };
  check_gradients("cube-negative-base",
                  [&](const OutputVector& in) { return power(in[0], cst(3.0)); },
                  {data({2, 3}, Kind::any, 5)});
  check_gradients("square-scalar", [&](const OutputVector& in) { return power(in[0], cst(2.0)); },
                  {array({}, {-1.3})});
  check_gradients("sqrt-exponent", [&](const OutputVector& in) { return power(in[0], cst(0.5)); },
                  {data({4}, Kind::pos, 6)});
  check_gradients("constant-base", [&](const OutputVector& in) { return power(cst(2.0), in[0]); },
                  {data({3}, Kind::any, 6)});
  // 0^b is 0 around b > 0: d/db is 0 there (not 0 * log(0) = nan).
  check_gradients("zero-base", [&](const OutputVector& in) { return power(in[0], in[1]); },
                  {array({4}, {0.0, 0.5, 1.5, 0.0}), array({4}, {2.0, 3.0, 2.0, 1.0})});
  check_gradients(
      "relu-base-learnable-exponent",
      [&](const OutputVector& in) { return power(std::make_shared<op::Relu>(in[0]), in[1]); },
      {data({2, 3}, Kind::nonzero, 8), array({}, {2.5})});
}

TEST(autodiff_fd, Maximum) {
  check_binary<op::Maximum>(Kind::any, Kind::any, true);
}
TEST(autodiff_fd, Minimum) {
  check_binary<op::Minimum>(Kind::any, Kind::any, true);
}

TEST(autodiff_fd, Negative) {
  check_unary<op::Negative>();
}
TEST(autodiff_fd, Abs) {
  check_unary<op::Abs>(Kind::nonzero);
}
TEST(autodiff_fd, Exp) {
  check_unary<op::Exp>();
}
TEST(autodiff_fd, Log) {
  check_unary<op::Log>(Kind::pos);
}
TEST(autodiff_fd, Sqrt) {
  check_unary<op::Sqrt>(Kind::pos);
}
// Piecewise constant: the gradient is exactly 0 away from the jumps.
TEST(autodiff_fd, Sign) {
  expect_all_zero(check_unary<op::Sign>(Kind::nonzero));
}
TEST(autodiff_fd, Floor) {
  expect_all_zero(check_unary<op::Floor>(Kind::away_int));
}
TEST(autodiff_fd, Ceiling) {
  expect_all_zero(check_unary<op::Ceiling>(Kind::away_int));
}
TEST(autodiff_fd, Sin) {
  check_unary<op::Sin>();
}
TEST(autodiff_fd, Cos) {
  check_unary<op::Cos>();
}
TEST(autodiff_fd, Tan) {
  check_unary<op::Tan>(Kind::unit);
}
TEST(autodiff_fd, Asin) {
  check_unary<op::Asin>(Kind::unit);
}
TEST(autodiff_fd, Acos) {
  check_unary<op::Acos>(Kind::unit);
}
TEST(autodiff_fd, Atan) {
  check_unary<op::Atan>();
}
TEST(autodiff_fd, Sinh) {
  check_unary<op::Sinh>();
}
TEST(autodiff_fd, Cosh) {
  check_unary<op::Cosh>();
}
// The values output of TopK: each value's gradient goes to the element it was picked from
// (distinct data: no ties).
TEST(autodiff_fd, TopK) {
  struct C {
    const char* id;
    Shape in;
    size_t k, axis;
    bool max;
  };
  for (const C& c : std::vector<C>{{"max-last", {3, 4}, 2, 1, true},
                                   {"min-first", {4, 3}, 3, 0, false},
                                   {"all-middle", {2, 4, 3}, 4, 1, true}})
    check_gradients(std::string("TopK-") + c.id,
                    [c](const OutputVector& in) -> Output {
                      return std::make_shared<op::TopK>(in[0], c.k, c.axis, c.max)->output(0);
                    },
                    {data(c.in, Kind::distinct, 7)});
}
TEST(autodiff_fd, Tanh) {
  check_unary<op::Tanh>();
}
TEST(autodiff_fd, Sigmoid) {
  check_unary<op::Sigmoid>();
}
TEST(autodiff_fd, Erf) {
  check_unary<op::Erf>();
}
TEST(autodiff_fd, Gelu) {
  check_unary<op::Gelu>();
}
TEST(autodiff_fd, Relu) {
  check_unary<op::Relu>(Kind::nonzero);
}

// StopGradient(sign(x)) * x = |x|: holding sign(x) constant loses nothing (its derivative is
// 0), so finite differences agree; autodiff.stop_gradient_blocks checks the blocking itself.
TEST(autodiff_fd, StopGradient) {
  for (const Shape& s : kUnaryShapes)
    check_gradients("sign-times-x-" + sid(s),
                    [](const OutputVector& in) -> Output {
                      return std::make_shared<op::Multiply>(
                          std::make_shared<op::StopGradient>(std::make_shared<op::Sign>(in[0])),
                          in[0]);
                    },
                    {data(s, Kind::nonzero, 9)});
}

TEST(autodiff_fd, Convolution) {
  struct C {
    const char* id;
    Shape data, filters;
    op::ConvolutionWindow w;
  };
  std::vector<C> cases{
      {"1d", {2, 2, 7}, {3, 2, 3}, {}},
      {"2d-stride-pad", {1, 2, 5, 6}, {2, 2, 3, 2}, {{2, 1}, {}, {1, 0}, {0, 2}, {}, 1}},
      {"2d-dilated-filter", {1, 1, 7, 7}, {2, 1, 2, 3}, {{}, {2, 2}, {}, {}, {}, 1}},
      {"2d-data-dilation-negative-pad", {1, 2, 4, 4}, {1, 2, 3, 3}, {{1, 1}, {}, {-1, 1}, {2, 0}, {2, 2}, 1}},
      {"2d-groups", {1, 4, 4, 5}, {6, 2, 2, 2}, {{}, {}, {1, 1}, {1, 1}, {}, 2}},
      {"2d-depthwise", {2, 3, 4, 4}, {3, 1, 3, 3}, {{}, {}, {1, 1}, {1, 1}, {}, 3}},
      {"3d", {1, 2, 3, 4, 3}, {2, 2, 2, 2, 2}, {{1, 2, 1}, {}, {}, {1, 0, 0}, {}, 1}},
  };
  for (const auto& c : cases) {
    auto w = c.w;
    check_gradients(c.id,
                    [w](const OutputVector& in) -> Output {
                      return std::make_shared<op::Convolution>(in[0], in[1], w.strides, w.dilations,
                                                               w.padding_below, w.padding_above,
                                                               w.data_dilations, w.groups);
                    },
                    {data(c.data, Kind::any, 0), data(c.filters, Kind::any, 1)});
  }
}

TEST(autodiff_fd, Dot) {
  auto dot = [](int64_t n) {
    return [n](const OutputVector& in) -> Output {
      return std::make_shared<op::Dot>(in[0], in[1], n);
    };
  };
  struct C {
    const char* id;
    Shape a, b;
    int64_t n;
  };
  for (const C& c : std::vector<C>{
           {"count0-matrix-vector", {2, 3}, {4}, 0},
           {"count0-vectors", {3}, {2}, 0},
           {"count0-scalar-matrix", {}, {2, 3}, 0},
           {"count1-matrices", {2, 3}, {3, 4}, 1},
           {"count1-vectors", {3}, {3}, 1},
           {"default-tensor-vector", {2, 3, 4}, {4}, -1},
           {"default-vector-matrix", {3}, {3, 2}, -1},
           {"count2-tensors", {2, 3, 4}, {3, 4, 5}, 2},
           {"count2-to-scalar", {3, 4}, {3, 4}, 2},
           {"default-scalar-left", {}, {3, 4}, -1},
           {"default-scalar-right", {2, 3}, {}, -1},
           {"default-scalars", {}, {}, -1},
           {"count0-scalars", {}, {}, 0},
           {"size1-dims", {1, 3}, {3, 1}, 1},
           {"size1-outer", {4, 1}, {1, 2}, 1},
           {"count0-matrices", {2, 2}, {3, 1}, 0},
           {"count2-to-vector", {2, 2, 3}, {2, 3}, 2},
           {"empty-reduction", {2, 0}, {0, 3}, 1},
       })
    check_gradients(c.id, dot(c.n), {data(c.a, Kind::any, 0), data(c.b, Kind::any, 1)});
}

TEST(autodiff_fd, MatMul) {
  auto matmul = [](bool ta, bool tb) {
    return [ta, tb](const OutputVector& in) -> Output {
      return std::make_shared<op::MatMul>(in[0], in[1], ta, tb);
    };
  };
  struct C {
    const char* id;
    Shape a, b;
    bool ta, tb;
  };
  for (const C& c : std::vector<C>{
           {"plain", {3, 4}, {4, 5}, false, false},
           {"transpose-a", {4, 3}, {4, 5}, true, false},
           {"transpose-b", {3, 4}, {5, 4}, false, true},
           {"transpose-both", {4, 3}, {5, 4}, true, true},
           {"vector-matrix", {4}, {4, 5}, false, false},
           {"matrix-vector", {3, 4}, {4}, false, false},
           {"vector-vector", {4}, {4}, false, false},
           {"vector-transpose-b", {4}, {5, 4}, false, true},
           {"transpose-a-vector", {4, 3}, {4}, true, false},
           {"batch", {2, 3, 4}, {2, 4, 5}, false, false},
           {"broadcast-batch", {2, 1, 3, 4}, {5, 4, 2}, false, false},
           {"broadcast-batch-size1", {1, 3, 4}, {2, 4, 2}, false, false},
           {"batch-vs-matrix-transposed", {2, 4, 3}, {5, 4}, true, true},
           {"vector-batch", {4}, {2, 4, 5}, false, false},
           {"batch-vector", {2, 3, 4}, {4}, false, false},
           {"size1-dims", {1, 4}, {4, 1}, false, false},
           {"vector-transpose-a-ignored", {4}, {4, 5}, true, false},
           {"matrix-vector-transpose-both", {4, 3}, {4}, true, true},
           {"broadcast-batch-both-ways", {2, 1, 3, 4}, {1, 5, 4, 2}, false, false},
           {"broadcast-batch-transposed", {3, 1, 4, 3}, {2, 2, 4}, true, true},
           {"empty-inner", {2, 0}, {0, 3}, false, false},
       })
    check_gradients(c.id, matmul(c.ta, c.tb), {data(c.a, Kind::any, 0), data(c.b, Kind::any, 1)});
}

TEST(autodiff_fd, Broadcast) {
  struct C {
    const char* id;
    Shape in, out;
    AxisSet axes;
  };
  for (const C& c : std::vector<C>{
           {"new-leading-axis", {3}, {2, 3}, {0}},
           {"new-trailing-axis", {3}, {3, 2}, {1}},
           {"new-middle-axis", {2, 3}, {2, 4, 3}, {1}},
           {"two-axes", {3}, {2, 3, 4}, {0, 2}},
           {"scalar", {}, {2, 3}, {0, 1}},
           {"no-axes", {2, 3}, {2, 3}, {}},
           {"scalar-no-axes", {}, {}, {}},
           {"size1", {1, 3}, {2, 1, 3}, {0}},
       }) {
    Shape out = c.out;
    AxisSet axes = c.axes;
    check_gradients(c.id,
                    [out, axes](const OutputVector& in) -> Output {
                      return std::make_shared<op::Broadcast>(in[0], out, axes);
                    },
                    {data(c.in)});
  }
}

TEST(autodiff_fd, Sum) {
  struct C {
    const char* id;
    Shape in;
    AxisSet axes;
  };
  for (const C& c : std::vector<C>{
           {"axis1", {2, 3, 4}, {1}},
           {"axes02", {2, 3, 4}, {0, 2}},
           {"all", {2, 3, 4}, {0, 1, 2}},
           {"no-axes", {2, 3}, {}},
           {"scalar", {}, {}},
           {"size1-axis", {1, 3}, {0}},
           {"vector", {5}, {0}},
           {"empty-axis", {0, 3}, {0}},
           {"size1-kept", {3, 1}, {0}},
       }) {
    AxisSet axes = c.axes;
    check_gradients(
        c.id,
        [axes](const OutputVector& in) -> Output { return std::make_shared<op::Sum>(in[0], axes); },
        {data(c.in)});
  }
}

TEST(autodiff_fd, Reshape) {
  struct C {
    const char* id;
    Shape in;
    AxisVector order;
    Shape out;
  };
  for (const C& c : std::vector<C>{
           {"plain", {2, 3, 4}, {0, 1, 2}, {6, 4}},
           {"transpose", {2, 3, 4}, {2, 0, 1}, {4, 2, 3}},
           {"transpose-and-flatten", {2, 3, 4}, {1, 0, 2}, {3, 8}},
           {"transpose-and-split", {2, 6}, {1, 0}, {3, 2, 2}},
           {"matrix-transpose", {2, 3}, {1, 0}, {3, 2}},
           {"to-scalar", {1, 1}, {0, 1}, {}},
           {"from-scalar", {}, {}, {1, 1}},
           {"vector", {6}, {0}, {2, 3}},
           {"size1-transpose", {1, 3, 1}, {2, 1, 0}, {1, 3, 1}},
       }) {
    AxisVector order = c.order;
    Shape out = c.out;
    check_gradients(c.id,
                    [order, out](const OutputVector& in) -> Output {
                      return std::make_shared<op::Reshape>(in[0], order, out);
                    },
                    {data(c.in)});
  }
}

TEST(autodiff_fd, Slice) {
  struct C {
    const char* id;
    Shape in;
    Coordinate lower, upper;
    Strides strides;
  };
  for (const C& c : std::vector<C>{
           {"plain", {5, 6}, {1, 0}, {4, 6}, {}},
           {"strides", {7, 8}, {1, 0}, {7, 8}, {2, 3}},
           {"strides-uneven", {7, 8}, {0, 1}, {6, 7}, {4, 2}},
           {"3d-stride", {2, 3, 5}, {0, 1, 0}, {2, 3, 5}, {1, 1, 2}},
           {"size1", {1, 5}, {0, 1}, {1, 5}, {1, 2}},
           {"one-element", {4}, {2}, {3}, {}},
           {"stride-past-end", {5}, {1}, {5}, {3}},
           {"empty", {4, 3}, {2, 0}, {2, 3}, {}},
       }) {
    Coordinate lower = c.lower, upper = c.upper;
    Strides strides = c.strides;
    check_gradients(c.id,
                    [lower, upper, strides](const OutputVector& in) -> Output {
                      return std::make_shared<op::Slice>(in[0], lower, upper, strides);
                    },
                    {data(c.in)});
  }
}

// Indexing: repeated and negative indices (their gradients accumulate); indices are constants.
Output indices(const Shape& shape, const std::vector<int64_t>& v) {
  return std::make_shared<op::Constant>(element::i64, shape, v);
}

TEST(autodiff_fd, Gather) {
  check_gradients("axis0-repeated", [](const OutputVector& in) -> Output {
    return std::make_shared<op::Gather>(in[0], indices({3, 2}, {0, 4, 4, -1, 2, 2}), 0);
  }, {data({5, 3})});
  check_gradients("axis1", [](const OutputVector& in) -> Output {
    return std::make_shared<op::Gather>(in[0], indices({2}, {3, -5}), 1);
  }, {data({2, 5, 2})});
}

TEST(autodiff_fd, EmbeddingLookup) {
  check_gradients("rows", [](const OutputVector& in) -> Output {
    return std::make_shared<op::EmbeddingLookup>(indices({2, 2}, {1, 1, 5, 0}), in[0]);
  }, {data({6, 3})});
}

TEST(autodiff_fd, ScatterAdd) {
  check_gradients("axis0", [](const OutputVector& in) -> Output {
    return std::make_shared<op::ScatterAdd>(in[0], indices({3}, {2, 0, 2}), in[1], 0);
  }, {data({4, 2}), data({3, 2}, Kind::any, 1)});
  check_gradients("axis1", [](const OutputVector& in) -> Output {
    return std::make_shared<op::ScatterAdd>(in[0], indices({2}, {-1, 1}), in[1], 1);
  }, {data({2, 3}), data({2, 2}, Kind::any, 1)});
}

// All three outputs weighted: the statistics' gradients join the normalized output's.
TEST(autodiff_fd, LayerNorm) {
  auto all = [](const std::shared_ptr<op::LayerNorm>& ln) -> Output {
    return std::make_shared<op::Add>(
        weighted_sum(ln->output(0)),
        std::make_shared<op::Add>(weighted_sum(ln->output(1), 7), weighted_sum(ln->output(2), 8)));
  };
  check_gradients("affine-two-axes", [&](const OutputVector& in) -> Output {
    return all(std::make_shared<op::LayerNorm>(in[0], in[1], in[2], 1, 1e-3));
  }, {data({3, 2, 4}), data({8}, Kind::nonzero, 1), data({8}, Kind::any, 2)}, Tol{1e-6, 1e-5, 1e-6}, true);
  check_gradients("plain-last-axis", [&](const OutputVector& in) -> Output {
    return all(std::make_shared<op::LayerNorm>(in[0], -1, 1e-5));
  }, {data({4, 5})}, Tol{1e-6, 1e-5, 1e-6}, true);
}

// The mask of step 0 in every run (Compiled::run sets the step).
TEST(autodiff_fd, Dropout) {
  check_gradients("p0.4", [](const OutputVector& in) -> Output {
    return std::make_shared<op::Dropout>(in[0], 0.4, 11)->output(0);
  }, {data({4, 6})});
}

TEST(autodiff_fd, ReplaceSlice) {
  check_gradients("strided", [](const OutputVector& in) -> Output {
    return std::make_shared<op::ReplaceSlice>(in[0], in[1], Coordinate{0, 1}, Coordinate{3, 6},
                                              Strides{2, 2});
  }, {data({4, 6}), data({2, 3}, Kind::any, 1)});
}

TEST(autodiff_fd, Split) {
  check_gradients("unequal", [](const OutputVector& in) -> Output {
    auto sp = std::make_shared<op::Split>(in[0], 1, std::vector<int64_t>{1, 3, 2});
    return std::make_shared<op::Concat>(OutputVector{sp->output(2), sp->output(0)}, 1);
  }, {data({2, 6})});
}

TEST(autodiff_fd, Tile) {
  check_gradients("more-repeats-than-axes", [](const OutputVector& in) -> Output {
    return std::make_shared<op::Tile>(in[0], std::vector<int64_t>{2, 1, 3});
  }, {data({2, 3})});
}

TEST(autodiff_fd, Concat) {
  auto concat = [](size_t axis) {
    return
        [axis](const OutputVector& in) -> Output { return std::make_shared<op::Concat>(in, axis); };
  };
  check_gradients("axis0", concat(0), {data({2, 3}), data({4, 3}, Kind::any, 1)});
  check_gradients("axis1-three", concat(1),
                  {data({2, 3}), data({2, 1}, Kind::any, 1), data({2, 2}, Kind::any, 2)});
  check_gradients("vectors", concat(0), {data({3}), data({2}, Kind::any, 1)});
  check_gradients("middle-axis", concat(1), {data({2, 3, 4}), data({2, 1, 4}, Kind::any, 1)});
  check_gradients("one-input", concat(0), {data({3, 2})});
  check_gradients("with-empty-input", concat(1),
                  {data({2, 0}), data({2, 3}, Kind::any, 1), data({2, 0}, Kind::any, 2)});
  check_gradients("same-node-twice",
                  [](const OutputVector& in) -> Output {
                    return std::make_shared<op::Concat>(OutputVector{in[0], in[0]}, 0);
                  },
                  {data({2, 3})});
}

TEST(autodiff_fd, Pad) {
  struct C {
    const char* id;
    Shape in;
    CoordinateDiff below, above;
    const char* mode;
    bool value_param;  // the pad value is a parameter (its gradient is checked too)
  };
  for (const C& c : std::vector<C>{
           {"constant-with-value", {3, 4}, {1, 2}, {2, 0}, "constant", true},
           {"constant-negative", {4, 5}, {-1, 1}, {1, -2}, "constant", true},
           {"constant-crop-only", {4, 5}, {-1, 0}, {0, -2}, "constant", true},
           {"constant-vector", {3}, {2}, {1}, "constant", true},
           {"constant-scalar", {}, {}, {}, "constant", true},
           {"constant-fixed-value", {2, 3}, {1, 1}, {1, 1}, "constant", false},
           {"edge", {3, 4}, {2, 1}, {1, 3}, "edge", false},
           {"edge-size1", {1, 3}, {2, 0}, {1, 2}, "edge", false},
           {"edge-negative", {4, 5}, {-1, 2}, {2, -1}, "edge", true},
           {"reflect", {3, 4}, {2, 1}, {1, 3}, "reflect", false},
           {"reflect-negative", {4, 5}, {-1, 2}, {3, -2}, "reflect", true},
           {"symmetric", {3, 4}, {3, 2}, {1, 4}, "symmetric", false},
           {"symmetric-negative", {4, 5}, {2, -1}, {-1, 3}, "symmetric", false},
           {"symmetric-3d", {2, 3, 2}, {1, 2, 0}, {2, 0, 1}, "symmetric", true},
           {"edge-both-sides-size1", {1}, {3}, {2}, "edge", false},
           {"reflect-crop-both", {5, 4}, {-2, 3}, {2, -3}, "reflect", true},
           {"symmetric-full", {3}, {3}, {3}, "symmetric", false},
           {"constant-empty-arg", {0, 2}, {1, 0}, {1, 1}, "constant", true},
       }) {
    CoordinateDiff below = c.below, above = c.above;
    std::string mode = c.mode;
    if (c.value_param)
      check_gradients(c.id,
                      [below, above, mode](const OutputVector& in) -> Output {
                        return std::make_shared<op::Pad>(in[0], in[1], below, above, mode);
                      },
                      {data(c.in), array({}, {0.7})});
    else
      check_gradients(c.id,
                      [below, above, mode](const OutputVector& in) -> Output {
                        return std::make_shared<op::Pad>(in[0], cst(0.0), below, above, mode);
                      },
                      {data(c.in)});
  }
}

TEST(autodiff_fd, Reverse) {
  struct C {
    const char* id;
    Shape in;
    AxisSet axes;
  };
  for (const C& c : std::vector<C>{
           {"axis0", {3, 4}, {0}},
           {"axis1", {3, 4}, {1}},
           {"both", {3, 4}, {0, 1}},
           {"none", {3, 4}, {}},
           {"3d", {2, 3, 4}, {0, 2}},
           {"scalar", {}, {}},
           {"size1-axis", {1, 4}, {0, 1}},
       }) {
    AxisSet axes = c.axes;
    check_gradients(c.id,
                    [axes](const OutputVector& in) -> Output {
                      return std::make_shared<op::Reverse>(in[0], axes);
                    },
                    {data(c.in)});
  }
}

namespace {
struct ReductionCase {
  const char* id;
  Array in;
  AxisSet axes;
};

template <typename Op>
void check_reductions(const std::vector<ReductionCase>& cases) {
  for (const auto& c : cases) {
    AxisSet axes = c.axes;
    check_gradients(
        c.id,
        [axes](const OutputVector& in) -> Output { return std::make_shared<Op>(in[0], axes); },
        {c.in});
  }
}
}  // namespace

TEST(autodiff_fd, Max) {
  check_reductions<op::Max>({
      {"axis1", data({3, 4}, Kind::distinct), {1}},
      {"axis0", data({3, 4}, Kind::distinct), {0}},
      {"all", data({2, 3, 4}, Kind::distinct), {0, 1, 2}},
      {"axes02", data({2, 3, 4}, Kind::distinct), {0, 2}},
      {"size1", data({1, 3}, Kind::distinct), {0}},
      {"scalar", data({}), {}},
  });
}

TEST(autodiff_fd, Min) {
  check_reductions<op::Min>({
      {"axis1", data({3, 4}, Kind::distinct), {1}},
      {"all", data({2, 3, 4}, Kind::distinct), {0, 1, 2}},
      {"axes12", data({2, 3, 4}, Kind::distinct), {1, 2}},
      {"size1", data({3, 1}, Kind::distinct), {1}},
      {"scalar", data({}), {}},
  });
}

TEST(autodiff_fd, Product) {
  Array x = data({4, 5}, Kind::nonzero, 3);
  x.values[0 * 5 + 2] = 0.0;                                 // one zero in row 0
  x.values[1 * 5 + 1] = x.values[1 * 5 + 4] = 0.0;           // two zeros in row 1
  for (size_t j = 0; j < 5; ++j) x.values[2 * 5 + j] = 0.0;  // row 2 all zero
  Array y = data({3, 4}, Kind::nonzero, 4);
  y.values[1 * 4 + 1] = 0.0;
  check_reductions<op::Product>({
      {"axis1", data({3, 4}, Kind::nonzero), {1}},
      {"all", data({2, 3}, Kind::nonzero), {0, 1}},
      {"axes02", data({2, 3, 2}, Kind::nonzero), {0, 2}},
      {"size1", data({1, 3}, Kind::nonzero), {0}},
      {"scalar", data({}), {}},
      {"one-and-two-zeros-axis1", x, {1}},
      {"zeros-axis0", x, {0}},
      {"one-zero-all", y, {0, 1}},
      {"zero-scalar", array({}, {0.0}), {}},
  });
}

TEST(autodiff_fd, Softmax) {
  struct C {
    const char* id;
    Shape in;
    AxisSet axes;
  };
  for (const C& c : std::vector<C>{
           {"last-axis", {3, 4}, {1}},
           {"first-axis", {3, 4}, {0}},
           {"vector", {5}, {0}},
           {"two-axes", {2, 3, 4}, {1, 2}},
           {"outer-axes", {2, 3, 4}, {0, 2}},
           {"all-axes", {2, 3}, {0, 1}},
           {"size1-axis", {3, 1}, {1}},
       }) {
    AxisSet axes = c.axes;
    check_gradients(c.id,
                    [axes](const OutputVector& in) -> Output {
                      return std::make_shared<op::Softmax>(in[0], axes);
                    },
                    {data(c.in)});
  }
}

TEST(autodiff_fd, Select) {
  std::vector<double> cond_values;
  for (double v : data({3, 4}, Kind::any, 7).values) cond_values.push_back(v > 0 ? 1.0 : 0.0);
  auto cond = [cond_values]() -> Output {
    return std::make_shared<op::Constant>(element::boolean, Shape{3, 4}, cond_values);
  };
  auto row = []() -> Output {
    return std::make_shared<op::Constant>(element::boolean, Shape{4},
                                          std::vector<double>{1, 0, 0, 1});
  };
  check_gradients("constant-condition",
                  [&](const OutputVector& in) -> Output {
                    return std::make_shared<op::Select>(cond(), in[0], in[1]);
                  },
                  {data({3, 4}), data({3, 4}, Kind::any, 1)});
  check_gradients("broadcast",
                  [&](const OutputVector& in) -> Output {
                    return std::make_shared<op::Select>(row(), in[0], in[1], "numpy");
                  },
                  {data({3, 1}), data({}, Kind::any, 1)});
  check_gradients("on-a-comparison",
                  [](const OutputVector& in) -> Output {
                    auto positive = std::make_shared<op::Greater>(in[0], cst(0.0), "numpy");
                    return std::make_shared<op::Select>(positive, mul(in[0], cst(2.0)),
                                                        std::make_shared<op::Sin>(in[0]));
                  },
                  {data({3, 4}, Kind::nonzero)});
  check_gradients("broadcast-all-three",
                  [](const OutputVector& in) -> Output {
                    auto c = std::make_shared<op::Constant>(element::boolean, Shape{3, 1},
                                                            std::vector<double>{1, 0, 1});
                    return std::make_shared<op::Select>(c, in[0], in[1], "numpy");
                  },
                  {data({1, 4}), data({}, Kind::any, 1)});
  check_gradients("same-parameter-in-both-branches",
                  [&](const OutputVector& in) -> Output {
                    return std::make_shared<op::Select>(cond(), in[0], mul(in[0], in[0]));
                  },
                  {data({3, 4})});
}

TEST(autodiff_fd, Convert) {
  auto convert = [](const Output& x, element::Type t) -> Output {
    return std::make_shared<op::Convert>(x, t);
  };
  check_gradients("f64-f64",
                  [&](const OutputVector& in) { return mul(convert(in[0], F64), cst(3.0)); },
                  {data({2, 3})});
  // Through f32 the function is rounded to f32: larger steps and f32 tolerance (central
  // differences are exact for these polynomials of degree <= 2 up to rounding).
  Tol f32_tol{1e-2, 1e-4, 1e-4};
  check_gradients(
      "f64-f32-f64",
      [&](const OutputVector& in) {
        auto x32 = convert(in[0], element::f32);
        auto two = std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<double>{2.0});
        auto one = std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<double>{1.0});
        Output v = std::make_shared<op::Add>(std::make_shared<op::Multiply>(x32, two, "numpy"), one,
                                             "numpy");
        return convert(v, F64);
      },
      {data({2, 3})}, f32_tol);
  check_gradients(
      "f32-square",
      [&](const OutputVector& in) {
        auto x32 = convert(in[0], element::f32);
        return convert(std::make_shared<op::Multiply>(x32, x32), F64);
      },
      {data({4})}, f32_tol);
}

// A Result is the output of a function: the differentiated scalar is the Result itself.
TEST(autodiff_fd, Result) {
  check_gradients(
      "weighted-sum",
      [](const OutputVector& in) -> Output {
        return std::make_shared<op::Result>(weighted_sum(mul(in[0], in[0])));
      },
      {data({2, 3})}, {}, true);
  check_gradients(
      "scalar",
      [](const OutputVector& in) -> Output {
        return std::make_shared<op::Result>(std::make_shared<op::Sin>(in[0]));
      },
      {data({})}, {}, true);
}

// ------------------------------------------------------- multi-output nodes, batch norm

namespace {
using BNT = op::BatchNormTraining;
std::shared_ptr<BNT> bn_training(const OutputVector& in, double eps = 1e-3) {
  return std::make_shared<BNT>(in[0], in[1], in[2], eps);
}
// Batch-norm inputs: x of `shape`, gamma and beta [C].
std::vector<Array> bn_inputs(const Shape& shape, uint64_t seed = 0) {
  return {data(shape, Kind::any, seed), data({shape[1]}, Kind::nonzero, seed + 1),
          data({shape[1]}, Kind::any, seed + 2)};
}
// The weighted sums of several outputs, added: one scalar that every output feeds.
Output weighted_outputs(const OutputVector& outs) {
  Output y = weighted_sum(outs[0], 1234);
  for (size_t i = 1; i < outs.size(); ++i) y = add(y, weighted_sum(outs[i], 1234 + 17 * i));
  return y;
}
}  // namespace

// Its gradient goes to the output it names; several outputs of one node used together.
TEST(autodiff_fd, GetOutputElement) {
  for (size_t n : {0, 1, 2})
    check_gradients("batch-norm-output-" + std::to_string(n),
                    [n](const OutputVector& in) -> Output {
                      return std::make_shared<op::GetOutputElement>(bn_training(in), n);
                    },
                    bn_inputs({4, 3}));
  check_gradients(
      "batch-norm-all-outputs",
      [](const OutputVector& in) -> Output {
        auto bn = bn_training(in);
        return weighted_outputs({std::make_shared<op::GetOutputElement>(bn, 0),
                                 std::make_shared<op::GetOutputElement>(bn, 1),
                                 std::make_shared<op::GetOutputElement>(bn, 2)});
      },
      bn_inputs({3, 2, 2}), {}, true);
  check_gradients("single-output-node",
                  [](const OutputVector& in) -> Output {
                    return std::make_shared<op::GetOutputElement>(
                        std::make_shared<op::Sin>(in[0]), 0);
                  },
                  {data({2, 3})});
}

// The normalized output alone (through BatchNormTrainingBackprop), the statistics alone
// (their exact gradients), and two or three outputs of the node used together.
TEST(autodiff_fd, BatchNormTraining) {
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 2, 2}, Shape{5, 2, 3}})
    check_gradients("normalized-" + sid(shape),
                    [](const OutputVector& in) -> Output { return bn_training(in)->output(0); },
                    bn_inputs(shape));
  check_gradients("epsilon-0.5",
                  [](const OutputVector& in) -> Output { return bn_training(in, 0.5)->output(0); },
                  bn_inputs({3, 4}, 7));
  for (size_t n : {1, 2})
    check_gradients("statistic-" + std::to_string(n),
                    [n](const OutputVector& in) -> Output { return bn_training(in)->output(n); },
                    bn_inputs({4, 3, 2}, 3));
  check_gradients("normalized-and-variance",
                  [](const OutputVector& in) -> Output {
                    auto bn = bn_training(in);
                    return weighted_outputs({bn->output(0), bn->output(2)});
                  },
                  bn_inputs({4, 3}, 5), {}, true);
  check_gradients("all-outputs-and-fan-out",
                  [](const OutputVector& in) -> Output {
                    auto bn = bn_training(in);
                    return weighted_outputs({bn->output(0), bn->output(1), bn->output(2),
                                             mul(bn->output(0), bn->output(0))});
                  },
                  bn_inputs({2, 3, 3}, 9), {}, true);
}

// With respect to all five inputs (the variance positive).
TEST(autodiff_fd, BatchNormInference) {
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 2, 2}}) {
    size_t c = shape[1];
    for (double eps : {1e-3, 0.5})
      check_gradients("inference-" + sid(shape) + "-eps-" + std::to_string(eps),
                      [eps](const OutputVector& in) -> Output {
                        return std::make_shared<op::BatchNormInference>(in[0], in[1], in[2], in[3],
                                                                        in[4], eps);
                      },
                      {data(shape), data({c}, Kind::nonzero, 1), data({c}, Kind::any, 2),
                       data({c}, Kind::any, 3), data({c}, Kind::pos, 4)});
  }
}

// Pooling: distinct data (no ties within a window, so the maximum is differentiable).
namespace {
struct PoolCase {
  const char* id;
  Shape data, window;
  Strides strides;
  Shape below, above;
  bool ceil_mode = false;
};

const std::vector<PoolCase> kPoolCases = {
    {"1d", {2, 2, 7}, {3}, {2}, {1}, {0}},
    {"1d-ceil", {1, 2, 7}, {3}, {2}, {1}, {0}, true},
    {"2d", {2, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {0, 0}},
    {"2d-overlapping-padded", {1, 2, 4, 5}, {3, 2}, {2, 1}, {1, 0}, {1, 1}},
    {"2d-ceil", {1, 1, 5, 5}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, true},
    {"3d", {1, 1, 3, 4, 3}, {2, 2, 2}, {1, 2, 1}, {1, 0, 0}, {0, 1, 1}},
};
}  // namespace

TEST(autodiff_fd, MaxPool) {
  for (const auto& c : kPoolCases)
    check_gradients(c.id,
                    [c](const OutputVector& in) -> Output {
                      return std::make_shared<op::MaxPool>(in[0], c.window, c.strides, c.below,
                                                           c.above, c.ceil_mode);
                    },
                    {data(c.data, Kind::distinct, 4)});
  // Windows entirely in the padding (-inf: weighted by 0 here) pass no gradient.
  check_gradients("window-in-padding",
                  [](const OutputVector& in) -> Output {
                    auto m = std::make_shared<op::MaxPool>(in[0], Shape{2}, Strides{1}, Shape{2},
                                                           Shape{0});
                    return std::make_shared<op::Slice>(m, Coordinate{0, 0, 1}, Coordinate{1, 2, 4});
                  },
                  {data({1, 2, 3}, Kind::distinct, 5)});
}

TEST(autodiff_fd, AvgPool) {
  for (bool include : {false, true})
    for (const auto& c : kPoolCases)
      check_gradients(std::string(c.id) + (include ? "-include-padding" : ""),
                      [c, include](const OutputVector& in) -> Output {
                        return std::make_shared<op::AvgPool>(in[0], c.window, c.strides, c.below,
                                                             c.above, include, c.ceil_mode);
                      },
                      {data(c.data, Kind::any, 6)});
}

// Linear in delta: its gradient is the AvgPool of the same windows.
TEST(autodiff_fd, AvgPoolBackprop) {
  for (bool include : {false, true})
    for (const auto& c : kPoolCases) {
      if (c.ceil_mode) continue;  // AvgPoolBackprop has no ceil_mode (its padding says it)
      Shape out{c.data[0], c.data[1]};
      for (size_t i = 0; i < c.window.size(); ++i)
        out.push_back((c.data[i + 2] + c.below[i] + c.above[i] - c.window[i]) / c.strides[i] + 1);
      check_gradients(std::string(c.id) + (include ? "-include-padding" : ""),
                      [c, include](const OutputVector& in) -> Output {
                        return std::make_shared<op::AvgPoolBackprop>(
                            c.data, in[0], c.window, c.strides, c.below, c.above, include);
                      },
                      {data(out, Kind::any, 7)});
    }
}

TEST(autodiff_fd, LRN) {
  struct C {
    const char* id;
    Shape shape;
    double alpha, beta, bias;
    size_t size;
  };
  for (const C& c : std::vector<C>{
           {"size3", {2, 5, 2}, 0.5, 0.75, 1.0, 3},
           {"size1", {1, 3, 2, 2}, 1.0, 0.5, 2.0, 1},
           {"size4-even", {1, 6, 3}, 0.3, 0.6, 1.5, 4},
           {"size-larger-than-channels", {2, 3, 2, 1, 2}, 0.2, 0.75, 1.0, 7},
       }) {
    check_gradients(c.id,
                    [c](const OutputVector& in) -> Output {
                      return std::make_shared<op::LRN>(in[0], c.alpha, c.beta, c.bias, c.size);
                    },
                    {data(c.shape, Kind::any, 8)});
  }
}

// ======================================================================== other properties

// Only the outputs a gradient reaches are differentiated: with only the batch mean used, no
// BatchNormTrainingBackprop is built, and d mean_c / dx = 1 / M exactly.
TEST(autodiff, batch_norm_statistics_alone_need_no_backprop) {
  auto out = evaluate(
      [](const OutputVector& in) -> OutputVector {
        auto bn = bn_training(in);
        Output y = sum_all(bn->output(1));
        Output g = gradient(y, in[0]);
        EXPECT_FALSE(graph_has(g, "BatchNormTrainingBackprop"));
        EXPECT_TRUE(graph_has(gradient(sum_all(bn->output(0)), in[0]),
                              "BatchNormTrainingBackprop"));
        return {g, gradient(y, in[1])};
      },
      bn_inputs({4, 3}));
  EXPECT_EQ(out[0], std::vector<double>(12, 0.25));
  EXPECT_EQ(out[1], std::vector<double>(3, 0.0));
}

TEST(autodiff, every_op_has_a_gradient_test) {
  auto registry = OpRegistry::get().names();
  ASSERT_FALSE(registry.empty());
  std::set<std::string> covered(kCoveredOps.begin(), kCoveredOps.end());
  std::set<std::string> not_differentiable(kNotDifferentiable.begin(), kNotDifferentiable.end());
  std::set<std::string> elsewhere(kTestedElsewhere.begin(), kTestedElsewhere.end());
  EXPECT_EQ(covered.size(), kCoveredOps.size()) << "kCoveredOps has duplicates";
  std::vector<std::string> unclassified, unknown, twice;
  for (const auto& op : registry) {
    int lists =
        static_cast<int>(covered.count(op) + not_differentiable.count(op) + elsewhere.count(op));
    if (lists == 0) unclassified.push_back(op);
    if (lists > 1) twice.push_back(op);
  }
  for (const auto* list : {&covered, &not_differentiable, &elsewhere})
    for (const auto& op : *list)
      if (!OpRegistry::get().contains(op)) unknown.push_back(op);
  EXPECT_TRUE(unclassified.empty())
      << "ops without a finite-difference gradient test in autodiff_test.cpp (add "
         "TEST(autodiff_fd, <Op>) and list the op in kCoveredOps): "
      << join(unclassified, ", ");
  EXPECT_TRUE(twice.empty()) << "ops in more than one list: " << join(twice, ", ");
  EXPECT_TRUE(unknown.empty()) << "listed ops the registry does not have: " << join(unknown, ", ");

  // Every covered op has its test (each of whose cases builds a graph containing the op).
  std::set<std::string> tests;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    if (std::string(suite->name()) != kFdSuite) continue;
    for (int j = 0; j < suite->total_test_count(); ++j) tests.insert(suite->GetTestInfo(j)->name());
  }
  for (const auto& op : covered)
    EXPECT_TRUE(tests.count(op)) << "kCoveredOps lists " << op << " but there is no TEST("
                                 << kFdSuite << ", " << op << ")";
  for (const auto& t : tests)
    EXPECT_TRUE(covered.count(t)) << "TEST(" << kFdSuite << ", " << t
                                  << ") is not named after an op of kCoveredOps";
}

TEST(autodiff, stop_gradient_blocks) {
  // d/dx of sum(StopGradient(x * x) + x) is 1, not 2x + 1.
  auto out = evaluate(
      [](const OutputVector& in) -> OutputVector {
        Output y = sum_all(std::make_shared<op::Add>(
            std::make_shared<op::StopGradient>(std::make_shared<op::Multiply>(in[0], in[0])),
            in[0]));
        return {y, gradient(y, in[0])};
      },
      {array({3}, {1.0, 2.0, 3.0})});
  EXPECT_EQ(out[0], (std::vector<double>{1 + 4 + 9 + 6}));
  EXPECT_EQ(out[1], (std::vector<double>{1.0, 1.0, 1.0}));
}

namespace {
Output to_f64(const Output& x) {
  return std::make_shared<op::Convert>(x, F64);
}
Output half() {
  return cst(0.5);
}
Output positive(const Output& x) {
  return std::make_shared<op::Greater>(x, cst(0.0), "numpy");
}

// For each non-differentiable op with a path from an f64 input to an f64 output: that path.
Output as_image(const Output& x) {  // [3, 4] as one 1-channel 3x4 image
  return std::make_shared<op::Reshape>(x, AxisVector{0, 1}, Shape{1, 1, 3, 4});
}

const std::vector<std::pair<std::string, std::function<Output(const Output&)>>> kBlockedPaths = {
    {"ConvolutionBackpropData",
     [](const Output& x) -> Output {
       auto w = std::make_shared<op::Constant>(F64, Shape{1, 1, 1, 1}, std::vector<double>{2});
       return std::make_shared<op::ConvolutionBackpropData>(Shape{1, 1, 3, 4}, w, as_image(x),
                                                            op::ConvolutionWindow{});
     }},
    {"ConvolutionBackpropFilters",
     [](const Output& x) -> Output {
       return std::make_shared<op::ConvolutionBackpropFilters>(as_image(x), Shape{1, 1, 1, 1},
                                                               as_image(x), op::ConvolutionWindow{});
     }},
    {"ArgMax", [](const Output& x) { return to_f64(std::make_shared<op::ArgMax>(x, 1)); }},
    {"ArgMin",
     [](const Output& x) { return to_f64(std::make_shared<op::ArgMin>(x, 0, element::i32)); }},
    {"Equal",
     [](const Output& x) { return to_f64(std::make_shared<op::Equal>(x, half(), "numpy")); }},
    {"NotEqual",
     [](const Output& x) { return to_f64(std::make_shared<op::NotEqual>(x, half(), "numpy")); }},
    {"Greater",
     [](const Output& x) { return to_f64(std::make_shared<op::Greater>(x, half(), "numpy")); }},
    {"GreaterEq",
     [](const Output& x) { return to_f64(std::make_shared<op::GreaterEq>(x, half(), "numpy")); }},
    {"Less",
     [](const Output& x) { return to_f64(std::make_shared<op::Less>(x, half(), "numpy")); }},
    {"LessEq",
     [](const Output& x) { return to_f64(std::make_shared<op::LessEq>(x, half(), "numpy")); }},
    {"LogicalAnd",
     [](const Output& x) {
       return to_f64(std::make_shared<op::LogicalAnd>(
           positive(x), std::make_shared<op::Less>(x, half(), "numpy")));
     }},
    {"LogicalOr",
     [](const Output& x) {
       return to_f64(std::make_shared<op::LogicalOr>(
           positive(x), std::make_shared<op::Less>(x, half(), "numpy")));
     }},
    {"LogicalNot",
     [](const Output& x) { return to_f64(std::make_shared<op::LogicalNot>(positive(x))); }},
    {"OneHot",
     [](const Output& x) {
       return std::make_shared<op::OneHot>(
           std::make_shared<op::Floor>(std::make_shared<op::Abs>(x)), Shape{3, 4, 5}, 2);
     }},
    {"BatchNormTrainingBackprop",
     [](const Output& x) {  // d_input of a batch norm on x [3, 4], with x as its delta too
       auto c = [](double v) { return cst(Shape{4}, std::vector<double>(4, v)); };
       return std::make_shared<op::BatchNormTrainingBackprop>(x, c(1.5), c(0.5), c(0.1), c(2.0),
                                                              x, 1e-3)
           ->output(0);
     }},
    {"LayerNormBackprop",
     [](const Output& x) {  // d_data of a layer norm of x [3, 4], with x as its delta too
       return std::make_shared<op::LayerNormBackprop>(
                  OutputVector{x, x, cst(Shape{3}, {0.1, 0.2, 0.3}), cst(Shape{3}, {1.0, 2.0, 0.5})},
                  1, 1e-5)
           ->output(0);
     }},
    {"MaxPoolBackprop",
     [](const Output& x) {
       auto x4 = std::make_shared<op::Reshape>(x, AxisVector{0, 1}, Shape{1, 1, 3, 4});
       return std::make_shared<op::MaxPoolBackprop>(x4, cst(Shape{1, 1, 2, 3}, {1, 2, 3, 4, 5, 6}),
                                                    Shape{2, 2}, Strides{1, 1}, Shape{0, 0},
                                                    Shape{0, 0});
     }},
    {"LRNBackprop",
     [](const Output& x) {
       auto x3 = std::make_shared<op::Reshape>(x, AxisVector{0, 1}, Shape{1, 3, 4});
       return std::make_shared<op::LRNBackprop>(x3, mul(x3, cst(2.0)), 0.5, 0.75, 1.0, 3);
     }},
};
}  // namespace

TEST(autodiff, argmax_has_no_gradient) {
  auto x = std::make_shared<op::Parameter>(F64, Shape{3, 4});
  x->set_friendly_name("x");
  Output y = add(sum_all(mul(to_f64(std::make_shared<op::ArgMax>(x, 1)), cst(2.0))),
                 sum_all(std::make_shared<op::Sin>(x)));
  autodiff::Adjoints adj(OutputVector{y}, OutputVector{cst(1.0)});
  std::string message = test::error_of<autodiff::NoGradientRule>([&] { adj.backprop_output(x); });
  EXPECT_TRUE(contains(message, "ArgMax")) << message;
  EXPECT_TRUE(contains(message, x->get_name())) << message;
}

TEST(autodiff, gradient_through_a_non_differentiable_op_throws) {
  std::set<std::string> with_paths;
  for (const auto& [op, path] : kBlockedPaths) {
    SCOPED_TRACE(op);
    with_paths.insert(op);
    auto x = std::make_shared<op::Parameter>(F64, Shape{3, 4});
    Output out = path(x);
    ASSERT_TRUE(graph_has(out, op));
    Output y = add(sum_all(mul(out, cst(2.0))), sum_all(std::make_shared<op::Sin>(x)));
    autodiff::Adjoints adj(OutputVector{y}, OutputVector{cst(1.0)});
    std::string message = test::error_of<autodiff::NoGradientRule>([&] { adj.backprop_output(x); });
    EXPECT_TRUE(contains(message, op)) << message;
  }
  // The others are leaves (Parameter, Constant, Variable, Recv) or sinks (Assign, Send).
  std::set<std::string> rest;
  for (const auto& op : kNotDifferentiable)
    if (!with_paths.count(op)) rest.insert(op);
  EXPECT_EQ(rest,
            (std::set<std::string>{"Parameter", "Constant", "Variable", "Assign", "Send", "Recv"}));
}

TEST(autodiff, gradient_beside_a_blocked_path_works) {
  for (const auto& [op, path] : kBlockedPaths) {
    SCOPED_TRACE(op);
    auto out = evaluate(
        [&path = path](const OutputVector& in) -> OutputVector {
          Output y = add(sum_all(mul(path(in[0]), cst(2.0))), sum_all(mul(in[1], in[1])));
          return {gradient(y, in[1])};
        },
        {data({3, 4}, Kind::pos), data({3, 4}, Kind::any, 3)});
    std::vector<double> expected;
    for (double w : data({3, 4}, Kind::any, 3).values) expected.push_back(2 * w);
    EXPECT_TRUE(test::all_close(out[0], expected, 1e-15, 0.0));
  }
}

TEST(autodiff, gradient_with_respect_to_an_integer_value_throws) {
  auto i = std::make_shared<op::Parameter>(element::i32, Shape{3});
  Output y = sum_all(mul(to_f64(i), cst(2.0)));
  autodiff::Adjoints adj(OutputVector{y}, OutputVector{cst(1.0)});
  std::string message = test::error_of<autodiff::NoGradientRule>([&] { adj.backprop_output(i); });
  EXPECT_TRUE(contains(message, "not floating-point")) << message;
}

TEST(autodiff, missing_path_gives_zeros_of_the_right_shape) {
  auto out = evaluate(
      [](const OutputVector& in) -> OutputVector {
        Output y = sum_all(mul(in[0], cst(2.0)));
        autodiff::Adjoints adj(OutputVector{y}, OutputVector{cst(1.0)});
        OutputVector grads;
        for (const auto& p : in) {
          Output g = adj.backprop_output(p);
          EXPECT_EQ(g.get_shape(), p.get_shape());
          EXPECT_EQ(g.get_element_type(), F64);
          grads.push_back(g);
        }
        return grads;
      },
      {data({3}), data({2, 5}, Kind::any, 1), data({}, Kind::any, 2)});
  EXPECT_EQ(out[0], (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_EQ(out[1], std::vector<double>(10, 0.0));
  EXPECT_EQ(out[2], std::vector<double>{0.0});
}

TEST(autodiff, fan_out_accumulates) {
  // y = x * x + sin(x): the two uses of x add up.
  Array x = data({4});
  auto out = evaluate(
      [](const OutputVector& in) -> OutputVector {
        Output y = sum_all(std::make_shared<op::Add>(std::make_shared<op::Multiply>(in[0], in[0]),
                                                     std::make_shared<op::Sin>(in[0])));
        return {gradient(y, in[0])};
      },
      {x});
  std::vector<double> expected;
  for (double v : x.values) expected.push_back(2 * v + std::cos(v));
  EXPECT_TRUE(test::all_close(out[0], expected, 1e-14, 1e-15));
  check_gradients("fan-out",
                  [](const OutputVector& in) -> Output {
                    return std::make_shared<op::Add>(std::make_shared<op::Multiply>(in[0], in[0]),
                                                     std::make_shared<op::Sin>(in[0]));
                  },
                  {x});
}

TEST(autodiff, second_order_cube) {
  // d/dx sum(x^3) = 3x^2, d2/dx2 = 6x (the gradient of a gradient).
  Array x = array({5}, {-2.0, -0.5, 0.0, 1.0, 3.0});
  auto out = evaluate(
      [](const OutputVector& in) -> OutputVector {
        Output g = gradient(sum_all(std::make_shared<op::Power>(in[0], cst(3.0), "numpy")), in[0]);
        return {g, gradient(sum_all(g), in[0])};
      },
      {x});
  std::vector<double> first, second;
  for (double v : x.values) {
    first.push_back(3 * v * v);
    second.push_back(6 * v);
  }
  EXPECT_TRUE(test::all_close(out[0], first, 1e-14, 1e-15));
  EXPECT_TRUE(test::all_close(out[1], second, 1e-14, 1e-15));
}

TEST(autodiff, second_order_matches_finite_differences) {
  // The gradient (a graph) of each function against finite differences of that gradient.
  struct C {
    const char* id;
    std::function<Output(const Output&)> fn;
    Array x;
  };
  Array near_kink = data({4}, Kind::nonzero, 5);
  for (double& v : near_kink.values)  // keep x*x away from the kink of Maximum at 1
    if (std::fabs(std::fabs(v) - 1) < 0.1) v *= 1.5;
  std::vector<C> cases = {
      {"Tanh", [](const Output& p) -> Output { return std::make_shared<op::Tanh>(p); },
       data({3, 4}, Kind::any, 5)},
      {"Sigmoid", [](const Output& p) -> Output { return std::make_shared<op::Sigmoid>(p); },
       data({3, 4}, Kind::any, 5)},
      {"Exp", [](const Output& p) -> Output { return std::make_shared<op::Exp>(p); },
       data({3}, Kind::any, 5)},
      {"Log", [](const Output& p) -> Output { return std::make_shared<op::Log>(p); },
       data({3}, Kind::pos, 5)},
      {"Sqrt", [](const Output& p) -> Output { return std::make_shared<op::Sqrt>(p); },
       data({3}, Kind::pos, 5)},
      {"Sin", [](const Output& p) -> Output { return std::make_shared<op::Sin>(p); },
       data({3}, Kind::any, 5)},
      {"Abs", [](const Output& p) -> Output { return mul(std::make_shared<op::Abs>(p), p); },
       data({4}, Kind::nonzero, 5)},
      {"Relu", [](const Output& p) -> Output { return mul(std::make_shared<op::Relu>(p), p); },
       data({4}, Kind::nonzero, 5)},
      {"Divide",
       [](const Output& p) -> Output { return std::make_shared<op::Divide>(cst(1.0), p, "numpy"); },
       data({3}, Kind::nonzero, 5)},
      {"Power", [](const Output& p) -> Output { return std::make_shared<op::Power>(p, p); },
       data({3}, Kind::pos, 5)},
      {"Softmax",
       [](const Output& p) -> Output { return std::make_shared<op::Softmax>(p, AxisSet{1}); },
       data({2, 3}, Kind::any, 5)},
      {"Max",
       [](const Output& p) -> Output { return std::make_shared<op::Max>(mul(p, p), AxisSet{1}); },
       data({3, 4}, Kind::distinct, 5)},
      {"Min",
       [](const Output& p) -> Output {
         return std::make_shared<op::Min>(mul(mul(p, p), p), AxisSet{0});
       },
       data({3, 4}, Kind::distinct, 5)},
      {"Product",
       [](const Output& p) -> Output { return std::make_shared<op::Product>(p, AxisSet{1}); },
       data({2, 4}, Kind::nonzero, 5)},
      // Rows with one, two and three zeros: the gradient's own gradient at a zero.
      {"Product-zeros",
       [](const Output& p) -> Output { return std::make_shared<op::Product>(p, AxisSet{1}); },
       array({3, 4}, {0.0, 1.5, -0.7, 1.1, 0.0, 0.0, 1.2, -0.9, 0.0, 1.3, 0.0, 0.0})},
      {"Product-zeros-axis0",
       [](const Output& p) -> Output { return std::make_shared<op::Product>(p, AxisSet{0}); },
       array({3, 4}, {0.0, 1.5, -0.7, 1.1, 0.0, 0.0, 1.2, -0.9, 0.0, 1.3, 0.0, 0.0})},
      {"MatMul", [](const Output& p) -> Output { return std::make_shared<op::MatMul>(p, p); },
       data({3, 3}, Kind::any, 5)},
      {"Dot", [](const Output& p) -> Output { return std::make_shared<op::Dot>(p, mul(p, p), 2); },
       data({2, 3}, Kind::any, 5)},
      {"Pad-reflect",
       [](const Output& p) -> Output {
         return std::make_shared<op::Pad>(mul(p, p), cst(0.0), CoordinateDiff{1, 2},
                                          CoordinateDiff{2, 1}, "reflect");
       },
       data({3, 4}, Kind::any, 5)},
      {"Slice",
       [](const Output& p) -> Output {
         return std::make_shared<op::Slice>(mul(p, p), Coordinate{0, 1}, Coordinate{3, 4},
                                            Strides{2, 2});
       },
       data({3, 4}, Kind::any, 5)},
      {"Maximum",
       [](const Output& p) -> Output {
         return std::make_shared<op::Maximum>(mul(p, p), cst(1.0), "numpy");
       },
       near_kink},
      {"Select",
       [](const Output& p) -> Output {
         return std::make_shared<op::Select>(positive(p), mul(p, p), std::make_shared<op::Sin>(p));
       },
       data({5}, Kind::nonzero, 5)},
  };
  for (const auto& c : cases) {
    auto fn = c.fn;
    check_gradients(
        std::string("second-order-") + c.id,
        [fn](const OutputVector& in) { return gradient(weighted_sum(fn(in[0]), 99), in[0]); },
        {c.x}, Tol{1e-6, 1e-5, 1e-6});
  }
}
