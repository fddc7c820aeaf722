// CPU fusion: fused kernels give the same values as the ops they replace.
#include <gtest/gtest.h>

#include <random>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"

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
