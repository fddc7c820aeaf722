// The layout pass: kernels may ask for layouts a oneDNN primitive chooses; a Reorder appears
// exactly where a producer's layout differs from what a consumer reads, one per value and
// layout however many consumers want it, and never at a plain boundary. Two test ops stand in
// for a convolution that produces and consumes a blocked layout (nChw8c).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using runtime::cpu::CompileOptions;
using runtime::cpu::CPUExecutable;
using runtime::cpu::KernelContext;
using runtime::cpu::KernelRegistry;
using runtime::cpu::LayoutContext;
using runtime::cpu::TensorDesc;

namespace {

// Identity ops on 4-D f32 data whose kernels write (ToBlocked) or read (FromBlocked) nChw8c.
template <typename Self>
class IdentityOp : public Op<Self> {
 public:
  IdentityOp() = default;
  explicit IdentityOp(const Output& x) : Op<Self>({x}) { this->constructor_validate_and_infer_types(); }
  void validate_and_infer_types() override {
    this->check_input_count(1);
    this->set_output_type(0, this->get_input_element_type(0), this->get_input_shape(0));
  }
};
class ToBlocked : public IdentityOp<ToBlocked> {
 public:
  static constexpr const char* type_name = "TestToBlocked";
  using IdentityOp::IdentityOp;
};
class FromBlocked : public IdentityOp<FromBlocked> {
 public:
  static constexpr const char* type_name = "TestFromBlocked";
  using IdentityOp::IdentityOp;
};

TensorDesc blocked(const Shape& s) {
  dnnl::memory::desc md(runtime::cpu::to_dims(s), dnnl::memory::data_type::f32,
                        dnnl::memory::format_tag::nChw8c);
  return TensorDesc::with_layout(element::f32, s, md);
}

runtime::cpu::Kernel reorder_kernel(KernelContext& ctx) {
  auto src = ctx.input(0).dnnl_desc(), dst = ctx.output(0).dnnl_desc();
  dnnl::reorder::primitive_desc pd(runtime::cpu::dnnl_engine(), src, runtime::cpu::dnnl_engine(),
                                   dst, runtime::cpu::dnnl_attr());
  return runtime::cpu::dnnl_kernel(ctx, dnnl::reorder(pd), pd.scratchpad_desc(),
                                   {{DNNL_ARG_FROM, src, true, 0}, {DNNL_ARG_TO, dst, false, 0}});
}

// Registered for the test's lifetime only (no other suite knows these ops).
class LayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KernelRegistry::get().add(ToBlocked::type_name, reorder_kernel, [](LayoutContext& lc) {
      lc.outputs[0] = blocked(lc.node.get_shape());
    });
    KernelRegistry::get().add(FromBlocked::type_name, reorder_kernel, [](LayoutContext& lc) {
      lc.wanted[0] = blocked(lc.node.get_shape());
    });
  }
  void TearDown() override {
    KernelRegistry::get().remove(ToBlocked::type_name);
    KernelRegistry::get().remove(FromBlocked::type_name);
  }

  // Compiles, runs on x, checks every result against `expected(x)` elementwise.
  std::shared_ptr<CPUExecutable> run(const std::shared_ptr<Function>& f, const std::vector<float>& x,
                                     const std::vector<std::function<float(float)>>& expected,
                                     bool fuse = false) {
    runtime::cpu::CPUBackend backend;
    auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, fuse}));
    auto in = backend.create_tensor(element::f32, f->get_parameters()[0]->get_shape());
    in->write(x.data(), x.size() * sizeof(float));
    std::vector<std::shared_ptr<runtime::Tensor>> outs;
    for (const auto& r : f->get_results()) outs.push_back(backend.create_tensor(element::f32, r->get_shape()));
    exe->call(outs, {in});
    for (size_t r = 0; r < outs.size(); ++r) {
      std::vector<float> got(x.size());
      outs[r]->read(got.data(), got.size() * sizeof(float));
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(got[i], expected[r](x[i]), 1e-5f * (1 + std::fabs(expected[r](x[i]))))
            << "result " << r << " element " << i;
    }
    return exe;
  }
};

