// Convolution and its backprop ops: the shape rule and its errors, the values of both
// kernels (oneDNN for f32, the reference loop for f64, data dilation and negative padding)
// against a direct evaluation of the definition, and the backprop ops through the adjoint
// identity <conv(x, w), dy> = <x, backprop_data(w, dy)> = <w, backprop_filters(x, dy)>.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ngraph/ops.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using op::ConvolutionWindow;

namespace {

std::vector<double> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

// The definition, one output element at a time.
std::vector<double> direct_conv(const Shape& ds, const std::vector<double>& x, const Shape& fs,
                                const std::vector<double>& w, const ConvolutionWindow& win, const Shape& os) {
  size_t k = ds.size() - 2, G = static_cast<size_t>(win.groups), icg = fs[1], ocg = fs[0] / G;
  std::vector<double> y(shape_size(os), 0);
  Strides dstr = row_major_strides(ds), fstr = row_major_strides(fs), ostr = row_major_strides(os);
  for (size_t e = 0; e < y.size(); ++e) {
    std::vector<size_t> o(os.size());
    for (size_t d = 0, rem = e; d < os.size(); ++d) o[d] = rem / ostr[d], rem %= ostr[d];
    size_t n = o[0], oc = o[1], g = oc / ocg;
    double acc = 0;
    size_t fspatial = shape_size(Shape(fs.begin() + 2, fs.end()));
    for (size_t ic = 0; ic < icg; ++ic)
      for (size_t f = 0; f < fspatial; ++f) {
        size_t rem = f, xi = n * dstr[0] + (g * icg + ic) * dstr[1], wi = oc * fstr[0] + ic * fstr[1];
        bool inside = true;
        for (size_t a = 0; a < k; ++a) {
          size_t fa = rem / fstr[a + 2];
          rem %= fstr[a + 2];
          auto pos = static_cast<std::ptrdiff_t>(o[a + 2] * win.strides[a] + fa * win.dilations[a]) -
                     win.padding_below[a];
          auto dd = static_cast<std::ptrdiff_t>(win.data_dilations[a]);
          if (pos < 0 || pos % dd != 0 || pos / dd >= static_cast<std::ptrdiff_t>(ds[a + 2])) inside = false;
          else xi += static_cast<size_t>(pos / dd) * dstr[a + 2];
          wi += fa * fstr[a + 2];
        }
        if (inside) acc += x[xi] * w[wi];
      }
    y[e] = acc;
  }
  return y;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The values as T holds them, back in double.
template <typename T>
std::vector<double> rounded(const std::vector<double>& v) {
  auto t = cast<T>(v);
  return std::vector<double>(t.begin(), t.end());
}

template <typename T>
std::vector<double> run(const std::shared_ptr<Node>& node, const std::vector<std::shared_ptr<op::Parameter>>& ps,
                        const std::vector<std::vector<double>>& values) {
  auto backend = test::cpu_backend();
  std::vector<std::shared_ptr<runtime::Tensor>> in;
  for (size_t i = 0; i < ps.size(); ++i) {
    auto t = backend->create_tensor(element::from<T>(), ps[i]->get_shape());
    auto v = cast<T>(values[i]);
    t->write(v.data(), v.size() * sizeof(T));
    in.push_back(t);
  }
  auto f = std::make_shared<Function>(OutputVector{node}, ParameterVector(ps.begin(), ps.end()));
  auto out = backend->create_tensor(element::from<T>(), node->get_shape());
  backend->compile(f)->call({out}, in);
  std::vector<T> got(shape_size(node->get_shape()));
  out->read(got.data(), got.size() * sizeof(T));
  return std::vector<double>(got.begin(), got.end());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

struct Case {
  const char* id;
  Shape data, filters;
  ConvolutionWindow w;
};

// oneDNN-eligible cases first (f32), then ones only the reference kernel takes.
const std::vector<Case> kCases{
    {"1d", {2, 3, 9}, {4, 3, 3}, {}},
    {"2d", {2, 3, 8, 7}, {5, 3, 3, 3}, {}},
    {"2d-stride-pad", {2, 4, 9, 9}, {8, 4, 3, 3}, {{2, 2}, {}, {1, 1}, {1, 0}, {}, 1}},
    {"2d-dilation", {1, 2, 9, 9}, {3, 2, 3, 2}, {{1, 2}, {2, 3}, {0, 2}, {1, 1}, {}, 1}},
    {"2d-first-layer", {4, 1, 12, 12}, {8, 1, 5, 5}, {{}, {}, {2, 2}, {2, 2}, {}, 1}},
    {"2d-groups", {2, 8, 6, 6}, {16, 4, 3, 3}, {{}, {}, {1, 1}, {1, 1}, {}, 2}},
    {"2d-depthwise", {2, 8, 6, 6}, {8, 1, 3, 3}, {{}, {}, {1, 1}, {1, 1}, {}, 8}},
    {"3d", {1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {{1, 2, 1}, {}, {1, 0, 1}, {0, 1, 0}, {}, 1}},
    {"2d-data-dilation", {1, 2, 4, 4}, {2, 2, 3, 3}, {{1, 1}, {}, {1, 1}, {1, 1}, {2, 2}, 1}},
    {"2d-negative-pad", {1, 2, 7, 7}, {2, 2, 2, 2}, {{1, 1}, {}, {-1, 0}, {0, -2}, {}, 1}},
};

template <typename T>
void check_case(const Case& c) {
  SCOPED_TRACE(std::string(c.id) + (sizeof(T) == 4 ? " f32" : " f64"));
  auto et = element::from<T>();
  auto x = std::make_shared<op::Parameter>(et, c.data);
  auto w = std::make_shared<op::Parameter>(et, c.filters);
  const auto& win = c.w;
  auto conv = std::make_shared<op::Convolution>(x, w, win.strides, win.dilations, win.padding_below,
                                                win.padding_above, win.data_dilations, win.groups);
  ConvolutionWindow full = conv->get_window();
  auto vx = random_values(shape_size(c.data), 1), vw = random_values(shape_size(c.filters), 2);
  Shape os = conv->get_shape();
  double tol = sizeof(T) == 4 ? 1e-4 : 1e-12;
  auto expected = direct_conv(c.data, rounded<T>(vx), c.filters, rounded<T>(vw), full, os);
  auto got = run<T>(conv, {x, w}, {vx, vw});
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], tol * 10) << "element " << i;

  // The backprop ops against the forward: <y, dy> = <x, dx> = <w, dw>.
  auto vdy = random_values(shape_size(os), 3);
  auto dy = std::make_shared<op::Parameter>(et, os);
  auto bw = std::make_shared<op::Parameter>(et, c.filters);
  auto dx = run<T>(std::make_shared<op::ConvolutionBackpropData>(c.data, bw, dy, full), {bw, dy}, {vw, vdy});
  auto bx = std::make_shared<op::Parameter>(et, c.data);
  auto dw = run<T>(std::make_shared<op::ConvolutionBackpropFilters>(bx, c.filters, dy, full), {bx, dy}, {vx, vdy});
  double ydy = dot(got, rounded<T>(vdy));
  EXPECT_NEAR(dot(rounded<T>(vx), dx), ydy, tol * 100 * (1 + std::fabs(ydy)));
  EXPECT_NEAR(dot(rounded<T>(vw), dw), ydy, tol * 100 * (1 + std::fabs(ydy)));
}

}  // namespace

TEST(convolution, values_and_backprops_f32) {
  for (const auto& c : kCases) check_case<float>(c);
}

TEST(convolution, values_and_backprops_f64) {
  for (const auto& c : kCases) check_case<double>(c);
}

TEST(convolution, output_shape) {
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{2, 3, 28, 28});
  auto w = std::make_shared<op::Parameter>(element::f32, Shape{16, 3, 5, 5});
  EXPECT_EQ(std::make_shared<op::Convolution>(x, w)->get_shape(), (Shape{2, 16, 24, 24}));
  EXPECT_EQ(std::make_shared<op::Convolution>(x, w, Strides{2, 2}, Strides{}, CoordinateDiff{2, 2},
                                              CoordinateDiff{2, 2})
                ->get_shape(),
            (Shape{2, 16, 14, 14}));
  EXPECT_EQ(std::make_shared<op::Convolution>(x, w, Strides{1, 1}, Strides{2, 2})->get_shape(),
            (Shape{2, 16, 20, 20}));
  EXPECT_EQ(std::make_shared<op::Convolution>(x, w, Strides{}, Strides{}, CoordinateDiff{}, CoordinateDiff{},
                                              Strides{2, 2})
                ->get_shape(),
            (Shape{2, 16, 51, 51}));
}

