// Buffer planning of the CPU executable: intermediates share an arena by liveness, outputs
// are written straight into the caller's tensors, and results that no kernel computes are
// copied.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "ngraph/ops.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using runtime::cpu::CPUExecutable;
using test::make_value;
using test::to_vector;

namespace {

constexpr size_t kAligned1000 = 4032;  // 1000 f32 rounded up to 64 bytes

std::shared_ptr<CPUExecutable> compile(const std::shared_ptr<Function>& f, bool optimize = true) {
  auto backend = std::dynamic_pointer_cast<runtime::cpu::CPUBackend>(test::cpu_backend());
  auto exe = std::dynamic_pointer_cast<CPUExecutable>(
      backend->compile(f, runtime::cpu::CompileOptions{optimize, /*fuse=*/false}));
  EXPECT_TRUE(exe);
  return exe;
}

// Two intermediates alive at the same step never share bytes.
::testing::AssertionResult no_live_overlap(const CPUExecutable& exe) {
  const auto& a = exe.get_buffer_assignments();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].offset + a[i].size > exe.get_arena_bytes())
      return ::testing::AssertionFailure() << a[i].tensor << " lies outside the arena";
    for (size_t j = i + 1; j < a.size(); ++j) {
      bool live_together = a[i].first_step <= a[j].last_step && a[j].first_step <= a[i].last_step;
      bool overlap = a[i].offset < a[j].offset + a[j].size && a[j].offset < a[i].offset + a[i].size;
      if (live_together && overlap && a[i].size && a[j].size)
        return ::testing::AssertionFailure()
               << a[i].tensor << " [" << a[i].offset << ", +" << a[i].size << ") steps "
               << a[i].first_step << ".." << a[i].last_step << " overlaps " << a[j].tensor << " ["
               << a[j].offset << ", +" << a[j].size << ") steps " << a[j].first_step << ".."
               << a[j].last_step;
    }
  }
  return ::testing::AssertionSuccess();
}

bool has_assignment(const CPUExecutable& exe, const std::string& tensor) {
  for (const auto& a : exe.get_buffer_assignments())
    if (a.tensor == tensor) return true;
  return false;
}

