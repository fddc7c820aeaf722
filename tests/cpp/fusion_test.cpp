// CPU fusion: fused kernels give the same values as the ops they replace.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"
#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"

using namespace ngraph;
using runtime::cpu::CompileOptions;
using runtime::cpu::CPUBackend;
using runtime::cpu::CPUExecutable;

namespace {

template <typename T>
std::vector<T> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-2.0, 2.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

struct RunResult {
  std::vector<std::string> schedule;
  std::vector<std::vector<double>> outputs;
};

// Runs `f` on values made from `seed`, fused or not.
RunResult run(const std::shared_ptr<Function>& f, bool fuse, unsigned seed) {
  CPUBackend backend;
  auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, fuse}));
  std::vector<std::shared_ptr<runtime::Tensor>> in, out;
  for (const auto& p : f->get_parameters()) {
    auto t = backend.create_tensor(p->get_element_type(), p->get_shape());
    size_t n = shape_size(p->get_shape());
    if (p->get_element_type() == element::f32) {
      auto v = random_values<float>(n, seed++);
      t->write(v.data(), v.size() * sizeof(float));
    } else {
      auto v = random_values<double>(n, seed++);
      t->write(v.data(), v.size() * sizeof(double));
    }
    in.push_back(t);
  }
  for (const auto& r : f->get_results()) out.push_back(backend.create_tensor(r->get_element_type(), r->get_shape()));
  exe->call(out, in);
  RunResult result{exe->get_schedule(), {}};
  for (const auto& t : out) {
    std::vector<double> v(t->get_element_count());
    if (t->get_element_type() == element::f32) {
      std::vector<float> tmp(v.size());
      t->read(tmp.data(), tmp.size() * sizeof(float));
      std::copy(tmp.begin(), tmp.end(), v.begin());
    } else {
      t->read(v.data(), v.size() * sizeof(double));
    }
    result.outputs.push_back(v);
  }
  return result;
}

bool has_step(const RunResult& r, const std::string& prefix) {
  for (const auto& s : r.schedule)
    if (s.rfind(prefix, 0) == 0) return true;
  return false;
}

void expect_same(const RunResult& a, const RunResult& b, double tol) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    ASSERT_EQ(a.outputs[i].size(), b.outputs[i].size());
    for (size_t j = 0; j < a.outputs[i].size(); ++j)
      EXPECT_NEAR(a.outputs[i][j], b.outputs[i][j], tol * (1 + std::abs(b.outputs[i][j])))
          << "output " << i << " element " << j;
  }
}

}  // namespace

class MatMulFusion : public ::testing::TestWithParam<std::tuple<element::Type_t, bool, bool, bool, bool>> {};

TEST_P(MatMulFusion, matches_unfused) {
  auto [et, ta, tb, bias, relu] = GetParam();
  element::Type t(et);
  size_t m = 7, k = 5, n = 3;
  auto a = std::make_shared<op::Parameter>(t, ta ? Shape{k, m} : Shape{m, k});
  auto b = std::make_shared<op::Parameter>(t, tb ? Shape{n, k} : Shape{k, n});
  auto c = std::make_shared<op::Parameter>(t, Shape{n});
  Output x = a, y = b;
  if (ta) x = std::make_shared<op::Reshape>(a, AxisVector{1, 0}, Shape{m, k});
  if (tb) y = std::make_shared<op::Reshape>(b, AxisVector{1, 0}, Shape{k, n});
  Output v = std::make_shared<op::Dot>(x, y);
  if (bias) v = std::make_shared<op::Add>(v, c, "numpy");
  if (relu) v = std::make_shared<op::Relu>(v);
  auto f = std::make_shared<Function>(OutputVector{v}, ParameterVector{a, b, c});
  RunResult fused = run(f, true, 11), plain = run(f, false, 11);
  EXPECT_TRUE(has_step(fused, "CPUMatMulBias"));
  EXPECT_EQ(fused.schedule.size(), 1u) << "transposes, bias and ReLU are absorbed";
  expect_same(fused, plain, t == element::f32 ? 1e-5 : 1e-12);
}

INSTANTIATE_TEST_SUITE_P(cpu, MatMulFusion,
                         ::testing::Combine(::testing::Values(element::Type_t::f32, element::Type_t::f64),
                                            ::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()));