std::vector<float> values(const Shape& s) {
  std::vector<float> v(shape_size(s));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i) * 0.7f) * 3;
  return v;
}

float relu(float x) { return x > 0 ? x : 0; }

const Shape kPadded{2, 3, 4, 5};    // 3 channels: nChw8c pads them to 8
const Shape kUnpadded{1, 8, 3, 3};  // 8 channels: no padding

}  // namespace

TEST_F(LayoutTest, blocked_layout_passes_through_relu_and_is_reordered_at_the_result) {
  auto p = std::make_shared<op::Parameter>(element::f32, kPadded);
  auto y = std::make_shared<op::Relu>(std::make_shared<ToBlocked>(p));
  auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{p});
  auto exe = run(f, values(kPadded), {relu});
  EXPECT_EQ(exe->get_reorder_count(), 1u);  // before the Result: boundaries are plain
}

TEST_F(LayoutTest, consumer_reading_the_producers_layout_needs_no_reorder) {
  auto p = std::make_shared<op::Parameter>(element::f32, kPadded);
  auto y = std::make_shared<FromBlocked>(std::make_shared<op::Relu>(std::make_shared<ToBlocked>(p)));
  auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{p});
  auto exe = run(f, values(kPadded), {relu});
  EXPECT_EQ(exe->get_reorder_count(), 0u);
}

TEST_F(LayoutTest, op_that_would_break_zero_padding_reads_plain) {
  // exp(0) = 1 would write ones into the padding: Exp reads plain data when there is padding...
  auto p = std::make_shared<op::Parameter>(element::f32, kPadded);
  auto y = std::make_shared<FromBlocked>(std::make_shared<op::Exp>(std::make_shared<ToBlocked>(p)));
  auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{p});
  auto exe = run(f, values(kPadded), {[](float x) { return std::exp(x); }});
  EXPECT_EQ(exe->get_reorder_count(), 2u);  // to plain for Exp, back for FromBlocked
  // ...and passes the blocked layout through when there is none.
  auto q = std::make_shared<op::Parameter>(element::f32, kUnpadded);
  auto z = std::make_shared<FromBlocked>(std::make_shared<op::Exp>(std::make_shared<ToBlocked>(q)));
  auto g = std::make_shared<Function>(OutputVector{z}, ParameterVector{q});
  exe = run(g, values(kUnpadded), {[](float x) { return std::exp(x); }});
  EXPECT_EQ(exe->get_reorder_count(), 0u);
}

TEST_F(LayoutTest, one_reorder_serves_every_consumer_of_a_layout) {
  auto p = std::make_shared<op::Parameter>(element::f32, kPadded);
  auto b = std::make_shared<ToBlocked>(p);
  auto neg = std::make_shared<op::Negative>(std::make_shared<op::Sin>(b));  // Sin keeps 0, so
  // it passes blocked data on; these two read plain data:
  auto sum = std::make_shared<op::Add>(b, p);  // a plain operand: the op reads plain
  auto f = std::make_shared<Function>(OutputVector{b, sum, neg}, ParameterVector{p});
  auto exe = run(f, values(kPadded),
                 {[](float x) { return x; }, [](float x) { return 2 * x; },
                  [](float x) { return -std::sin(x); }});
  // b to plain once (the result and Add share it), neg to plain once at its result.
  EXPECT_EQ(exe->get_reorder_count(), 2u);
}

TEST_F(LayoutTest, fused_elementwise_passes_an_unpadded_blocked_layout_through) {
  auto p = std::make_shared<op::Parameter>(element::f32, kUnpadded);
  auto b = std::make_shared<ToBlocked>(p);
  auto y = std::make_shared<FromBlocked>(
      std::make_shared<op::Relu>(std::make_shared<op::Multiply>(b, std::make_shared<op::Tanh>(b))));
  auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{p});
  auto exe = run(f, values(kUnpadded), {[](float x) { return relu(x * std::tanh(x)); }}, true);
  EXPECT_EQ(exe->get_reorder_count(), 0u);
  bool fused = false;
  for (const auto& step : exe->get_schedule()) fused = fused || step.find("CPUFusedElementwise") == 0;
  EXPECT_TRUE(fused);
}