std::vector<float> run(const std::shared_ptr<CPUExecutable>& exe, const std::vector<float>& x,
                       size_t outputs = 1) {
  auto backend = test::cpu_backend();
  auto in = backend->create_tensor(element::f32, exe->get_parameters()[0]->get_shape());
  in->write(x.data(), x.size() * sizeof(float));
  std::vector<std::shared_ptr<runtime::Tensor>> outs;
  for (size_t i = 0; i < outputs; ++i)
    outs.push_back(backend->create_tensor(element::f32, exe->get_results()[i]->get_shape()));
  exe->call(outs, {in});
  std::vector<float> all;
  for (const auto& t : outs) {
    std::vector<float> v(t->get_element_count());
    t->read(v.data(), t->get_size_in_bytes());
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace

TEST(planning, chain_reuses_two_buffers) {
  for (size_t n : {2u, 3u, 8u, 20u}) {
    SCOPED_TRACE(n);
    auto p = std::make_shared<op::Parameter>(element::f32, Shape{1000});
    Output x = p;
    for (size_t i = 0; i < n; ++i) {
      std::shared_ptr<Node> node;
      switch (i % 3) {
        case 0: node = std::make_shared<op::Negative>(x); break;
        case 1: node = std::make_shared<op::Add>(x, p); break;
        default: node = std::make_shared<op::Abs>(x); break;
      }
      node->set_friendly_name("chain_" + std::to_string(i));
      x = node;
    }
    auto f = std::make_shared<Function>(OutputVector{x}, ParameterVector{p});
    auto exe = compile(f);
    ASSERT_TRUE(exe);
    EXPECT_EQ(exe->get_step_count(), n);
    // n - 1 intermediates (the last op writes into the caller's output).
    EXPECT_EQ(exe->get_unshared_bytes(), (n - 1) * kAligned1000);
    EXPECT_EQ(exe->get_buffer_assignments().size(), n - 1);
    EXPECT_LE(exe->get_arena_bytes(), 2 * kAligned1000);
    if (n >= 8) {
      EXPECT_LT(exe->get_arena_bytes() * 3, exe->get_unshared_bytes());
    }
    EXPECT_TRUE(no_live_overlap(*exe));
    EXPECT_FALSE(has_assignment(*exe, "chain_" + std::to_string(n - 1) + ":0"));

    // Against a plain loop over the same chain.
    std::vector<float> in(1000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * 10;
    std::vector<float> expected = in;
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < expected.size(); ++k) {
        float& v = expected[k];
        switch (i % 3) {
          case 0: v = -v; break;
          case 1: v = v + in[k]; break;
          default: v = std::fabs(v); break;
        }
      }
    EXPECT_EQ(run(exe, in), expected);
    // A second call with other data reuses the same arena correctly.
    std::vector<float> in2(1000, 1.0f), expected2(1000, 1.0f);
    for (size_t i = 0; i < n; ++i)
      for (auto& v : expected2) v = i % 3 == 0 ? -v : i % 3 == 1 ? v + 1.0f : std::fabs(v);
    EXPECT_EQ(run(exe, in2), expected2);
  }
}

TEST(planning, diamond_outputs_never_alias_inputs) {
  // a = -x; b = |a|; c = relu(a) ; d = b + c; e = d * a; g = e - b: several values alive at once.
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{1000});
  auto a = std::make_shared<op::Negative>(p);
  auto b = std::make_shared<op::Abs>(a);
  auto c = std::make_shared<op::Relu>(a);
  auto d = std::make_shared<op::Add>(b, c);
  auto e = std::make_shared<op::Multiply>(d, a);
  auto g = std::make_shared<op::Subtract>(e, b);
  auto f = std::make_shared<Function>(OutputVector{g}, ParameterVector{p});
  for (bool optimize : {true, false}) {
    auto exe = compile(f, optimize);
    ASSERT_TRUE(exe);
    EXPECT_TRUE(no_live_overlap(*exe));
    std::vector<float> in(1000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
    std::vector<float> expected;
    for (float x : in) {
      float va = -x, vb = std::fabs(va), vc = va > 0 ? va : 0, vd = vb + vc, ve = vd * va;
      expected.push_back(ve - vb);
    }
    EXPECT_EQ(run(exe, in), expected);
  }
}

TEST(planning, binary_op_reading_one_value_twice) {
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{1000});
  auto a = std::make_shared<op::Exp>(p);
  auto sq = std::make_shared<op::Multiply>(a, a);
  auto h = std::make_shared<op::Add>(sq, a);
  auto f = std::make_shared<Function>(OutputVector{h}, ParameterVector{p});
  auto exe = compile(f);
  ASSERT_TRUE(exe);
  EXPECT_TRUE(no_live_overlap(*exe));
  std::vector<float> in(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 5) * 0.25f;
  auto got = run(exe, in);
  for (size_t i = 0; i < in.size(); ++i) {
    double ea = std::exp(static_cast<double>(in[i]));
    EXPECT_NEAR(got[i], ea * ea + ea, 1e-4 * (ea * ea + ea)) << i;
  }
}

TEST(planning, result_read_by_later_steps) {
  // r0 = -x is an output and also feeds r1 = |r0| + r0.
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{4});
  auto r0 = std::make_shared<op::Negative>(p);
  r0->set_friendly_name("r0");
  auto r1 = std::make_shared<op::Add>(std::make_shared<op::Abs>(r0), r0);
  auto f = std::make_shared<Function>(OutputVector{r0, r1}, ParameterVector{p});
  auto exe = compile(f);
  ASSERT_TRUE(exe);
  EXPECT_FALSE(has_assignment(*exe, "r0:0"));  // bound to the caller's output 0
  EXPECT_EQ(run(exe, {1, -2, 3, -4}, 2), (std::vector<float>{-1, 2, -3, 4, 0, 4, 0, 8}));
}

TEST(planning, results_that_no_kernel_computes) {
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{3});
  auto c = std::make_shared<op::Constant>(element::f32, Shape{3}, std::vector<float>{7, 8, 9});
  auto n = std::make_shared<op::Negative>(p);
  auto id = std::make_shared<op::Reshape>(p, AxisVector{0}, Shape{3});  // bypassed: becomes p
  // Parameter, Constant, the same node twice, a bypassed identity, and the node once more.
  auto f = std::make_shared<Function>(OutputVector{p, c, n, n, id, n, p, c}, ParameterVector{p});
  for (bool optimize : {true, false}) {
    SCOPED_TRACE(optimize);
    auto exe = compile(f, optimize);
    ASSERT_TRUE(exe);
    EXPECT_EQ(exe->get_step_count(), optimize ? 1u : 2u);
    EXPECT_EQ(run(exe, {1, 2, 3}, 8),
              (std::vector<float>{1, 2, 3, 7,  8,  9,  -1, -2, -3, -1, -2, -3,
                                  1, 2, 3, -1, -2, -3, 1,  2,  3,  7,  8,  9}));
    // And again with other data: nothing stale.
    EXPECT_EQ(run(exe, {0, -5, 4}, 8),
              (std::vector<float>{0, -5, 4, 7, 8, 9,  0, 5,  -4, 0, 5, -4,
                                  0, -5, 4, 0, 5, -4, 0, -5, 4,  7, 8, 9}));
  }
}