TEST(fusion, matmul_with_another_use_of_its_value_keeps_it) {
  auto a = std::make_shared<op::Parameter>(element::f32, Shape{4, 3});
  auto b = std::make_shared<op::Parameter>(element::f32, Shape{3, 2});
  auto c = std::make_shared<op::Parameter>(element::f32, Shape{2});
  auto d = std::make_shared<op::Dot>(a, b);
  auto biased = std::make_shared<op::Add>(d, c, "numpy");
  auto f = std::make_shared<Function>(OutputVector{biased, d}, ParameterVector{a, b, c});
  RunResult fused = run(f, true, 3), plain = run(f, false, 3);
  expect_same(fused, plain, 1e-5);
}

class ElementwiseFusion : public ::testing::TestWithParam<element::Type_t> {};

TEST_P(ElementwiseFusion, chain_matches_unfused) {
  element::Type t(GetParam());
  Shape s{3, 700};  // more than one block of the fused kernel
  auto x = std::make_shared<op::Parameter>(t, s);
  auto y = std::make_shared<op::Parameter>(t, s);
  auto two = std::make_shared<op::Constant>(t, Shape{}, std::vector<double>{2.0});
  auto zero = std::make_shared<op::Constant>(t, Shape{}, std::vector<double>{0.0});
  // select(x > 0, tanh(x) * 2 - y, exp(-abs(y))) / (1 + sigmoid(y)), max/min with y
  Output v = std::make_shared<op::Subtract>(std::make_shared<op::Multiply>(std::make_shared<op::Tanh>(x), two, "numpy"), y);
  Output w = std::make_shared<op::Exp>(std::make_shared<op::Negative>(std::make_shared<op::Abs>(y)));
  Output sel = std::make_shared<op::Select>(std::make_shared<op::Greater>(x, zero, "numpy"), v, w);
  Output den = std::make_shared<op::Add>(std::make_shared<op::Sigmoid>(y), std::make_shared<op::Sqrt>(std::make_shared<op::Multiply>(y, y)));
  Output out = std::make_shared<op::Maximum>(std::make_shared<op::Divide>(sel, den), std::make_shared<op::Minimum>(x, y));
  auto f = std::make_shared<Function>(OutputVector{out}, ParameterVector{x, y});
  RunResult fused = run(f, true, 5), plain = run(f, false, 5);
  EXPECT_TRUE(has_step(fused, "CPUFusedElementwise"));
  EXPECT_EQ(fused.schedule.size(), 1u) << "the whole chain is one kernel";
  expect_same(fused, plain, t == element::f32 ? 1e-5 : 1e-12);
}


// Every comparison inside a fused program gives the unfused op's mask: equal operands (floors
// of the inputs are often equal) and NaN (the square root of a negative) included.
template <typename Compare>
void expect_fused_comparison_matches(element::Type t) {
  Shape s{3, 700};
  auto x = std::make_shared<op::Parameter>(t, s);
  auto y = std::make_shared<op::Parameter>(t, s);
  Output a = std::make_shared<op::Floor>(x), b = std::make_shared<op::Floor>(y);
  Output nan_where_negative = std::make_shared<op::Sqrt>(x);
  Output first = std::make_shared<op::Select>(std::make_shared<Compare>(a, b, "numpy"), x, y);
  Output second = std::make_shared<op::Select>(std::make_shared<Compare>(nan_where_negative, b, "numpy"),
                                               std::make_shared<op::Negative>(x), y);
  auto out = std::make_shared<op::Add>(first, second);
  auto f = std::make_shared<Function>(OutputVector{out}, ParameterVector{x, y});
  RunResult fused = run(f, true, 11), plain = run(f, false, 11);
  EXPECT_TRUE(has_step(fused, "CPUFusedElementwise")) << Compare::type_name;
  expect_same(fused, plain, 0.0);
}

TEST_P(ElementwiseFusion, comparisons_match_unfused) {
  element::Type t(GetParam());
  expect_fused_comparison_matches<op::Equal>(t);
  expect_fused_comparison_matches<op::NotEqual>(t);
  expect_fused_comparison_matches<op::Greater>(t);
  expect_fused_comparison_matches<op::GreaterEq>(t);
  expect_fused_comparison_matches<op::Less>(t);
  expect_fused_comparison_matches<op::LessEq>(t);
}

