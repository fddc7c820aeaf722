// The CPU backend's CNN fusions, each against the same graph compiled without fusion: the
// residual sum (+ ReLU) taken into the convolution, batch-norm inference folded into the
// convolution's filters and bias (with variables and with constants), and batch norm + ReLU
// (training and inference, forward and gradients, ReLU's gradient inside the batch norm's
// backward pass). Each test also checks the fused step is there and the ops it replaces are
// gone, so a fusion that silently stops forming fails.
#include <gtest/gtest.h>

#include <random>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"
#include "test_utils.hpp"

using namespace ngraph;

namespace {

constexpr auto np = op::AutoBroadcast::numpy;

// Seeded values in [lo, hi) for a parameter.
test::Value random_value(const Shape& shape, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(shape_size(shape));
  for (auto& x : v) x = u(gen);
  return test::make_value(shape, v);
}

// Random inputs for f's parameters; those named in `positive` get values in [0.5, 1.5).
std::vector<test::Value> inputs_for(const Function& f, const std::vector<std::shared_ptr<op::Parameter>>& positive = {}) {
  std::vector<test::Value> in;
  unsigned seed = 11;
  for (const auto& p : f.get_parameters()) {
    bool pos = std::find(positive.begin(), positive.end(), p) != positive.end();
    in.push_back(pos ? random_value(p->get_shape(), seed++, 0.5f, 1.5f) : random_value(p->get_shape(), seed++));
  }
  return in;
}

// Runs f fused and unfused; expects every result to agree and returns the fused schedule.
std::vector<std::string> expect_fusion_matches(const std::shared_ptr<Function>& f,
                                               const std::vector<test::Value>& in,
                                               double rtol = 1e-4, double atol = 1e-5) {
  std::vector<std::string> fused_steps, plain_steps;
  auto fused = test::run_compiled(f, in, runtime::cpu::CompileOptions{true, true}, &fused_steps);
  auto plain = test::run_compiled(f, in, runtime::cpu::CompileOptions{true, false}, &plain_steps);
  EXPECT_EQ(fused.size(), plain.size());
  for (size_t i = 0; i < fused.size() && i < plain.size(); ++i)
    EXPECT_TRUE(test::all_close(test::to_vector<float>(fused[i]), test::to_vector<float>(plain[i]), rtol, atol))
        << "result " << i;
  return fused_steps;
}

std::shared_ptr<op::Parameter> param(const Shape& s) {
  return std::make_shared<op::Parameter>(element::f32, s);
}

std::shared_ptr<Node> conv3x3(const Output& x, const Output& w) {
  return std::make_shared<op::Convolution>(x, w, Strides{1, 1}, Strides{}, CoordinateDiff{1, 1},
                                           CoordinateDiff{1, 1});
}

std::shared_ptr<Node> channel_bias(const Output& b, size_t c) {
  return std::make_shared<op::Reshape>(b, AxisVector{0}, Shape{1, c, 1, 1});
}

}  // namespace

// relu(conv(x, w) + b + shortcut): a residual block's end, one convolution with a sum post-op.
TEST(cnn_fusion, residual_sum_and_relu_join_the_convolution) {
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "with relu" : "sum only");
    auto x = param({2, 8, 7, 7}), w = param({8, 8, 3, 3}), b = param({8}), r = param({2, 8, 7, 7});
    Output y = std::make_shared<op::Add>(std::make_shared<op::Add>(conv3x3(x, w), channel_bias(b, 8), np), r);
    if (relu) y = std::make_shared<op::Relu>(y);
    auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{x, w, b, r});
    auto steps = expect_fusion_matches(f, inputs_for(*f));
    EXPECT_EQ(test::count_steps(steps, "CPUConvolutionBias"), 1u);
    EXPECT_EQ(test::count_steps(steps, "Add") + test::count_steps(steps, "Relu") +
                  test::count_steps(steps, "CPUFusedElementwise"),
              0u);
  }
}

// A summand that is also read elsewhere is still only read by the fused convolution (copied
// into its result), so the other reader sees the original.
TEST(cnn_fusion, residual_summand_with_other_readers_is_left_intact) {
  auto x = param({1, 4, 5, 5}), w = param({4, 4, 3, 3}), b = param({4}), r = param({1, 4, 5, 5});
  auto sum = std::make_shared<op::Relu>(
      std::make_shared<op::Add>(std::make_shared<op::Add>(conv3x3(x, w), channel_bias(b, 4), np), r));
  auto other = std::make_shared<op::Multiply>(r, r);
  auto f = std::make_shared<Function>(OutputVector{sum, other}, ParameterVector{x, w, b, r});
  auto steps = expect_fusion_matches(f, inputs_for(*f));
  EXPECT_EQ(test::count_steps(steps, "CPUConvolutionBias"), 1u);
}