TEST(planning, constant_result_after_folding) {
  // Everything folds: the executable only copies the folded constant.
  auto c = std::make_shared<op::Constant>(element::i32, Shape{2}, std::vector<int32_t>{3, -4});
  auto f = std::make_shared<Function>(
      OutputVector{std::make_shared<op::Abs>(c), std::make_shared<op::Negative>(c)},
      ParameterVector{});
  auto exe = compile(f);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->get_step_count(), 0u);
  EXPECT_EQ(exe->get_arena_bytes(), 0u);
  auto out = test::run_function(f, {});
  EXPECT_EQ(to_vector<int32_t>(out[0]), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(to_vector<int32_t>(out[1]), (std::vector<int32_t>{-3, 4}));
}

TEST(planning, schedule_lists_steps_in_order) {
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{2});
  auto a = std::make_shared<op::Negative>(p);
  a->set_friendly_name("first");
  auto b = std::make_shared<op::Exp>(a);
  b->set_friendly_name("second");
  auto f = std::make_shared<Function>(OutputVector{b}, ParameterVector{p});
  auto exe = compile(f);
  ASSERT_TRUE(exe);
  auto schedule = exe->get_schedule();
  ASSERT_EQ(schedule.size(), 2u);
  EXPECT_TRUE(test::starts_with(schedule[0], "first")) << schedule[0];
  EXPECT_TRUE(test::starts_with(schedule[1], "second")) << schedule[1];
}

TEST(planning, unused_parameter) {
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{2});
  auto unused = std::make_shared<op::Parameter>(element::f32, Shape{3});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Negative>(p)},
                                      ParameterVector{unused, p});
  auto out = test::run_function(f, {make_value(Shape{3}, std::vector<float>{9, 9, 9}),
                                    make_value(Shape{2}, std::vector<float>{1, -2})});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{-1, 2}));
}

// Many values of different sizes alive over different spans (the arena fragments); each value's
// expected contents are tracked alongside the graph as it is built.
TEST(planning, random_dag_of_mixed_sizes) {
  for (uint32_t seed : {1u, 7u, 42u, 1234u}) {
    SCOPED_TRACE(seed);
    uint32_t state = seed;
    auto next = [&state](uint32_t n) {
      state = state * 1664525u + 1013904223u;
      return (state >> 8) % n;
    };
    auto p = std::make_shared<op::Parameter>(element::f32, Shape{64});
    std::vector<float> input(64);
    for (size_t i = 0; i < input.size(); ++i)
      input[i] = static_cast<float>(static_cast<int>(i % 9) - 4);
    std::vector<std::pair<Output, std::vector<float>>> values = {{p, input}};
    for (int step = 0; step < 80; ++step) {
      auto [x, xv] = values[next(static_cast<uint32_t>(values.size()))];
      Output out;
      std::vector<float> ref;
      switch (next(4)) {
        case 0:
          out = std::make_shared<op::Negative>(x);
          for (float v : xv) ref.push_back(-v);
          break;
        case 1: {
          // Add to the latest value of the same size (possibly itself).
          size_t j = values.size();
          while (j-- > 0)
            if (values[j].second.size() == xv.size()) break;
          out = std::make_shared<op::Add>(x, values[j].first);
          for (size_t k = 0; k < xv.size(); ++k) ref.push_back(xv[k] + values[j].second[k]);
          break;
        }
        case 2:
          if (xv.size() < 2) continue;
          out = std::make_shared<op::Slice>(x, Coordinate{0}, Coordinate{xv.size() / 2});
          ref.assign(xv.begin(), xv.begin() + static_cast<std::ptrdiff_t>(xv.size() / 2));
          break;
        default: {
          auto [y, yv] = values[next(static_cast<uint32_t>(values.size()))];
          if (xv.size() + yv.size() > 1024) continue;
          out = std::make_shared<op::Concat>(OutputVector{x, y}, 0);
          ref = xv;
          ref.insert(ref.end(), yv.begin(), yv.end());
          break;
        }
      }
      values.emplace_back(out, ref);
    }
    // Results: every fifth value and the last one.
    OutputVector results;
    std::vector<float> expected;
    for (size_t i = 1; i < values.size(); ++i)
      if (i % 5 == 0 || i + 1 == values.size()) {
        results.push_back(values[i].first);
        expected.insert(expected.end(), values[i].second.begin(), values[i].second.end());
      }
    auto f = std::make_shared<Function>(results, ParameterVector{p});
    for (bool optimize : {true, false}) {
      auto exe = compile(f, optimize);
      ASSERT_TRUE(exe);
      EXPECT_TRUE(no_live_overlap(*exe));
      EXPECT_LE(exe->get_arena_bytes(), exe->get_unshared_bytes());
      EXPECT_EQ(run(exe, input, results.size()), expected);
    }
  }
}