INSTANTIATE_TEST_SUITE_P(cpu, ElementwiseFusion,
                         ::testing::Values(element::Type_t::f32, element::Type_t::f64));

TEST(fusion, intermediate_with_other_uses_is_an_output_of_its_own) {
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{10});
  auto e = std::make_shared<op::Exp>(x);
  auto twice = std::make_shared<op::Add>(e, e);
  auto f = std::make_shared<Function>(OutputVector{twice, e}, ParameterVector{x});
  RunResult fused = run(f, true, 9), plain = run(f, false, 9);
  expect_same(fused, plain, 1e-6);
}

namespace {
// Optimizer updates on variables of n elements (several of the fused kernel's 512-element
// blocks and a partial one), run `calls` times with gradient g: the kernels of the schedule
// and the variables' values afterwards. `update` builds the new values from the variables
// and g, in the order of `states`.
struct UpdateRun {
  std::vector<std::string> schedule;
  std::vector<std::vector<float>> values;
  std::vector<bool> same_buffer;  // the variable kept one buffer (updated in place)
};

using UpdateBuilder = std::function<OutputVector(const std::vector<std::shared_ptr<op::Variable>>&, const Output&)>;

UpdateRun run_update(const UpdateBuilder& update, size_t nvars, bool fuse, size_t n, int calls) {
  std::vector<std::shared_ptr<VariableState>> states;
  std::vector<std::shared_ptr<op::Variable>> vars;
  for (size_t k = 0; k < nvars; ++k) {
    auto init = random_values<float>(n, 10 + static_cast<unsigned>(k));
    if (k > 0)  // moments start non-negative (Adam's second moment goes under a square root)
      for (auto& x : init) x = std::fabs(x);
    states.push_back(std::make_shared<VariableState>(element::f32, Shape{n}, init.data()));
    vars.push_back(std::make_shared<op::Variable>(states.back()));
  }
  auto g = std::make_shared<op::Parameter>(element::f32, Shape{n});
  OutputVector next = update(vars, g);
  NodeVector assigns;
  for (size_t k = 0; k < nvars; ++k) assigns.push_back(std::make_shared<op::Assign>(vars[k], next[k]));
  auto loss = std::make_shared<op::Sum>(g, AxisSet{0});
  auto f = std::make_shared<Function>(OutputVector{loss}, assigns, ParameterVector{g});
  CPUBackend backend;
  auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, fuse}));
  std::vector<const void*> before;
  for (const auto& s : states) before.push_back(s->read_buffer());
  auto gv = random_values<float>(n, 3);
  auto in = backend.create_tensor(element::f32, Shape{n});
  in->write(gv.data(), gv.size() * sizeof(float));
  auto out = backend.create_tensor(element::f32, Shape{});
  for (int c = 0; c < calls; ++c) exe->call({out}, {in});
  UpdateRun r{exe->get_schedule(), {}, {}};
  for (size_t k = 0; k < nvars; ++k) {
    r.values.emplace_back(n);
    states[k]->get(r.values.back().data());
    r.same_buffer.push_back(states[k]->read_buffer() == before[k]);
  }
  return r;
}

size_t fused_kernels(const std::vector<std::string>& schedule) {
  size_t count = 0;
  for (const auto& s : schedule) count += s.rfind(runtime::cpu::FusedElementwise::type_name, 0) == 0;
  return count;
}

std::shared_ptr<op::Constant> scalar(float s) {
  return std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{s});
}
template <typename T>
Output binary(const Output& a, const Output& b) {
  return std::make_shared<T>(a, b, op::AutoBroadcast::numpy);
}
}  // namespace