TEST_F(LayoutTest, plain_graphs_get_no_reorders) {
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{4, 6});
  auto w = std::make_shared<op::Parameter>(element::f32, Shape{6, 5});
  auto y = std::make_shared<op::Relu>(std::make_shared<op::Dot>(std::make_shared<op::Exp>(p), w));
  auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{p, w});
  for (bool fuse : {false, true}) {
    runtime::cpu::CPUBackend backend;
    auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, fuse}));
    EXPECT_EQ(exe->get_reorder_count(), 0u) << "fuse=" << fuse;
  }
}

// A constant read in a blocked layout is laid out once, when the plan is built: no Reorder
// runs at a call, the reader gets the same values (padding included: 3 channels in nChw8c).
TEST_F(LayoutTest, constant_read_blocked_is_laid_out_at_compile_time) {
  for (const Shape& s : {kUnpadded, kPadded}) {
    SCOPED_TRACE(to_braces(s));
    auto p = std::make_shared<op::Parameter>(element::f32, s);
    auto k = std::make_shared<op::Constant>(element::f32, s, values(s));
    // FromBlocked reads the constant blocked; the sum with p is plain at the result.
    auto y = std::make_shared<op::Add>(std::make_shared<FromBlocked>(k), p);
    auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{p});
    auto x = values(s);
    std::vector<std::function<float(float)>> twice{[](float v) { return 2 * v; }};
    auto exe = run(f, x, twice);
    EXPECT_EQ(exe->get_reorder_count(), 0u);
    for (const auto& step : exe->get_schedule())
      EXPECT_NE(step.rfind("CPUReorder", 0), 0u) << ::testing::PrintToString(exe->get_schedule());
    // Unoptimised plans keep the Reorder (the baseline): the same values.
    runtime::cpu::CPUBackend backend;
    auto plain =
        std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{false, false}));
    EXPECT_EQ(plain->get_reorder_count(), 1u);
  }
}

// Matmul asks oneDNN for its weights' layout (format_tag::any). Whatever this machine's oneDNN
// picks, two products of the same weights share at most one reorder, and the numbers hold.
TEST_F(LayoutTest, matmul_weights_in_the_chosen_layout_are_reordered_once) {
  const size_t n = 64, k = 96, m = 32;
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{n, k});
  auto w = std::make_shared<op::Parameter>(element::f32, Shape{k, m});
  auto bias = std::make_shared<op::Parameter>(element::f32, Shape{m});
  auto mm = [&](const Output& a) {
    return std::make_shared<op::Relu>(std::make_shared<op::Add>(std::make_shared<op::Dot>(a, w), bias,
                                                                op::AutoBroadcast::numpy));
  };
  auto y1 = mm(x);
  auto y2 = mm(std::make_shared<op::Negative>(x));
  auto f = std::make_shared<Function>(OutputVector{y1, y2}, ParameterVector{x, w, bias});
  runtime::cpu::CPUBackend backend;
  auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, true}));
  EXPECT_LE(exe->get_reorder_count(), 1u);
  auto vx = values(Shape{n, k}), vw = values(Shape{k, m}), vb = values(Shape{m});
  auto tx = backend.create_tensor(element::f32, Shape{n, k}), tw = backend.create_tensor(element::f32, Shape{k, m}),
       tb = backend.create_tensor(element::f32, Shape{m});
  tx->write(vx.data(), vx.size() * 4);
  tw->write(vw.data(), vw.size() * 4);
  tb->write(vb.data(), vb.size() * 4);
  auto o1 = backend.create_tensor(element::f32, Shape{n, m}), o2 = backend.create_tensor(element::f32, Shape{n, m});
  exe->call({o1, o2}, {tx, tw, tb});
  std::vector<float> g1(n * m), g2(n * m);
  o1->read(g1.data(), g1.size() * 4);
  o2->read(g2.data(), g2.size() * 4);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) {
      double s1 = vb[j], s2 = vb[j];
      for (size_t p = 0; p < k; ++p) {
        s1 += double(vx[i * k + p]) * vw[p * m + j];
        s2 -= double(vx[i * k + p]) * vw[p * m + j];
      }
      EXPECT_NEAR(g1[i * m + j], std::max(s1, 0.0), 1e-3);
      EXPECT_NEAR(g2[i * m + j], std::max(s2, 0.0), 1e-3);
    }
}

