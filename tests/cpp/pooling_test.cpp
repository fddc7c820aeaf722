// MaxPool, AvgPool, LRN and their backprops on the CPU backend, f32 (oneDNN) and f64 (loops),
// against plain reference loops written here; the pairing of MaxPool with its backprop
// through oneDNN's workspace; blocked layouts passing through pooling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using runtime::cpu::CompileOptions;
using runtime::cpu::CPUExecutable;
using test::all_close;
using test::make_value;
using test::run_op;
using test::vec;

namespace {

// ------------------------------------------------------------------------ the reference

struct Geometry {
  const char* id;
  Shape data;
  Shape window;
  Strides strides;
  Shape below, above;
  bool ceil_mode = false;
};

size_t out_cells(size_t in, size_t w, size_t s, size_t b, size_t a, bool ceil_mode) {
  size_t span = in + b + a - w;
  return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

Shape out_shape(const Geometry& g) {
  Shape out{g.data[0], g.data[1]};
  for (size_t i = 0; i < g.window.size(); ++i)
    out.push_back(out_cells(g.data[i + 2], g.window[i], g.strides[i], g.below[i], g.above[i],
                            g.ceil_mode));
  return out;
}

std::vector<size_t> unravel(size_t index, const Shape& shape) {
  std::vector<size_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = index % shape[d];
    index /= shape[d];
  }
  return c;
}

// For output cell `o`: calls f(data index) for each data cell of its window (row-major);
// returns the window's full size.
template <typename F>
size_t window_cells(const Geometry& g, const Shape& out, size_t o, F&& f) {
  auto oc = unravel(o, out);
  Shape win(g.window.begin(), g.window.end());
  for (size_t k = 0; k < shape_size(win); ++k) {
    auto kc = unravel(k, win);
    size_t idx = oc[0] * g.data[1] + oc[1];
    bool inside = true;
    for (size_t i = 0; i < win.size(); ++i) {
      auto pos = static_cast<std::ptrdiff_t>(oc[i + 2] * g.strides[i] + kc[i]) -
                 static_cast<std::ptrdiff_t>(g.below[i]);
      inside = inside && pos >= 0 && pos < static_cast<std::ptrdiff_t>(g.data[i + 2]);
      idx = idx * g.data[i + 2] + (inside ? static_cast<size_t>(pos) : 0);
    }
    if (inside) f(idx);
  }
  return shape_size(win);
}

template <typename T>
std::vector<T> ref_max_pool(const Geometry& g, const std::vector<T>& x) {
  Shape out = out_shape(g);
  std::vector<T> y(shape_size(out));
  for (size_t o = 0; o < y.size(); ++o) {
    T m = -std::numeric_limits<T>::infinity();
    window_cells(g, out, o, [&](size_t i) { m = std::max(m, x[i]); });
    y[o] = m;
  }
  return y;
}

template <typename T>
std::vector<T> ref_avg_pool(const Geometry& g, const std::vector<T>& x, bool include) {
  Shape out = out_shape(g);
  std::vector<T> y(shape_size(out));
  for (size_t o = 0; o < y.size(); ++o) {
    double sum = 0;
    size_t n = 0;
    size_t full = window_cells(g, out, o, [&](size_t i) { sum += x[i]; ++n; });
    y[o] = static_cast<T>(sum / static_cast<double>(include ? full : n));
  }
  return y;
}

template <typename T>
std::vector<T> ref_max_pool_backprop(const Geometry& g, const std::vector<T>& x,
                                     const std::vector<T>& delta) {
  Shape out = out_shape(g);
  std::vector<T> dx(x.size(), T(0));
  for (size_t o = 0; o < delta.size(); ++o) {
    size_t best = x.size();
    window_cells(g, out, o, [&](size_t i) {
      if (best == x.size() || x[i] > x[best]) best = i;
    });
    if (best < x.size()) dx[best] += delta[o];
  }
  return dx;
}

template <typename T>
std::vector<T> ref_avg_pool_backprop(const Geometry& g, const std::vector<T>& delta,
                                     bool include) {
  Shape out = out_shape(g);
  std::vector<double> dx(shape_size(g.data), 0.0);
  for (size_t o = 0; o < delta.size(); ++o) {
    std::vector<size_t> cells;
    size_t full = window_cells(g, out, o, [&](size_t i) { cells.push_back(i); });
    for (size_t i : cells) dx[i] += double(delta[o]) / double(include ? full : cells.size());
  }
  return std::vector<T>(dx.begin(), dx.end());
}

// Nearly all distinct (no ties for max pooling in f32 either).
template <typename T>
std::vector<T> values(const Shape& s, double phase = 0.3) {
  std::vector<T> v(shape_size(s));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<T>(std::sin(0.7 * double(i) + phase) * 3 + 0.001 * double(i));
  return v;
}

// 1-D, 2-D and 3-D windows; strides, padding on either side, ceil mode; enough channels for
// oneDNN's blocked paths.
const std::vector<Geometry> kGeometries = {
    {"1d", {2, 3, 7}, {3}, {2}, {1}, {0}},
    {"1d-ceil", {2, 3, 7}, {3}, {2}, {1}, {0}, true},
    {"2d-plain", {2, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {0, 0}},
    {"2d-strides-padding", {1, 2, 5, 6}, {2, 3}, {2, 1}, {0, 1}, {1, 1}},
    {"2d-ceil", {1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, true},
    {"2d-ceil-padding", {1, 1, 6, 7}, {3, 2}, {2, 3}, {1, 1}, {1, 0}, true},
    {"2d-16-channels", {2, 16, 6, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},
    {"3d", {1, 2, 4, 5, 3}, {2, 2, 2}, {1, 2, 1}, {1, 0, 1}, {0, 1, 1}},
    {"3d-ceil", {1, 2, 5, 4, 4}, {2, 3, 2}, {2, 2, 3}, {0, 1, 0}, {0, 0, 1}, true},
    {"window-is-data", {1, 2, 3, 4}, {3, 4}, {1, 1}, {0, 0}, {0, 0}},
};

Geometry without_ceil(const Geometry& g) {  // the effective padding above made explicit
  Geometry e = g;
  Shape out = out_shape(g);
  for (size_t i = 0; i < g.window.size(); ++i) {
    size_t reach = (out[i + 2] - 1) * g.strides[i] + g.window[i];  // end of the last window
    e.above[i] = std::max(g.above[i] + g.data[i + 2] + g.below[i], reach) - g.data[i + 2] - g.below[i];
  }
  e.ceil_mode = false;
  return e;
}

test::OpFactory max_pool(const Geometry& g) {
  return [g](const OutputVector& a) {
    return std::make_shared<op::MaxPool>(a[0], g.window, g.strides, g.below, g.above, g.ceil_mode);
  };
}
test::OpFactory avg_pool(const Geometry& g, bool include) {
  return [g, include](const OutputVector& a) {
    return std::make_shared<op::AvgPool>(a[0], g.window, g.strides, g.below, g.above, include,
                                         g.ceil_mode);
  };
}

template <typename T>
double tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

template <typename T>
class pooling : public ::testing::Test {};
using RealTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(pooling, RealTypes);

}  // namespace

// --------------------------------------------------------------------------- by hand

TYPED_TEST(pooling, by_hand) {
  using T = TypeParam;
  Geometry g{"", {1, 1, 5}, {2}, {1}, {1}, {1}};
  auto x = make_value(Shape{1, 1, 5}, vec<T>({1, 3, 2, 5, 4}));
  // Padded: [pad 1 3 2 5 4 pad]; windows of 2.
  EXPECT_TRUE(all_close(run_op<T>(max_pool(g), {x}), vec<T>({1, 3, 3, 5, 5, 4})));
  EXPECT_TRUE(all_close(run_op<T>(avg_pool(g, false), {x}), vec<T>({1, 2, 2.5, 3.5, 4.5, 4})));
  EXPECT_TRUE(all_close(run_op<T>(avg_pool(g, true), {x}), vec<T>({0.5, 2, 2.5, 3.5, 4.5, 2})));
  // Ceil mode: 5 cells, window 2, stride 2: windows at 0, 2 and 4 (the last one half padding).
  Geometry c{"", {1, 1, 5}, {2}, {2}, {0}, {0}, true};
  EXPECT_TRUE(all_close(run_op<T>(max_pool(c), {x}), vec<T>({3, 5, 4})));
  EXPECT_TRUE(all_close(run_op<T>(avg_pool(c, false), {x}), vec<T>({2, 3.5, 4})));
  EXPECT_TRUE(all_close(run_op<T>(avg_pool(c, true), {x}), vec<T>({2, 3.5, 2})));
}

TYPED_TEST(pooling, forward_matches_the_reference) {
  using T = TypeParam;
  for (const auto& g : kGeometries) {
    SCOPED_TRACE(g.id);
    auto x = values<T>(g.data);
    auto in = make_value(g.data, x);
    EXPECT_TRUE(all_close(run_op<T>(max_pool(g), {in}), ref_max_pool(g, x), tol<T>()));
    for (bool include : {false, true}) {
      SCOPED_TRACE(include ? "include padding" : "exclude padding");
      EXPECT_TRUE(all_close(run_op<T>(avg_pool(g, include), {in}), ref_avg_pool(g, x, include),
                            tol<T>()));
    }
  }
}

TYPED_TEST(pooling, backprops_match_the_reference) {
  using T = TypeParam;
  for (const auto& c : kGeometries) {
    SCOPED_TRACE(c.id);
    Geometry g = without_ceil(c);
    Shape out = out_shape(g);
    auto x = values<T>(g.data);
    auto delta = values<T>(out, 1.1);
    auto got = run_op<T>(
        [&](const OutputVector& a) {
          return std::make_shared<op::MaxPoolBackprop>(a[0], a[1], g.window, g.strides, g.below,
                                                       g.above);
        },
        {make_value(g.data, x), make_value(out, delta)});
    EXPECT_TRUE(all_close(got, ref_max_pool_backprop(g, x, delta), tol<T>()));
    for (bool include : {false, true}) {
      SCOPED_TRACE(include ? "include padding" : "exclude padding");
      got = run_op<T>(
          [&](const OutputVector& a) {
            return std::make_shared<op::AvgPoolBackprop>(g.data, a[0], g.window, g.strides,
                                                         g.below, g.above, include);
          },
          {make_value(out, delta)});
      EXPECT_TRUE(all_close(got, ref_avg_pool_backprop(g, delta, include), tol<T>(), tol<T>()));
    }
  }
}

// Padding cells are -inf: a window entirely in the padding gives -inf and passes no gradient.
TYPED_TEST(pooling, max_of_a_window_in_the_padding_is_minus_infinity) {
  using T = TypeParam;
  Geometry g{"", {1, 2, 3}, {2}, {1}, {2}, {0}};
  auto x = vec<T>({1, -2, 3, -4, -5, -6});
  auto got = run_op<T>(max_pool(g), {make_value(g.data, x)});
  T inf = std::numeric_limits<T>::infinity();
  EXPECT_TRUE(all_close(got, vec<T>({-inf, 1, 1, 3, -inf, -4, -4, -5})));
  auto dx = run_op<T>(
      [&](const OutputVector& a) {
        return std::make_shared<op::MaxPoolBackprop>(a[0], a[1], g.window, g.strides, g.below,
                                                     g.above);
      },
      {make_value(g.data, x), make_value(Shape{1, 2, 4}, vec<T>({1, 2, 3, 4, 5, 6, 7, 8}))});
  EXPECT_TRUE(all_close(dx, vec<T>({5, 0, 4, 13, 8, 0})));
}

TYPED_TEST(pooling, empty_batch) {
  using T = TypeParam;
  Geometry g{"", {0, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {0, 0}};
  EXPECT_TRUE(run_op<T>(max_pool(g), {make_value(g.data, std::vector<T>{})}).empty());
  EXPECT_TRUE(run_op<T>(avg_pool(g, false), {make_value(g.data, std::vector<T>{})}).empty());
}

// ------------------------------------------------------------------------------------ LRN

namespace {

struct LrnCase {
  const char* id;
  Shape shape;
  double alpha, beta, bias;
  size_t size;
};

const std::vector<LrnCase> kLrnCases = {
    {"size5", {2, 7, 3, 2}, 0.5, 0.75, 1.0, 5},
    {"size1", {1, 3, 4}, 1.0, 0.5, 2.0, 1},
    {"size4-even", {1, 6, 2, 2}, 0.3, 0.6, 1.5, 4},
    {"size-larger-than-channels", {2, 3, 5}, 0.1, 0.75, 1.0, 9},
    {"3d", {1, 4, 2, 3, 2}, 1e-2, 0.75, 1.0, 3},
    {"16-channels", {2, 16, 3, 3}, 1e-1, 0.75, 2.0, 5},
};

// Channels c' of c's window, at the flat index of (n, c', position).
template <typename F>
void lrn_window(const LrnCase& l, size_t index, F&& f) {
  size_t inner = shape_size(l.shape) / (l.shape[0] * l.shape[1]);
  size_t c = index / inner % l.shape[1], base = index - c * inner, half = (l.size - 1) / 2;
  for (size_t j = c > half ? c - half : 0; j < std::min(l.shape[1], c + half + 1); ++j)
    f(base + j * inner);
}

template <typename T>
std::vector<double> lrn_scale(const LrnCase& l, const std::vector<T>& x) {
  std::vector<double> s(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double sq = 0;
    lrn_window(l, i, [&](size_t j) { sq += double(x[j]) * double(x[j]); });
    s[i] = l.bias + l.alpha / double(l.size) * sq;
  }
  return s;
}

template <typename T>
std::vector<T> ref_lrn(const LrnCase& l, const std::vector<T>& x) {
  auto s = lrn_scale(l, x);
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<T>(x[i] / std::pow(s[i], l.beta));
  return y;
}

// dx_j = sum_i delta_i dy_i/dx_j, with dy_i/dx_j = [i == j] s_i^-b - b x_i s_i^(-b-1) 2a/n x_j
// for j in i's window.
template <typename T>
std::vector<T> ref_lrn_backprop(const LrnCase& l, const std::vector<T>& x,
                                const std::vector<T>& delta) {
  auto s = lrn_scale(l, x);
  std::vector<double> dx(x.size(), 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    dx[i] += double(delta[i]) * std::pow(s[i], -l.beta);
    double k = double(delta[i]) * l.beta * double(x[i]) * std::pow(s[i], -l.beta - 1) * 2 *
               l.alpha / double(l.size);
    lrn_window(l, i, [&](size_t j) { dx[j] -= k * double(x[j]); });
  }
  return std::vector<T>(dx.begin(), dx.end());
}

}  // namespace

TYPED_TEST(pooling, lrn_matches_the_reference) {
  using T = TypeParam;
  for (const auto& l : kLrnCases) {
    SCOPED_TRACE(l.id);
    auto x = values<T>(l.shape), delta = values<T>(l.shape, 2.0);
    auto y = run_op<T>(
        [&](const OutputVector& a) {
          return std::make_shared<op::LRN>(a[0], l.alpha, l.beta, l.bias, l.size);
        },
        {make_value(l.shape, x)});
    EXPECT_TRUE(all_close(y, ref_lrn(l, x), tol<T>(), tol<T>()));
    auto dx = run_op<T>(
        [&](const OutputVector& a) {
          return std::make_shared<op::LRNBackprop>(a[0], a[1], l.alpha, l.beta, l.bias, l.size);
        },
        {make_value(l.shape, x), make_value(l.shape, delta)});
    EXPECT_TRUE(all_close(dx, ref_lrn_backprop(l, x, delta), 1e2 * tol<T>(), 1e2 * tol<T>()));
  }
}

TEST(pooling_lrn, by_hand) {
  // One position, channels 1, 2, 3, size 3, alpha 3 (alpha / size = 1), beta 0.5, bias 1:
  // y_c = x_c / sqrt(1 + sum of the squares of c's neighbours and itself).
  auto y = run_op<double>(
      [](const OutputVector& a) { return std::make_shared<op::LRN>(a[0], 3.0, 0.5, 1.0, 3); },
      {make_value(Shape{1, 3, 1}, std::vector<double>{1, 2, 3})});
  EXPECT_TRUE(all_close(y, {1 / std::sqrt(6.0), 2 / std::sqrt(15.0), 3 / std::sqrt(14.0)}));
}

TEST(pooling_geometry, left_out_strides_and_padding_default_to_ones_and_zeros) {
  // nGraph's MaxPool(arg, window_shape) and AvgPool(arg, window_shape, strides).
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{1, 2, 10, 7});
  auto mp = std::make_shared<op::MaxPool>(x, Shape{3, 2}, Strides{}, Shape{}, Shape{});
  EXPECT_EQ(mp->get_shape(), (Shape{1, 2, 8, 6}));
  EXPECT_EQ(mp->get_window_movement_strides(), (Strides{1, 1}));
  EXPECT_EQ(mp->get_padding_below(), (Shape{0, 0}));
  EXPECT_EQ(mp->get_padding_above(), (Shape{0, 0}));
  auto ap = std::make_shared<op::AvgPool>(x, Shape{3, 2}, Strides{2, 3}, Shape{}, Shape{1, 0},
                                          true);
  EXPECT_EQ(ap->get_shape(), (Shape{1, 2, 5, 2}));
  EXPECT_EQ(ap->get_padding_below(), (Shape{0, 0}));
  // A window of the wrong rank is still an error, not filled in.
  EXPECT_THROW(std::make_shared<op::MaxPool>(x, Shape{3}, Strides{}, Shape{}, Shape{}),
               NodeValidationFailure);
}

// --------------------------------------------------------- max pooling with its workspace

namespace {

struct Training {
  std::shared_ptr<Function> f;
  Shape out;
};

// y = MaxPool(x) and dL/dx for L = sum(y * w): the forward and its backprop in one function.
Training max_pool_training(const Geometry& g) {
  auto x = std::make_shared<op::Parameter>(element::f32, g.data);
  auto w = std::make_shared<op::Parameter>(element::f32, out_shape(g));
  auto y = std::make_shared<op::MaxPool>(x, g.window, g.strides, g.below, g.above, g.ceil_mode);
  auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, w), AxisSet{0, 1, 2, 3});
  autodiff::Adjoints adj(OutputVector{loss},
                         OutputVector{std::make_shared<op::Constant>(element::f32, Shape{},
                                                                     std::vector<float>{1})});
  return {std::make_shared<Function>(OutputVector{y, adj.backprop_output(x)}, ParameterVector{x, w}),
          out_shape(g)};
}

std::vector<std::vector<float>> run_training(const Training& t, const Geometry& g, bool fuse,
                                             std::vector<std::string>* schedule = nullptr) {
  runtime::cpu::CPUBackend backend;
  auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(t.f, CompileOptions{true, fuse}));
  auto x = values<float>(g.data), w = values<float>(t.out, 0.9);
  auto tx = backend.create_tensor(element::f32, g.data, x.data());
  auto tw = backend.create_tensor(element::f32, t.out, w.data());
  std::vector<float> y(shape_size(t.out)), dx(shape_size(g.data));
  auto ty = backend.create_tensor(element::f32, t.out, y.data());
  auto tdx = backend.create_tensor(element::f32, g.data, dx.data());
  exe->call({ty, tdx}, {tx, tw});
  if (schedule) *schedule = exe->get_schedule();
  return {y, dx};
}

bool has_step(const std::vector<std::string>& schedule, const std::string& op) {
  for (const auto& s : schedule)
    if (s.find(op) == 0) return true;
  return false;
}

}  // namespace