// SGD with momentum: v' = 0.9 v + g and w' = w - 0.1 v'. Before, v' went to memory and was read
// back by the weights' kernel; now one pass reads w, v and g and writes both variables, in
// place. With `old_too` the weights' update also reads the old momentum after v' is computed
// in the same block (w' = w - 0.1 v' + 0.01 v): writing v' into v's buffer before the block
// is done would change what that instruction reads.
TEST(fusion, momentum_update_is_one_pass_writing_both_variables_in_place) {
  for (bool old_too : {false, true}) {
    SCOPED_TRACE(old_too ? "the weights' update reads the old momentum too" : "plain momentum");
    UpdateBuilder sgd = [old_too](const std::vector<std::shared_ptr<op::Variable>>& x, const Output& g) {
      Output v2 = binary<op::Add>(binary<op::Multiply>(x[1], scalar(0.9f)), g);
      Output w2 = binary<op::Subtract>(x[0], binary<op::Multiply>(v2, scalar(0.1f)));
      if (old_too) w2 = binary<op::Add>(w2, binary<op::Multiply>(x[1], scalar(0.01f)));
      return OutputVector{w2, v2};
    };
    const size_t n = 1500;
    UpdateRun fused = run_update(sgd, 2, true, n, 3), plain = run_update(sgd, 2, false, n, 3);
    EXPECT_EQ(fused_kernels(fused.schedule), 1u) << "momentum and weights in one kernel";
    EXPECT_TRUE(fused.same_buffer[0] && fused.same_buffer[1]) << "both updated in place";
    std::vector<float> w = random_values<float>(n, 10), v = random_values<float>(n, 11);
    auto g = random_values<float>(n, 3);
    for (auto& x : v) x = std::fabs(x);
    for (int c = 0; c < 3; ++c)
      for (size_t i = 0; i < n; ++i) {
        float v2 = 0.9f * v[i] + g[i];
        w[i] = w[i] - 0.1f * v2 + (old_too ? 0.01f * v[i] : 0.0f);
        v[i] = v2;
      }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(fused.values[0][i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << "weights, element " << i;
      ASSERT_NEAR(fused.values[1][i], v[i], 1e-5f * (1 + std::fabs(v[i]))) << "momentum, element " << i;
      ASSERT_NEAR(plain.values[0][i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << "unfused weights, element " << i;
    }
  }
}

// Adam: m' = 0.9 m + 0.1 g, s' = 0.999 s + 0.001 g g, w' = w - 0.01 m' / (sqrt(s') + 1e-8):
// three variables written by one kernel that reads g once.
TEST(fusion, adam_update_is_one_kernel_with_three_outputs) {
  UpdateBuilder adam = [](const std::vector<std::shared_ptr<op::Variable>>& x, const Output& g) {
    Output m2 = binary<op::Add>(binary<op::Multiply>(x[1], scalar(0.9f)), binary<op::Multiply>(g, scalar(0.1f)));
    Output s2 = binary<op::Add>(binary<op::Multiply>(x[2], scalar(0.999f)),
                                binary<op::Multiply>(binary<op::Multiply>(g, g), scalar(0.001f)));
    Output step = binary<op::Divide>(m2, binary<op::Add>(std::make_shared<op::Sqrt>(s2), scalar(1e-8f)));
    return OutputVector{binary<op::Subtract>(x[0], binary<op::Multiply>(step, scalar(0.01f))), m2, s2};
  };
  const size_t n = 1100;
  UpdateRun fused = run_update(adam, 3, true, n, 2);
  EXPECT_EQ(fused_kernels(fused.schedule), 1u);
  EXPECT_TRUE(fused.same_buffer[0] && fused.same_buffer[1] && fused.same_buffer[2]) << "in place";
  std::vector<double> w(n), m(n), s(n);
  auto w0 = random_values<float>(n, 10), m0 = random_values<float>(n, 11), s0 = random_values<float>(n, 12);
  auto g = random_values<float>(n, 3);
  for (size_t i = 0; i < n; ++i) {
    w[i] = w0[i];
    m[i] = std::fabs(m0[i]);
    s[i] = std::fabs(s0[i]);
  }
  for (int c = 0; c < 2; ++c)
    for (size_t i = 0; i < n; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      s[i] = 0.999 * s[i] + 0.001 * g[i] * g[i];
      w[i] -= 0.01 * m[i] / (std::sqrt(s[i]) + 1e-8);
    }
  const std::vector<double>* want[] = {&w, &m, &s};
  for (size_t k = 0; k < 3; ++k)
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(fused.values[k][i], (*want[k])[i], 1e-4 * (1 + std::fabs((*want[k])[i])))
          << "variable " << k << ", element " << i;
}

// A Result that the graph also reads is not a sink: making a = x * x an extra output of the
// group of y = r + a (r = Result(a)) would make the fused node read r, which reads it.
TEST(fusion, result_read_inside_the_graph_is_not_an_extra_output) {
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{700});
  auto a = std::make_shared<op::Multiply>(x, x);
  auto r = std::make_shared<op::Result>(a);
  auto y = std::make_shared<op::Add>(r, a);
  auto f = std::make_shared<Function>(OutputVector{y, r}, ParameterVector{x});
  RunResult fused = run(f, true, 4), plain = run(f, false, 4);
  expect_same(fused, plain, 1e-6);
}

// A result that is a group's intermediate comes out of the same pass.
TEST(fusion, result_of_an_intermediate_is_an_extra_output) {
  auto x = std::make_shared<op::Parameter>(element::f64, Shape{1300});
  auto e = std::make_shared<op::Exp>(x);
  auto y = std::make_shared<op::Multiply>(std::make_shared<op::Add>(e, x), x);
  auto f = std::make_shared<Function>(OutputVector{y, e}, ParameterVector{x});
  RunResult fused = run(f, true, 5), plain = run(f, false, 5);
  EXPECT_EQ(fused_kernels(fused.schedule), 1u);
  expect_same(fused, plain, 1e-12);
}

// Assign(y, x) next to an in-place update of x: y takes x's value from before the call (the
// end-of-call copy must not read x's buffer after the update overwrote it).
TEST(fusion, update_copying_a_variable_reads_its_old_value) {
  const size_t n = 600;
  auto x0 = random_values<float>(n, 1);
  auto xs = std::make_shared<VariableState>(element::f32, Shape{n}, x0.data());
  auto ys = std::make_shared<VariableState>(element::f32, Shape{n});
  auto x = std::make_shared<op::Variable>(xs), y = std::make_shared<op::Variable>(ys);
  auto g = std::make_shared<op::Parameter>(element::f32, Shape{n});
  Output x2 = binary<op::Subtract>(x, binary<op::Multiply>(g, scalar(0.5f)));
  auto f = std::make_shared<Function>(
      OutputVector{std::make_shared<op::Sum>(g, AxisSet{0})},
      NodeVector{std::make_shared<op::Assign>(x, x2), std::make_shared<op::Assign>(y, x)},
      ParameterVector{g});
  CPUBackend backend;
  auto exe = backend.compile(f, CompileOptions{true, true});
  auto gv = random_values<float>(n, 2);
  auto in = backend.create_tensor(element::f32, Shape{n});
  in->write(gv.data(), gv.size() * sizeof(float));
  auto out = backend.create_tensor(element::f32, Shape{});
  exe->call({out}, {in});
  std::vector<float> xv(n), yv(n);
  xs->get(xv.data());
  ys->get(yv.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(yv[i], x0[i]) << "y = the old x, element " << i;
    ASSERT_NEAR(xv[i], x0[i] - 0.5f * gv[i], 1e-6f) << "x, element " << i;
  }
}

// Attention's softmax: Softmax(Select(mask, scores * c, -inf)) over the last axis becomes one
// row kernel (CPUAttentionSoftmax), and its gradient, as autodiff builds it through Softmax,
// Select and Multiply, another (CPUAttentionSoftmaxBackprop); the values are the unfused ops'
// (NaN where they give NaN: a row with no key allowed, a NaN score).
namespace {
struct AttentionCase {
  const char* id;
  Shape scores, mask;  // mask {}: none
  bool scaled;
  element::Type_t type;
  int nan_at = -1;  // a score set to NaN (through the scale: NaN * c)
};

std::shared_ptr<Function> attention_softmax(const AttentionCase& c) {
  element::Type t(c.type);
  auto s = std::make_shared<op::Parameter>(t, c.scores);
  auto w = std::make_shared<op::Parameter>(t, c.scores);
  Output x = s;
  auto scalar = [&](double v) { return std::make_shared<op::Constant>(t, Shape{}, std::vector<double>{v}); };
  if (c.scaled) x = std::make_shared<op::Multiply>(x, scalar(0.37), "numpy");
  if (c.nan_at >= 0) {
    std::vector<double> bump(shape_size(c.scores), 1.0);
    bump[static_cast<size_t>(c.nan_at)] = std::nan("");
    x = std::make_shared<op::Multiply>(x, std::make_shared<op::Constant>(t, c.scores, bump));
  }
  if (!c.mask.empty()) {
    std::vector<char> m(shape_size(c.mask));
    size_t cols = c.mask.back();
    for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<char>(i % cols <= (i / cols) % (cols + 3));
    if (m.size() > 3 * cols) std::fill(m.begin() + static_cast<std::ptrdiff_t>(2 * cols),
                                       m.begin() + static_cast<std::ptrdiff_t>(3 * cols), 0);  // a row with nothing allowed
    auto mask = std::make_shared<op::Constant>(element::boolean, c.mask, m);
    x = std::make_shared<op::Select>(mask, x, scalar(-INFINITY), "numpy");
  }
  auto y = std::make_shared<op::Softmax>(x, AxisSet{c.scores.size() - 1});
  AxisSet all;
  for (size_t i = 0; i < c.scores.size(); ++i) all.insert(i);
  auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, w), all);
  autodiff::Adjoints adj(OutputVector{loss}, OutputVector{scalar(1.0)});
  return std::make_shared<Function>(OutputVector{y, adj.backprop_output(s)}, ParameterVector{s, w});
}
}  // namespace