// Batch normalization follows its data's layout (oneDNN's has no format_tag::any): blocked
// data from a producer passes through without a reorder, the normalized output (d_input, for
// the backprop, which reads delta in it too) keeps it, and the statistics, gamma, beta and
// their gradients are plain. The numbers match the same graph on plain data.
TEST_F(LayoutTest, batch_norm_keeps_its_datas_blocked_layout) {
  for (const Shape& s : {kUnpadded, kPadded}) {
    SCOPED_TRACE(to_braces(s));
    const size_t c = s[1];
    auto build = [&](bool blocked) {
      auto p = std::make_shared<op::Parameter>(element::f32, s);
      auto in = [&](const Output& v) -> Output {
        return blocked ? std::make_shared<ToBlocked>(v) : v;
      };
      auto out = [&](const Output& v) -> Output {
        return blocked ? std::make_shared<FromBlocked>(v) : v;
      };
      std::vector<float> gv(c), bv(c);
      for (size_t i = 0; i < c; ++i) {
        gv[i] = 0.5f + 0.25f * static_cast<float>(i);
        bv[i] = 0.1f * static_cast<float>(i) - 0.2f;
      }
      auto gamma = std::make_shared<op::Constant>(element::f32, Shape{c}, gv);
      auto beta = std::make_shared<op::Constant>(element::f32, Shape{c}, bv);
      Output x = in(p);
      auto bn = std::make_shared<op::BatchNormTraining>(x, gamma, beta, 1e-3);
      Output y = std::make_shared<op::Relu>(bn->output(0));
      auto bp = std::make_shared<op::BatchNormTrainingBackprop>(x, gamma, beta, bn->output(1),
                                                                bn->output(2), y, 1e-3);
      auto bi = std::make_shared<op::BatchNormInference>(x, gamma, beta, bn->output(1),
                                                         bn->output(2), 1e-3);
      OutputVector results{out(y), bn->output(1), bn->output(2), out(bp->output(0)),
                           bp->output(1), bp->output(2), out(bi)};
      return std::make_shared<Function>(results, ParameterVector{p});
    };
    std::vector<std::vector<float>> got[2];
    size_t reorders[2] = {0, 0};
    for (bool blocked : {false, true}) {
      runtime::cpu::CPUBackend backend;
      auto f = build(blocked);
      auto exe =
          std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, false}));
      reorders[blocked] = exe->get_reorder_count();
      auto x = values(s);
      auto tx = backend.create_tensor(element::f32, s);
      tx->write(x.data(), x.size() * sizeof(float));
      std::vector<std::shared_ptr<runtime::Tensor>> outs;
      for (const auto& r : f->get_results())
        outs.push_back(backend.create_tensor(element::f32, r->get_shape()));
      exe->call(outs, {tx});
      for (const auto& o : outs) {
        std::vector<float> v(o->get_element_count());
        o->read(v.data(), v.size() * sizeof(float));
        got[blocked].push_back(v);
      }
    }
    EXPECT_EQ(reorders[false], 0u);
    EXPECT_EQ(reorders[true], 0u) << "a reorder around the batch-norm ops";
    for (size_t r = 0; r < got[0].size(); ++r)
      EXPECT_TRUE(test::all_close(got[1][r], got[0][r], 1e-5, 1e-5)) << "result " << r;
  }
}