TEST(pooling_workspace, backprop_reads_the_forward_workspace) {
  for (const auto& g : kGeometries) {
    if (g.data.size() != 4) continue;
    SCOPED_TRACE(g.id);
    Training t = max_pool_training(g);
    std::vector<std::string> schedule;
    auto fused = run_training(t, g, true, &schedule);
    EXPECT_TRUE(has_step(schedule, "CPUMaxPoolWithWorkspace"));
    EXPECT_TRUE(has_step(schedule, "CPUMaxPoolBackpropWithWorkspace"));
    EXPECT_FALSE(has_step(schedule, "MaxPoolBackprop"));
    auto alone = run_training(t, g, false, &schedule);
    EXPECT_TRUE(has_step(schedule, "MaxPoolBackprop"));
    auto x = values<float>(g.data), w = values<float>(t.out, 0.9);
    EXPECT_TRUE(all_close(fused[0], ref_max_pool(g, x)));
    EXPECT_TRUE(all_close(fused[1], ref_max_pool_backprop(without_ceil(g), x, w)));
    EXPECT_EQ(fused, alone);
  }
}

TEST(pooling_workspace, other_geometry_or_type_is_not_paired) {
  Geometry g{"", {1, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {0, 0}};
  auto x = std::make_shared<op::Parameter>(element::f32, g.data);
  auto delta = std::make_shared<op::Parameter>(element::f32, Shape{1, 2, 3, 3});
  auto y = std::make_shared<op::MaxPool>(x, g.window, g.strides, g.below, g.above);
  auto dx = std::make_shared<op::MaxPoolBackprop>(x, delta, Shape{2, 2}, Strides{1, 1}, g.below,
                                                  g.above);  // stride 1: another pooling
  auto f = std::make_shared<Function>(OutputVector{y, dx}, ParameterVector{x, delta});
  EXPECT_EQ(runtime::cpu::fuse_max_pool_workspace(*f->clone()), 0u);
  auto x64 = std::make_shared<op::Parameter>(element::f64, g.data);
  auto d64 = std::make_shared<op::Parameter>(element::f64, Shape{1, 2, 2, 2});
  auto f64 = std::make_shared<Function>(
      OutputVector{std::make_shared<op::MaxPool>(x64, g.window, g.strides, g.below, g.above),
                   std::make_shared<op::MaxPoolBackprop>(x64, d64, g.window, g.strides, g.below,
                                                         g.above)},
      ParameterVector{x64, d64});
  EXPECT_EQ(runtime::cpu::fuse_max_pool_workspace(*f64->clone()), 0u);
}

// ---------------------------------------------------------------------- blocked layouts

namespace {

// Identity ops on 4-D f32 data whose kernels write (ToBlocked) or read (FromBlocked) nChw8c,
// standing in for convolutions around a pooling.
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
  static constexpr const char* type_name = "TestPoolToBlocked";
  using IdentityOp::IdentityOp;
};
class FromBlocked : public IdentityOp<FromBlocked> {
 public:
  static constexpr const char* type_name = "TestPoolFromBlocked";
  using IdentityOp::IdentityOp;
};

// The channel block the stand-in ops write and read: 8 or 16 (nCw8c, nChw8c, nCdhw8c or the
// 16c forms by rank), or 1 for plain.
size_t g_block = 8;

runtime::cpu::TensorDesc blocked(const Shape& s) {
  using tag = dnnl::memory::format_tag;
  if (g_block == 1) return runtime::cpu::TensorDesc::plain(element::f32, s);
  static const tag tags[3][2] = {{tag::nCw8c, tag::nCw16c}, {tag::nChw8c, tag::nChw16c}, {tag::nCdhw8c, tag::nCdhw16c}};
  dnnl::memory::desc md(runtime::cpu::to_dims(s), dnnl::memory::data_type::f32,
                        tags[s.size() - 3][g_block == 16]);
  return runtime::cpu::TensorDesc::with_layout(element::f32, s, md);
}

runtime::cpu::Kernel reorder_kernel(runtime::cpu::KernelContext& ctx) {
  auto src = ctx.input(0).dnnl_desc(), dst = ctx.output(0).dnnl_desc();
  auto& engine = runtime::cpu::dnnl_engine();
  dnnl::reorder::primitive_desc pd(engine, src, engine, dst, runtime::cpu::dnnl_attr());
  return runtime::cpu::dnnl_kernel(ctx, dnnl::reorder(pd), pd.scratchpad_desc(),
                                   {{DNNL_ARG_FROM, src, true, 0}, {DNNL_ARG_TO, dst, false, 0}});
}

class PoolingLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& registry = runtime::cpu::KernelRegistry::get();
    registry.add(ToBlocked::type_name, reorder_kernel, [](runtime::cpu::LayoutContext& lc) {
      lc.outputs[0] = blocked(lc.node.get_shape());
    });
    registry.add(FromBlocked::type_name, reorder_kernel, [](runtime::cpu::LayoutContext& lc) {
      lc.wanted[0] = blocked(lc.node.get_shape());
    });
  }
  void TearDown() override {
    g_block = 8;
    runtime::cpu::KernelRegistry::get().remove(ToBlocked::type_name);
    runtime::cpu::KernelRegistry::get().remove(FromBlocked::type_name);
  }
};

}  // namespace