TEST(AttentionFusion, forward_and_backward_match_unfused) {
  using element::Type_t;
  for (const AttentionCase& c : std::vector<AttentionCase>{
           {"causal-f32", {2, 3, 7, 7}, {7, 7}, true, Type_t::f32},
           {"causal-f64", {2, 3, 7, 7}, {7, 7}, true, Type_t::f64},
           {"wide-rows-f32", {3, 5, 37}, {5, 37}, true, Type_t::f32},
           {"batched-mask", {2, 2, 4, 9}, {2, 1, 4, 9}, false, Type_t::f32},
           {"row-mask", {4, 6, 10}, {6, 1}, true, Type_t::f32},
           {"scale-only", {5, 16}, {}, true, Type_t::f32},
           {"mask-only", {3, 4, 11}, {4, 11}, false, Type_t::f64},
           {"nan-score", {2, 3, 12}, {3, 12}, true, Type_t::f32, 14},
           // Row lengths around the 16-lane vectors and a causal row's allowed span.
           {"one-column", {4, 3, 1}, {3, 1}, true, Type_t::f32},
           {"causal-33", {2, 33, 33}, {33, 33}, true, Type_t::f32},
           {"causal-130", {2, 130, 130}, {130, 130}, true, Type_t::f32},
           {"plain-130", {7, 130}, {}, true, Type_t::f32},
           {"nan-in-span", {2, 20, 20}, {20, 20}, true, Type_t::f32, 20 * 17 + 3},
           {"nan-masked-out", {2, 20, 20}, {20, 20}, true, Type_t::f32, 20 * 5 + 9},
       }) {
    SCOPED_TRACE(c.id);
    auto f = attention_softmax(c);
    RunResult fused = run(f, true, 5), plain = run(f, false, 5);
    EXPECT_TRUE(has_step(fused, "CPUAttentionSoftmax_"));
    EXPECT_TRUE(has_step(fused, "CPUAttentionSoftmaxBackprop_"));
    EXPECT_FALSE(has_step(fused, "Softmax_"));
    double tol = c.type == Type_t::f32 ? 2e-6 : 1e-13;
    size_t nans = 0;
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < plain.outputs[i].size(); ++j) {
        double a = fused.outputs[i][j], b = plain.outputs[i][j];
        if (std::isnan(b)) {
          EXPECT_TRUE(std::isnan(a)) << "output " << i << " element " << j;
          ++nans;
        } else {
          EXPECT_NEAR(a, b, tol * (1 + std::abs(b))) << "output " << i << " element " << j;
        }
      }
    bool expect_nan = c.nan_at >= 0 || shape_size(c.mask) > 3 * (c.mask.empty() ? 1 : c.mask.back());
    EXPECT_EQ(nans > 0, expect_nan);
  }
}