namespace {
// One momentum-SGD step on the filters of a convolution: v = 0.9 v + dL/dw, w = w - 0.1 v,
// where L = sum(conv(x, w) * r); the loss is the result. With `masked`, the update reads a
// boolean parameter too: w = w - 0.1 * select(mask, v, 0).
std::shared_ptr<Function> momentum_step(const std::shared_ptr<VariableState>& ws,
                                        const std::shared_ptr<VariableState>& vs, bool masked = false) {
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{4, 8, 6, 6});
  auto r = std::make_shared<op::Parameter>(element::f32, Shape{4, 16, 6, 6});
  auto mask = std::make_shared<op::Parameter>(element::boolean, ws->get_shape());
  auto w = std::make_shared<op::Variable>(ws), v = std::make_shared<op::Variable>(vs);
  auto y = std::make_shared<op::Convolution>(x, w, Strides{1, 1}, Strides{}, CoordinateDiff{1, 1},
                                             CoordinateDiff{1, 1});
  auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, r), AxisSet{0, 1, 2, 3});
  auto scalar = [](float s) { return std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{s}); };
  autodiff::Adjoints adj(OutputVector{loss}, OutputVector{scalar(1)});
  auto np = op::AutoBroadcast::numpy;
  auto v2 = std::make_shared<op::Add>(std::make_shared<op::Multiply>(v, scalar(0.9f), np), adj.backprop_output(w));
  Output step = v2;
  if (masked) step = std::make_shared<op::Select>(mask, v2, std::make_shared<op::Multiply>(v2, scalar(0), np));
  auto w2 = std::make_shared<op::Subtract>(w, std::make_shared<op::Multiply>(step, scalar(0.1f), np));
  ParameterVector params{x, r};
  if (masked) params.push_back(mask);
  return std::make_shared<Function>(OutputVector{loss},
                                    NodeVector{std::make_shared<op::Assign>(w, w2), std::make_shared<op::Assign>(v, v2)},
                                    params);
}

std::vector<float> read(const VariableState& s) {
  std::vector<float> v(shape_size(s.get_shape()));
  s.get(v.data());
  return v;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * (1 + std::fabs(b[i]))) << what << " element " << i;
}

// The same steps on two pairs of variables with the same start: one compiled keeping
// variable layouts, one with plain variables.
struct KeptAndPlain {
  const Shape ws{16, 8, 3, 3};
  std::shared_ptr<VariableState> kept_w, kept_v, plain_w, plain_v;
  std::shared_ptr<Function> kept_f, plain_f;
  std::shared_ptr<runtime::Backend> backend = test::cpu_backend();
  std::shared_ptr<runtime::cpu::CPUBackend> cpu = std::dynamic_pointer_cast<runtime::cpu::CPUBackend>(backend);
  std::shared_ptr<CPUExecutable> kept, plain;
  std::vector<test::Value> in;

  explicit KeptAndPlain(bool masked = false) {
    std::vector<float> w0 = values(ws);
    kept_w = std::make_shared<VariableState>(element::f32, ws, w0.data());
    kept_v = std::make_shared<VariableState>(element::f32, ws);
    plain_w = std::make_shared<VariableState>(element::f32, ws, w0.data());
    plain_v = std::make_shared<VariableState>(element::f32, ws);
    kept_f = momentum_step(kept_w, kept_v, masked);
    plain_f = momentum_step(plain_w, plain_v, masked);
    kept = std::dynamic_pointer_cast<CPUExecutable>(cpu->compile(kept_f, CompileOptions{true, true, true}));
    plain = std::dynamic_pointer_cast<CPUExecutable>(cpu->compile(plain_f, CompileOptions{true, true, false}));
    in = {test::make_value(Shape{4, 8, 6, 6}, values(Shape{4, 8, 6, 6})),
          test::make_value(Shape{4, 16, 6, 6}, values(Shape{4, 16, 6, 6}))};
    if (masked) {
      test::Value m{element::boolean, ws, std::vector<char>(shape_size(ws))};
      for (size_t i = 0; i < m.bytes.size(); ++i) m.bytes[i] = static_cast<char>(i % 3 != 0);
      in.push_back(m);
    }
  }
  void step_both(const std::string& when) {
    auto a = test::run_executable(*backend, *kept, in), b = test::run_executable(*backend, *plain, in);
    expect_near(test::to_vector<float>(a[0]), test::to_vector<float>(b[0]), when + ": loss");
    expect_near(read(*kept_w), read(*plain_w), when + ": filters");
    expect_near(read(*kept_v), read(*plain_v), when + ": momentum");
  }
};
}  // namespace