// Blocked data stays blocked through MaxPool, AvgPool and LRN: no reorder between the
// stand-in convolutions, and the values are right.
TEST_F(PoolingLayout, blocked_data_passes_through_without_reorders) {
  Geometry g{"", {2, 3, 5, 6}, {2, 3}, {2, 1}, {0, 1}, {1, 1}};  // 3 channels: padded to 8
  auto x = std::make_shared<op::Parameter>(element::f32, g.data);
  auto b = std::make_shared<ToBlocked>(x);
  auto m = std::make_shared<op::MaxPool>(b, g.window, g.strides, g.below, g.above);
  auto a = std::make_shared<op::AvgPool>(b, g.window, g.strides, g.below, g.above, false);
  auto l = std::make_shared<op::LRN>(b, 0.5, 0.75, 1.0, 3);
  auto f = std::make_shared<Function>(
      OutputVector{std::make_shared<FromBlocked>(m), std::make_shared<FromBlocked>(a),
                   std::make_shared<FromBlocked>(l)},
      ParameterVector{x});
  runtime::cpu::CPUBackend backend;
  auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, true}));
  // FromBlocked gives plain results: no reorder anywhere.
  EXPECT_EQ(exe->get_reorder_count(), 0u);
  auto xv = values<float>(g.data);
  auto tx = backend.create_tensor(element::f32, g.data, xv.data());
  Shape out = out_shape(g);
  std::vector<float> ym(shape_size(out)), ya(shape_size(out)), yl(xv.size());
  auto tm = backend.create_tensor(element::f32, out, ym.data());
  auto ta = backend.create_tensor(element::f32, out, ya.data());
  auto tl = backend.create_tensor(element::f32, g.data, yl.data());
  exe->call({tm, ta, tl}, {tx});
  EXPECT_TRUE(all_close(ym, ref_max_pool(g, xv)));
  EXPECT_TRUE(all_close(ya, ref_avg_pool(g, xv, false)));
  EXPECT_TRUE(all_close(yl, ref_lrn(LrnCase{"", g.data, 0.5, 0.75, 1.0, 3}, xv)));
}