// BatchNormInference(conv(x, w)) -> relu: folded into a convolution with bias and ReLU. With
// variables the folded filters are computed each call; with constants, once at compile time.
TEST(cnn_fusion, batch_norm_inference_folds_into_the_convolution) {
  for (bool constants : {false, true}) {
    SCOPED_TRACE(constants ? "constant statistics and filters" : "parameters");
    auto x = param({2, 3, 8, 8});
    ParameterVector params{x};
    std::vector<std::shared_ptr<op::Parameter>> positive;
    auto input = [&](const Shape& s, unsigned seed, bool pos) -> Output {
      if (constants) {
        auto v = test::to_vector<float>(random_value(s, seed, pos ? 0.5f : -1.f, pos ? 1.5f : 1.f));
        return std::make_shared<op::Constant>(element::f32, s, v);
      }
      auto p = param(s);
      params.push_back(p);
      if (pos) positive.push_back(p);
      return p;
    };
    Output w = input({6, 3, 3, 3}, 1, false), gamma = input({6}, 2, false), beta = input({6}, 3, false),
           mean = input({6}, 4, false), var = input({6}, 5, true);
    auto bn = std::make_shared<op::BatchNormInference>(conv3x3(x, w), gamma, beta, mean, var, 1e-5);
    auto y = std::make_shared<op::Relu>(bn);
    auto f = std::make_shared<Function>(OutputVector{y}, params);
    auto steps = expect_fusion_matches(f, inputs_for(*f, positive));
    EXPECT_EQ(test::count_steps(steps, "CPUConvolutionBias"), 1u);
    EXPECT_EQ(test::count_steps(steps, "BatchNormInference") + test::count_steps(steps, "Relu") +
                  test::count_steps(steps, "CPUBatchNormRelu"),
              0u);
    // Constants: the scaled filters and the bias were evaluated at compile time (only layout
    // reorders remain besides the convolution).
    if (constants) {
      EXPECT_EQ(steps.size() - test::count_steps(steps, "CPUReorder"), 1u) << ::testing::PrintToString(steps);
    }
  }
}

// A convolution whose value is also read elsewhere keeps its batch norm (folding would change
// what the other reader sees).
TEST(cnn_fusion, batch_norm_of_a_shared_convolution_is_not_folded) {
  auto x = param({1, 2, 5, 5}), w = param({4, 2, 3, 3}), g = param({4}), b = param({4}), m = param({4}),
       v = param({4});
  auto conv = conv3x3(x, w);
  auto bn = std::make_shared<op::BatchNormInference>(conv, g, b, m, v, 1e-3);
  auto f = std::make_shared<Function>(OutputVector{bn, conv}, ParameterVector{x, w, g, b, m, v});
  auto steps = expect_fusion_matches(f, inputs_for(*f, {v}));
  EXPECT_EQ(test::count_steps(steps, "BatchNormInference"), 1u);
}

// relu(BatchNormTraining(x)[0]) with the statistics as results, through GetOutputElement as
// the Python API builds it, and the gradients of a loss through the fused op.
TEST(cnn_fusion, batch_norm_training_and_relu_fuse_with_gradients) {
  auto x = param({4, 6, 5, 5}), g = param({6}), b = param({6}), r = param({4, 6, 5, 5});
  auto bn = std::make_shared<op::BatchNormTraining>(x, g, b, 1e-5);
  auto y = std::make_shared<op::Relu>(op::get_output_element(bn->output(0)));
  auto mean = op::get_output_element(bn->output(1)), var = op::get_output_element(bn->output(2));
  auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, r), AxisSet{0, 1, 2, 3});
  autodiff::Adjoints adj(OutputVector{loss}, OutputVector{std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{1})});
  OutputVector results{y, mean, var};
  for (const auto& p : {x, g, b}) results.push_back(adj.backprop_output(p));
  auto f = std::make_shared<Function>(results, ParameterVector{x, g, b, r});
  auto steps = expect_fusion_matches(f, inputs_for(*f, {g}), 1e-4, 1e-4);
  EXPECT_EQ(test::count_steps(steps, "CPUBatchNormRelu"), 1u);
  EXPECT_EQ(test::count_steps(steps, "BatchNormTraining") + test::count_steps(steps, "Relu"), 0u);
  // ReLU's gradient runs inside the batch norm's backward pass, from the forward's mask.
  EXPECT_EQ(test::count_steps(steps, "CPUBatchNormReluBackprop"), 1u);
  EXPECT_EQ(test::count_steps(steps, "BatchNormTrainingBackprop") +
                test::count_steps(steps, "Select") + test::count_steps(steps, "CPUFusedElementwise"),
            0u)
      << ::testing::PrintToString(steps);
}