// Variables keep the layout their first reader wants: a convolution's filters stay blocked
// between calls, so neither they (forward) nor their gradient (for the update, and the
// momentum with it) are reordered every step. The values, read row-major, equal those of
// the same steps with plain variables. A CPU computation compiled while the filters were
// still plain lays them out plainly again before it runs (and the training step takes them
// back); one compiled once they were kept reads them as kept, reordering for its result.
// The INTERPRETER reads them row-major; a value set row-major while blocked reads back the
// same.
TEST(VariableLayouts, convolution_filters_stay_blocked_between_calls) {
  KeptAndPlain t;
  // Plainly, every step: the filters to the forward's layout and the gradient back to plain
  // (and the momentum with it). Kept: the forward reads the filters as they are; where the
  // backward-filters primitive writes the gradient in the forward's layout (AVX2 machines) the
  // gradient is not reordered either, and where it picks another one (oneDNN 2.6 on AVX-512,
  // e.g. AMD Zen 4 and 5) it is reordered once, into the kept layout. Counted in the
  // schedules: at least one reorder fewer per step.
  auto reorders = [](const std::vector<std::string>& schedule) {
    return std::count_if(schedule.begin(), schedule.end(),
                         [](const std::string& s) { return s.rfind("CPUReorder", 0) == 0; });
  };
  EXPECT_LE(reorders(t.kept->get_schedule()) + 1, reorders(t.plain->get_schedule()))
      << ::testing::PrintToString(t.kept->get_schedule()) << " vs plain "
      << ::testing::PrintToString(t.plain->get_schedule());
  auto show = std::make_shared<Function>(OutputVector{std::make_shared<op::Variable>(t.kept_w)}, ParameterVector{});
  auto early = t.cpu->compile(show, CompileOptions{});
  for (int i = 0; i < 3; ++i) t.step_both("step " + std::to_string(i));
  ASSERT_NE(t.kept_w->get_layout(), nullptr);
  ASSERT_NE(t.kept_v->get_layout(), nullptr);  // the momentum follows the gradient's layout
  EXPECT_EQ(t.plain_w->get_layout(), nullptr);
  EXPECT_TRUE(t.kept_w->get_layout()->same_as(*t.kept_v->get_layout())) << t.kept_w->get_layout()->to_string();

  // Compiled before: lays the filters out plainly.
  auto shown = test::run_executable(*t.backend, *early, {});
  EXPECT_EQ(t.kept_w->get_layout(), nullptr);
  expect_near(test::to_vector<float>(shown[0]), read(*t.plain_w), "returned filters (compiled early)");
  t.step_both("after a plain reader");
  ASSERT_NE(t.kept_w->get_layout(), nullptr);
  // Compiled after: keeps them as they are.
  auto layout = t.kept_w->get_layout();
  shown = test::run_executable(*t.backend, *t.cpu->compile(show, CompileOptions{}), {});
  ASSERT_NE(t.kept_w->get_layout(), nullptr);
  EXPECT_TRUE(t.kept_w->get_layout()->same_as(*layout));
  expect_near(test::to_vector<float>(shown[0]), read(*t.plain_w), "returned filters (compiled late)");

  // The INTERPRETER steps the kept variables from their blocked layout; the CPU steps the others.
  test::run_executable(*test::interpreter_backend(), *test::interpreter_backend()->compile(t.kept_f), t.in);
  test::run_executable(*t.backend, *t.plain, t.in);
  expect_near(read(*t.kept_w), read(*t.plain_w), "after an INTERPRETER step");
  t.step_both("back on the CPU");

  // Set row-major while blocked: read back the same, and used by the next step.
  std::vector<float> w1 = values(t.ws);
  std::reverse(w1.begin(), w1.end());
  ASSERT_NE(t.kept_w->get_layout(), nullptr);
  t.kept_w->set(w1.data());
  t.plain_w->set(w1.data());
  EXPECT_EQ(read(*t.kept_w), w1);
  t.step_both("after set");
}

// An update that also reads a boolean mask: the mask is not reordered as if it were floats
// (the kept filters' layout is taken only where every operand has their element type).
TEST(VariableLayouts, update_reading_a_boolean_mask) {
  KeptAndPlain t(true);
  for (int i = 0; i < 3; ++i) t.step_both("step " + std::to_string(i));
}