// Max pooling's forward (with its workspace) and backward on plain data and on channels blocked
// by 8 and 16, 1-D to 3-D: ties (the first maximum in row-major order wins, as in the
// reference) and NaN (the first NaN of a window is its maximum and takes its gradient), with
// padded blocks (2 and 3 channels), against reference loops, and no reorder anywhere.
namespace {

// Few distinct values (many ties) and a NaN every 13 cells.
std::vector<float> tied_values(const Shape& s) {
  std::vector<float> v(shape_size(s));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 13 == 5 ? std::numeric_limits<float>::quiet_NaN()
                       : std::floor(static_cast<float>(std::sin(0.9 * double(i)) * 2.5));
  return v;
}

// The index of the window's maximum (first NaN, else first maximum), or nothing.
std::optional<size_t> ref_argmax(const Geometry& g, const Shape& out, size_t o, const std::vector<float>& x) {
  std::optional<size_t> best;
  window_cells(g, out, o, [&](size_t i) {
    if (!best) best = i;
    else if (!std::isnan(x[*best]) && (std::isnan(x[i]) || x[i] > x[*best])) best = i;
  });
  return best;
}

}  // namespace

TEST_F(PoolingLayout, own_max_pool_on_plain_and_blocked_data_with_ties_and_nan) {
  for (size_t block : {1, 8, 16}) {
    g_block = block;
    for (const auto& c : kGeometries) {
      SCOPED_TRACE(std::string(c.id) + " block " + std::to_string(block));
      Geometry g = without_ceil(c);
      Shape out = out_shape(c);
      auto x = std::make_shared<op::Parameter>(element::f32, c.data);
      auto delta = std::make_shared<op::Parameter>(element::f32, out);
      auto b = std::make_shared<ToBlocked>(x);
      auto m = std::make_shared<op::MaxPool>(b, c.window, c.strides, c.below, c.above, c.ceil_mode);
      auto bp = std::make_shared<op::MaxPoolBackprop>(b, std::make_shared<ToBlocked>(delta), g.window,
                                                      g.strides, g.below, g.above);
      auto f = std::make_shared<Function>(
          OutputVector{std::make_shared<FromBlocked>(m), std::make_shared<FromBlocked>(bp)},
          ParameterVector{x, delta});
      runtime::cpu::CPUBackend backend;
      auto exe = std::dynamic_pointer_cast<CPUExecutable>(backend.compile(f, CompileOptions{true, true}));
      EXPECT_EQ(exe->get_reorder_count(), 0u);
      EXPECT_TRUE(has_step(exe->get_schedule(), "CPUMaxPoolWithWorkspace"));
      EXPECT_TRUE(has_step(exe->get_schedule(), "CPUMaxPoolBackpropWithWorkspace"));
      auto xv = tied_values(c.data);
      auto dv = values<float>(out, 0.4);
      std::vector<float> y(shape_size(out)), dx(xv.size());
      auto ty = backend.create_tensor(element::f32, out, y.data());
      auto tdx = backend.create_tensor(element::f32, c.data, dx.data());
      exe->call({ty, tdx}, {backend.create_tensor(element::f32, c.data, xv.data()),
                            backend.create_tensor(element::f32, out, dv.data())});
      std::vector<double> want_dx(xv.size(), 0.0);
      for (size_t o = 0; o < y.size(); ++o) {
        auto best = ref_argmax(c, out, o, xv);
        float want = best ? xv[*best] : -std::numeric_limits<float>::infinity();
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(y[o])) << "output " << o;
        else EXPECT_EQ(y[o], want) << "output " << o;
        if (best) want_dx[*best] += dv[o];
      }
      EXPECT_TRUE(all_close(dx, std::vector<float>(want_dx.begin(), want_dx.end()), 1e-5, 1e-5));
    }
  }
}