TEST(AttentionFusion, other_softmaxes_and_shared_intermediates_stay_unfused) {
  auto s = std::make_shared<op::Parameter>(element::f32, Shape{3, 4});
  auto scaled = std::make_shared<op::Multiply>(
      s, std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{2}), "numpy");
  auto first_axis = std::make_shared<op::Softmax>(scaled, AxisSet{0});
  auto last_axis = std::make_shared<op::Softmax>(scaled, AxisSet{1});  // the scaled scores are also read above
  auto plain_softmax = std::make_shared<op::Softmax>(s, AxisSet{1});  // nothing to fuse
  auto f = std::make_shared<Function>(OutputVector{first_axis, last_axis, plain_softmax}, ParameterVector{s});
  RunResult fused = run(f, true, 3), plain = run(f, false, 3);
  size_t softmaxes = 0;
  for (const auto& step : fused.schedule) softmaxes += step.rfind("Softmax_", 0) == 0;
  EXPECT_EQ(softmaxes, 3u);  // over axis 0, over the shared scaled scores, and without scale or mask
  EXPECT_FALSE(has_step(fused, "CPUAttentionSoftmax_"));
  expect_same(fused, plain, 0);
}

// A linear layer on activations [batch, length, width] and its gradients: Dot(x, W) + b, and
// the Dots autodiff builds, Dot(delta, W^T) and Dot(x^T, delta, 2) with x^T a rotation of x's
// axes. Each becomes one GEMM over the operands' memory (a transpose as strides, the bias
// inside), with no Reshape copying x or W; the values are the unfused ops'.
TEST(MatMulFusion, linear_layer_on_3d_activations_and_its_gradients) {
  for (auto et : {element::Type_t::f32, element::Type_t::f64}) {
    element::Type t(et);
    auto x = std::make_shared<op::Parameter>(t, Shape{3, 5, 4});
    auto w = std::make_shared<op::Parameter>(t, Shape{4, 6});
    auto b = std::make_shared<op::Parameter>(t, Shape{6});
    auto r = std::make_shared<op::Parameter>(t, Shape{3, 5, 6});
    auto y = std::make_shared<op::Add>(std::make_shared<op::Dot>(x, w), b, "numpy");
    auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, r), AxisSet{0, 1, 2});
    autodiff::Adjoints adj(OutputVector{loss},
                           OutputVector{std::make_shared<op::Constant>(t, Shape{}, std::vector<double>{1})});
    auto f = std::make_shared<Function>(
        OutputVector{y, adj.backprop_output(x), adj.backprop_output(w), adj.backprop_output(b)},
        ParameterVector{x, w, b, r});
    RunResult fused = run(f, true, 7), plain = run(f, false, 7);
    size_t gemms = 0, reshapes = 0;
    for (const auto& s : fused.schedule) {
      gemms += s.rfind("CPUMatMulBias_", 0) == 0;
      reshapes += s.rfind("Reshape_", 0) == 0;
    }
    EXPECT_EQ(gemms, 3u) << ::testing::PrintToString(fused.schedule);
    EXPECT_EQ(reshapes, 0u) << ::testing::PrintToString(fused.schedule);
    EXPECT_FALSE(has_step(fused, "Add_")) << "the bias is inside the GEMM";
    expect_same(fused, plain, et == element::Type_t::f32 ? 1e-5 : 1e-12);
  }
}

// A graph shaped like softmax's gradient whose row sums are broadcast along another axis of
// square scores is not that gradient: it stays unfused.
TEST(AttentionFusion, a_gradient_broadcast_along_another_axis_stays_unfused) {
  auto s = std::make_shared<op::Parameter>(element::f32, Shape{2, 5, 5});
  auto d = std::make_shared<op::Parameter>(element::f32, Shape{2, 5, 5});
  auto scale = std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{0.5f});
  auto y = std::make_shared<op::Softmax>(std::make_shared<op::Multiply>(s, scale, "numpy"), AxisSet{2});
  auto sums = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(d, y), AxisSet{2});
  auto wrong = std::make_shared<op::Broadcast>(sums, Shape{2, 5, 5}, AxisSet{1});
  auto g = std::make_shared<op::Multiply>(y, std::make_shared<op::Subtract>(d, wrong));
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Multiply>(g, scale, "numpy")},
                                      ParameterVector{s, d});
  RunResult fused = run(f, true, 9), plain = run(f, false, 9);
  EXPECT_TRUE(has_step(fused, "CPUAttentionSoftmax_"));
  EXPECT_FALSE(has_step(fused, "CPUAttentionSoftmaxBackprop_"));
  expect_same(fused, plain, 2e-6);
}