namespace {
// The gradients of sum(relu(bn(conv(x, w))) * r) with respect to x, w, gamma and beta, and the
// forward value; element type t.
std::shared_ptr<Function> conv_bn_relu_training(element::Type t, Output* select_reader = nullptr) {
  auto p = [t](const Shape& s) { return std::make_shared<op::Parameter>(t, s); };
  auto x = p({4, 3, 6, 6}), w = p({16, 3, 3, 3}), g = p({16}), b = p({16}), r = p({4, 16, 6, 6});
  auto bn = std::make_shared<op::BatchNormTraining>(conv3x3(x, w), g, b, 1e-5);
  auto y = std::make_shared<op::Relu>(op::get_output_element(bn->output(0)));
  auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, r), AxisSet{0, 1, 2, 3});
  auto one = std::make_shared<op::Constant>(t, Shape{}, std::vector<double>{1});
  autodiff::Adjoints adj(OutputVector{loss}, OutputVector{one});
  OutputVector results{y};
  for (const auto& v : {x, w, g, b}) results.push_back(adj.backprop_output(v));
  // Also read the ReLU's gradient (Select) itself: the fused backprop would hide it.
  if (select_reader) {
    for (const auto& node : Function(results, ParameterVector{x, w, g, b, r}).get_ordered_ops())
      if (node->get_type_name() == std::string("Select")) *select_reader = node->output(0);
    results.push_back(*select_reader);
  }
  return std::make_shared<Function>(results, ParameterVector{x, w, g, b, r});
}
}  // namespace

// After a convolution (blocked data and a oneDNN workspace as the mask) in f32, and through the
// reference loops (one byte per element) in f64: the same gradients as unfused.
TEST(cnn_fusion, batch_norm_relu_backprop_reads_the_forward_mask) {
  auto f = conv_bn_relu_training(element::f32);
  auto steps = expect_fusion_matches(f, inputs_for(*f), 1e-4, 1e-4);
  EXPECT_EQ(test::count_steps(steps, "CPUBatchNormReluBackprop"), 1u)
      << ::testing::PrintToString(steps);
  EXPECT_EQ(test::count_steps(steps, "Select") + test::count_steps(steps, "CPUFusedElementwise"), 0u);

  auto fd = conv_bn_relu_training(element::f64);
  std::vector<test::Value> in;
  unsigned seed = 5;
  for (const auto& p : fd->get_parameters()) {
    std::mt19937 gen(seed++);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> v(shape_size(p->get_shape()));
    for (auto& e : v) e = u(gen);
    in.push_back(test::make_value(p->get_shape(), v));
  }
  std::vector<std::string> fused_steps;
  auto fused = test::run_compiled(fd, in, runtime::cpu::CompileOptions{true, true}, &fused_steps);
  auto plain = test::run_compiled(fd, in, runtime::cpu::CompileOptions{true, false});
  EXPECT_EQ(test::count_steps(fused_steps, "CPUBatchNormReluBackprop"), 1u);
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(test::all_close(test::to_vector<double>(fused[i]), test::to_vector<double>(plain[i]),
                                1e-10, 1e-10))
        << "result " << i;
}

// A ReLU gradient read elsewhere too stays a value of its own, and the batch norm's backward
// pass reads it as before.
TEST(cnn_fusion, relu_gradient_with_another_reader_is_not_taken_into_the_backprop) {
  Output select;
  auto f = conv_bn_relu_training(element::f32, &select);
  ASSERT_TRUE(select.get_node());
  auto steps = expect_fusion_matches(f, inputs_for(*f), 1e-4, 1e-4);
  EXPECT_EQ(test::count_steps(steps, "CPUBatchNormReluBackprop"), 0u);
  EXPECT_EQ(test::count_steps(steps, "BatchNormTrainingBackprop"), 1u);
  EXPECT_EQ(test::count_steps(steps, "CPUBatchNormRelu"), 1u);
}

// Inference form on data that is no convolution's, and f64 (the reference loop with ReLU).
TEST(cnn_fusion, batch_norm_inference_and_relu_fuse) {
  auto x = param({3, 4, 2, 2}), g = param({4}), b = param({4}), m = param({4}), v = param({4});
  auto y = std::make_shared<op::Relu>(std::make_shared<op::BatchNormInference>(x, g, b, m, v, 1e-5));
  auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{x, g, b, m, v});
  auto steps = expect_fusion_matches(f, inputs_for(*f, {v}));
  EXPECT_EQ(test::count_steps(steps, "CPUBatchNormRelu"), 1u);

  // f64: the loop applies the ReLU; NaN passes through it as NaN.
  auto xd = std::make_shared<op::Parameter>(element::f64, Shape{2, 2, 1, 1});
  auto gd = std::make_shared<op::Constant>(element::f64, Shape{2}, std::vector<double>{1, 1});
  auto zd = std::make_shared<op::Constant>(element::f64, Shape{2}, std::vector<double>{0, 0});
  auto yd = std::make_shared<op::Relu>(std::make_shared<op::BatchNormInference>(xd, gd, zd, zd, gd, 0.0));
  auto fd = std::make_shared<Function>(OutputVector{yd}, ParameterVector{xd});
  std::vector<std::string> fd_steps;
  auto out = test::run_compiled(fd, {test::make_value<double>({2, 2, 1, 1}, {-1, 2, NAN, -3})},
                                runtime::cpu::CompileOptions{true, true}, &fd_steps);
  EXPECT_EQ(test::count_steps(fd_steps, "CPUBatchNormRelu"), 1u);
  auto got = test::to_vector<double>(out[0]);
  EXPECT_EQ(got[0], 0.0);
  EXPECT_NEAR(got[1], 2.0, 1e-12);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], 0.0);
}