TEST(convolution, errors_name_the_op_and_shapes) {
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{2, 3, 8, 8});
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing " << part;
    } catch (const NodeValidationFailure& e) {
      EXPECT_NE(std::string(e.what()).find("[Convolution]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto w = [](const Shape& s) { return std::make_shared<op::Parameter>(element::f32, s); };
  expect_error([&] { std::make_shared<op::Convolution>(x, w({4, 2, 3, 3})); }, "{4,2,3,3}");
  expect_error([&] { std::make_shared<op::Convolution>(x, w({4, 3, 3})); }, "rank");
  expect_error([&] { std::make_shared<op::Convolution>(x, w({4, 3, 9, 3})); }, "smaller than the dilated filter");
  expect_error([&] { std::make_shared<op::Convolution>(x, w({4, 3, 3, 3}), Strides{0, 1}); }, "strides");
  expect_error([&] { std::make_shared<op::Convolution>(x, w({4, 3, 3, 3}), Strides{1}); }, "2 spatial axes");
  expect_error([&] {
    std::make_shared<op::Convolution>(x, w({4, 1, 3, 3}), Strides{}, Strides{}, CoordinateDiff{},
                                      CoordinateDiff{}, Strides{}, 2);
  }, "groups");
  auto xi = std::make_shared<op::Parameter>(element::i32, Shape{2, 3, 8, 8});
  try {
    std::make_shared<op::Convolution>(xi, std::make_shared<op::Parameter>(element::i32, Shape{4, 3, 3, 3}));
    ADD_FAILURE() << "integer convolution accepted";
  } catch (const NodeValidationFailure& e) {
    EXPECT_NE(std::string(e.what()).find("[Convolution]"), std::string::npos) << e.what();
  }
}

// Convolution + per-channel bias + ReLU becomes one oneDNN convolution with a bias and a
// post-op, with the values of the unfused graph.
TEST(convolution, bias_relu_fusion_matches_unfused) {
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "with relu" : "bias only");
    auto x = std::make_shared<op::Parameter>(element::f32, Shape{2, 3, 9, 9});
    auto w = std::make_shared<op::Parameter>(element::f32, Shape{8, 3, 3, 3});
    auto b = std::make_shared<op::Parameter>(element::f32, Shape{8});
    auto conv = std::make_shared<op::Convolution>(x, w, Strides{2, 2}, Strides{}, CoordinateDiff{1, 1},
                                                  CoordinateDiff{1, 1});
    auto bias4 = std::make_shared<op::Reshape>(b, AxisVector{0}, Shape{1, 8, 1, 1});
    Output y = std::make_shared<op::Add>(conv, bias4, op::AutoBroadcast::numpy);
    if (relu) y = std::make_shared<op::Relu>(y);
    auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{x, w, b});
    runtime::cpu::CPUBackend backend;
    std::vector<std::vector<float>> results;
    for (bool fuse : {false, true}) {
      auto exe = std::dynamic_pointer_cast<runtime::cpu::CPUExecutable>(
          backend.compile(f, runtime::cpu::CompileOptions{true, fuse}));
      bool fused = false;
      for (const auto& step : exe->get_schedule()) fused = fused || step.find("CPUConvolutionBias") == 0;
      EXPECT_EQ(fused, fuse);
      std::vector<std::shared_ptr<runtime::Tensor>> in;
      unsigned seed = 5;
      for (const auto& p : f->get_parameters()) {
        auto v = cast<float>(random_values(shape_size(p->get_shape()), seed++));
        auto t = backend.create_tensor(element::f32, p->get_shape());
        t->write(v.data(), v.size() * 4);
        in.push_back(t);
      }
      auto out = backend.create_tensor(element::f32, y.get_shape());
      exe->call({out}, in);
      std::vector<float> got(shape_size(y.get_shape()));
      out->read(got.data(), got.size() * 4);
      results.push_back(got);
    }
    for (size_t i = 0; i < results[0].size(); ++i) ASSERT_NEAR(results[0][i], results[1][i], 1e-5) << i;
  }
}
