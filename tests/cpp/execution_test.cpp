// Every op run on the CPU backend, checked against values computed here by hand or by plain
// reference loops, for f32, f64, i32, i64 (and boolean where the op takes it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "ngraph/ops.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using test::all_close;
using test::make_value;
using test::run_op;
using test::to_vector;
using test::Value;
using test::vec;

namespace {

using Factory = test::OpFactory;

// ------------------------------------------------------------------ reference helpers

std::vector<size_t> unravel(size_t index, const Shape& shape) {
  std::vector<size_t> coord(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coord[d] = index % shape[d];
    index /= shape[d];
  }
  return coord;
}

// Row-major index in `shape` of the output coordinate `coord`, with `shape` right-aligned to
// it and size-1 axes repeated (NumPy broadcasting).
size_t broadcast_index(const Shape& shape, const std::vector<size_t>& coord) {
  size_t lead = coord.size() - shape.size(), idx = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    idx = idx * shape[d] + (shape[d] == 1 ? 0 : coord[lead + d]);
  return idx;
}

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

template <typename R, typename T, typename F>
std::vector<R> binary_ref(const std::vector<T>& a, const Shape& sa, const std::vector<T>& b,
                          const Shape& sb, F f) {
  Shape out = numpy_shape(sa, sb);
  std::vector<R> r(shape_size(out));
  for (size_t i = 0; i < r.size(); ++i) {
    auto c = unravel(i, out);
    r[i] = static_cast<R>(f(a[broadcast_index(sa, c)], b[broadcast_index(sb, c)]));
  }
  return r;
}

// Deterministic test data: n values cycling through [lo, lo + span).
template <typename T>
std::vector<T> data(size_t n, int lo, int span, int step = 7) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(lo + static_cast<int>((i * step + 3) % span));
  return v;
}

template <typename T>
std::vector<T> nonzero_data(size_t n, int lo, int span, int step = 7) {
  auto v = data<T>(n, lo, span, step);
  for (auto& x : v)
    if (x == T(0)) x = T(span);
  return v;
}

template <typename T>
constexpr bool is_float = std::is_floating_point_v<T>;

template <typename T>
double tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

struct ShapePair {
  Shape a, b;
};

// Broadcasting edges: equal shapes, size-1 axes, rank 0, zero-size axes, both directions.
const std::vector<ShapePair> kBinaryShapes = {
    {{2, 3}, {2, 3}},    {{2, 3}, {3}},          {{3}, {2, 3}},    {{2, 1}, {1, 3}},
    {{2, 3}, {2, 1}},    {{}, {2, 3}},           {{2, 3}, {}},     {{}, {}},
    {{4, 1, 5}, {3, 1}}, {{0, 3}, {1, 3}},       {{1, 3}, {0, 3}}, {{0}, {}},
    {{2, 0}, {2, 1}},    {{37}, {37}},           {{5, 37}, {37}},  {{5, 1}, {5, 37}},
    {{1, 1}, {1}},       {{3, 1, 2}, {1, 4, 1}},
};

template <typename T>
class exec_numeric : public ::testing::Test {};
using NumericTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(exec_numeric, NumericTypes);

template <typename T>
class exec_real : public ::testing::Test {};
using RealTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(exec_real, RealTypes);

// The integer types beyond i32 and i64 (nGraph's i8, i16, u8, u16, u32, u64).
template <typename T>
class exec_small_int : public ::testing::Test {};
using SmallIntTypes = ::testing::Types<int8_t, int16_t, uint8_t, uint16_t, uint32_t, uint64_t>;
TYPED_TEST_SUITE(exec_small_int, SmallIntTypes);

template <typename Op>
Factory unary_factory() {
  return [](const OutputVector& a) { return std::make_shared<Op>(a[0]); };
}

template <typename Op>
Factory binary_factory(const std::string& ab = "numpy") {
  return [ab](const OutputVector& a) { return std::make_shared<Op>(a[0], a[1], ab); };
}

template <typename T, typename Op, typename F>
void check_binary(F ref, int lo_a, int span_a, int lo_b, int span_b, bool b_nonzero = false) {
  for (const auto& c : kBinaryShapes) {
    SCOPED_TRACE(to_braces(c.a) + " with " + to_braces(c.b));
    auto a = data<T>(shape_size(c.a), lo_a, span_a);
    auto b = b_nonzero ? nonzero_data<T>(shape_size(c.b), lo_b, span_b, 5)
                       : data<T>(shape_size(c.b), lo_b, span_b, 5);
    auto got = run_op<T>(binary_factory<Op>(), {make_value(c.a, a), make_value(c.b, b)});
    EXPECT_TRUE(all_close(got, binary_ref<T>(a, c.a, b, c.b, ref), tol<T>()));
  }
}

}  // namespace

// ------------------------------------------------------------------- binary arithmetic

TYPED_TEST(exec_numeric, add) {
  using T = TypeParam;
  check_binary<T, op::Add>([](T a, T b) { return a + b; }, -5, 11, -3, 7);
}

TYPED_TEST(exec_numeric, subtract) {
  using T = TypeParam;
  check_binary<T, op::Subtract>([](T a, T b) { return a - b; }, -5, 11, -3, 7);
}

TYPED_TEST(exec_numeric, multiply) {
  using T = TypeParam;
  check_binary<T, op::Multiply>([](T a, T b) { return a * b; }, -5, 11, -3, 7);
}

TYPED_TEST(exec_numeric, maximum_minimum) {
  using T = TypeParam;
  check_binary<T, op::Maximum>([](T a, T b) { return std::max(a, b); }, -5, 11, -3, 7);
  check_binary<T, op::Minimum>([](T a, T b) { return std::min(a, b); }, -5, 11, -3, 7);
}

TYPED_TEST(exec_numeric, power) {
  using T = TypeParam;
  check_binary<T, op::Power>(
      [](T a, T b) {
        return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      },
      -3, 7, 0, 4);
  // By hand.
  auto got = run_op<T>(binary_factory<op::Power>("none"),
                       {make_value(Shape{5}, vec<T>({2, -3, 5, 1, 0})),
                        make_value(Shape{5}, vec<T>({10, 3, 0, 7, 2}))});
  EXPECT_EQ(got, vec<T>({1024, -27, 1, 1, 0}));
}

TYPED_TEST(exec_numeric, divide) {
  using T = TypeParam;
  if constexpr (is_float<T>) {
    check_binary<T, op::Divide>([](T a, T b) { return a / b; }, -5, 11, -3, 7, true);
  } else {
    // Floor division: the quotient rounded toward negative infinity, as Python's //.
    check_binary<T, op::Divide>(
        [](T a, T b) {
          return static_cast<T>(std::floor(static_cast<double>(a) / static_cast<double>(b)));
        },
        -9, 19, -4, 9, true);
  }
}

TYPED_TEST(exec_numeric, divide_by_hand) {
  using T = TypeParam;
  auto a = make_value(Shape{7}, vec<T>({7, -7, 7, -7, 6, 0, 1}));
  auto b = make_value(Shape{7}, vec<T>({2, 2, -2, -2, -3, 5, 4}));
  auto floor_div = run_op<T>(binary_factory<op::Divide>("none"), {a, b});
  auto trunc_div = run_op<T>(
      [](const OutputVector& x) { return std::make_shared<op::Divide>(x[0], x[1], "none", false); },
      {a, b});
  if constexpr (is_float<T>) {
    EXPECT_EQ(floor_div, vec<T>({3.5, -3.5, -3.5, 3.5, -2, 0, 0.25}));
    EXPECT_EQ(trunc_div, floor_div);  // pythondiv only concerns integers
  } else {
    EXPECT_EQ(floor_div, vec<T>({3, -4, -4, 3, -2, 0, 0}));
    EXPECT_EQ(trunc_div, vec<T>({3, -3, -3, 3, -2, 0, 0}));
  }
}

TYPED_TEST(exec_numeric, divide_by_zero) {
  using T = TypeParam;
  auto a = make_value(Shape{3}, vec<T>({1, -1, 0}));
  auto b = make_value(Shape{3}, vec<T>({0, 0, 1}));
  if constexpr (is_float<T>) {
    auto got = run_op<T>(binary_factory<op::Divide>("none"), {a, b});
    EXPECT_EQ(got[0], std::numeric_limits<T>::infinity());
    EXPECT_EQ(got[1], -std::numeric_limits<T>::infinity());
    EXPECT_EQ(got[2], T(0));
  } else {
    std::string msg = test::error_of<std::exception>([&] {
      run_op<T>(binary_factory<op::Divide>("none"), {a, b});
    });
    EXPECT_TRUE(test::starts_with(msg, "[Divide]")) << msg;
    EXPECT_TRUE(test::contains(msg, "division by zero")) << msg;
    // Also through broadcasting of a scalar zero.
    EXPECT_ANY_THROW(run_op<T>(
        binary_factory<op::Divide>(),
        {make_value(Shape{2, 2}, vec<T>({1, 2, 3, 4})), make_value(Shape{}, vec<T>({0}))}));
  }
}

TYPED_TEST(exec_numeric, divide_lowest_by_minus_one_wraps) {
  using T = TypeParam;
  if constexpr (!is_float<T>) {
    // As NumPy: MIN // -1 wraps around to MIN instead of trapping.
    T lo = std::numeric_limits<T>::lowest();
    auto a = make_value(Shape{3}, std::vector<T>{lo, lo + 1, 5});
    auto b = make_value(Shape{3}, std::vector<T>{-1, -1, -1});
    std::vector<T> expected{lo, std::numeric_limits<T>::max(), -5};
    EXPECT_EQ(run_op<T>(binary_factory<op::Divide>("none"), {a, b}), expected);
    EXPECT_EQ(run_op<T>(
                  [](const OutputVector& x) {
                    return std::make_shared<op::Divide>(x[0], x[1], "none", false);
                  },
                  {a, b}),
              expected);
  }
}

TYPED_TEST(exec_real, nan_propagates_through_maximum_minimum) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> a{nan, 1, nan, 2, -1}, b{1, nan, nan, 3, -2};
  std::vector<T> expected_max{nan, nan, nan, 3, -1}, expected_min{nan, nan, nan, 2, -2};
  auto va = make_value(Shape{5}, a), vb = make_value(Shape{5}, b);
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Maximum>("none"), {va, vb}), expected_max));
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Maximum>("none"), {vb, va}), expected_max));
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Minimum>("none"), {va, vb}), expected_min));
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Minimum>("none"), {vb, va}), expected_min));
  // The same through broadcasting: arg0 {1,5} against arg1 {2,5}, and the other way round.
  std::vector<T> b2 = b;
  b2.insert(b2.end(), b.begin(), b.end());
  std::vector<T> max2 = expected_max, min2 = expected_min;
  max2.insert(max2.end(), expected_max.begin(), expected_max.end());
  min2.insert(min2.end(), expected_min.begin(), expected_min.end());
  auto a1 = make_value(Shape{1, 5}, a), b22 = make_value(Shape{2, 5}, b2);
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Maximum>(), {a1, b22}), max2));
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Maximum>(), {b22, a1}), max2));
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Minimum>(), {a1, b22}), min2));
  EXPECT_TRUE(all_close(run_op<T>(binary_factory<op::Minimum>(), {b22, a1}), min2));
}

// More axes than oneDNN takes (12): the loops take over.
TYPED_TEST(exec_numeric, rank_13) {
  using T = TypeParam;
  Shape big(13, 1), small(13, 1);
  big[0] = 2;
  big[12] = 3;
  small[12] = 3;
  auto a = data<T>(shape_size(big), -3, 7), b = data<T>(shape_size(small), -2, 5);
  EXPECT_EQ(run_op<T>(binary_factory<op::Add>(), {make_value(big, a), make_value(small, b)}),
            (binary_ref<T>(a, big, b, small, [](T x, T y) { return x + y; })));
  EXPECT_EQ(run_op<T>(binary_factory<op::Multiply>(), {make_value(small, b), make_value(big, a)}),
            (binary_ref<T>(b, small, a, big, [](T x, T y) { return x * y; })));
  EXPECT_EQ(run_op<T>(unary_factory<op::Negative>(), {make_value(big, a)}),
            (binary_ref<T>(a, big, a, big, [](T x, T) { return -x; })));
  EXPECT_EQ(
      run_op<T>([](const OutputVector& x) { return std::make_shared<op::Sum>(x[0], AxisSet{0}); },
                {make_value(big, a)}),
      (std::vector<T>{a[0] + a[3], a[1] + a[4], a[2] + a[5]}));
}

// ------------------------------------------------------------------------- comparisons

TYPED_TEST(exec_numeric, comparisons) {
  using T = TypeParam;
  using B = element::boolean_t;
  struct Cmp {
    Factory make;
    std::function<bool(T, T)> ref;
    const char* name;
  };
  std::vector<Cmp> cmps = {
      {binary_factory<op::Equal>(), [](T a, T b) { return a == b; }, "Equal"},
      {binary_factory<op::NotEqual>(), [](T a, T b) { return a != b; }, "NotEqual"},
      {binary_factory<op::Greater>(), [](T a, T b) { return a > b; }, "Greater"},
      {binary_factory<op::GreaterEq>(), [](T a, T b) { return a >= b; }, "GreaterEq"},
      {binary_factory<op::Less>(), [](T a, T b) { return a < b; }, "Less"},
      {binary_factory<op::LessEq>(), [](T a, T b) { return a <= b; }, "LessEq"},
  };
  for (const auto& cmp : cmps) {
    SCOPED_TRACE(cmp.name);
    for (const auto& c : kBinaryShapes) {
      SCOPED_TRACE(to_braces(c.a) + " with " + to_braces(c.b));
      auto a = data<T>(shape_size(c.a), -2, 5);
      auto b = data<T>(shape_size(c.b), -2, 5, 3);
      auto got = run_op<B>(cmp.make, {make_value(c.a, a), make_value(c.b, b)});
      EXPECT_EQ(got, (binary_ref<B>(a, c.a, b, c.b, cmp.ref)));
    }
  }
}

TEST(exec_boolean, equal_not_equal) {
  using B = element::boolean_t;
  auto a = make_value(Shape{2, 2}, std::vector<B>{0, 0, 1, 1});
  auto b = make_value(Shape{2}, std::vector<B>{0, 1});
  EXPECT_EQ(run_op<B>(binary_factory<op::Equal>(), {a, b}), (std::vector<B>{1, 0, 0, 1}));
  EXPECT_EQ(run_op<B>(binary_factory<op::NotEqual>(), {a, b}), (std::vector<B>{0, 1, 1, 0}));
}

TEST(exec_boolean, logical_ops) {
  using B = element::boolean_t;
  auto a = make_value(Shape{2, 1}, std::vector<B>{0, 1});
  auto b = make_value(Shape{1, 2}, std::vector<B>{0, 1});
  EXPECT_EQ(run_op<B>(binary_factory<op::LogicalAnd>(), {a, b}), (std::vector<B>{0, 0, 0, 1}));
  EXPECT_EQ(run_op<B>(binary_factory<op::LogicalOr>(), {a, b}), (std::vector<B>{0, 1, 1, 1}));
  auto s = make_value(Shape{}, std::vector<B>{1});
  auto v = make_value(Shape{3}, std::vector<B>{1, 0, 1});
  EXPECT_EQ(run_op<B>(binary_factory<op::LogicalAnd>(), {s, v}), (std::vector<B>{1, 0, 1}));
  auto z = make_value(Shape{0, 3}, std::vector<B>{});
  EXPECT_TRUE(run_op<B>(binary_factory<op::LogicalOr>(), {z, v}).empty());
  auto not_ = [](const OutputVector& x) { return std::make_shared<op::LogicalNot>(x[0]); };
  EXPECT_EQ(run_op<B>(not_, {v}), (std::vector<B>{0, 1, 0}));
  EXPECT_EQ(run_op<B>(not_, {s}), (std::vector<B>{0}));
  EXPECT_TRUE(run_op<B>(not_, {z}).empty());
}

// ------------------------------------------------------------------------------ unary

namespace {

template <typename T, typename Op, typename F>
void check_unary(F ref, const std::vector<double>& values) {
  std::vector<T> x;
  for (double v : values) x.push_back(static_cast<T>(v));
  // As a vector, as a 2-D block, one element at a time as scalars, and empty.
  std::vector<T> expected;
  for (T v : x) expected.push_back(static_cast<T>(ref(v)));
  EXPECT_TRUE(all_close(run_op<T>(unary_factory<Op>(), {make_value(Shape{x.size()}, x)}), expected,
                        tol<T>()));
  EXPECT_TRUE(all_close(run_op<T>(unary_factory<Op>(), {make_value(Shape{1, x.size()}, x)}),
                        expected, tol<T>()));
  EXPECT_TRUE(all_close(run_op<T>(unary_factory<Op>(), {make_value(Shape{}, std::vector<T>{x[1]})}),
                        std::vector<T>{expected[1]}, tol<T>()));
  EXPECT_TRUE(run_op<T>(unary_factory<Op>(), {make_value(Shape{2, 0}, std::vector<T>{})}).empty());
  // A long vector (vector loops and their tails).
  std::vector<T> big, big_expected;
  for (size_t i = 0; i < 1003; ++i) {
    big.push_back(x[i % x.size()]);
    big_expected.push_back(expected[i % x.size()]);
  }
  EXPECT_TRUE(all_close(run_op<T>(unary_factory<Op>(), {make_value(Shape{1003}, big)}),
                        big_expected, tol<T>()));
}

const std::vector<double> kSigned = {-3.75, -2.5, -1, -0.5, 0, 0.25, 1, 2.5, 3.5, 7};
}  // namespace

TYPED_TEST(exec_numeric, negative_abs_sign_relu) {
  using T = TypeParam;
  check_unary<T, op::Negative>([](T v) { return -v; }, kSigned);
  check_unary<T, op::Abs>([](T v) { return v < 0 ? -v : v; }, kSigned);
  check_unary<T, op::Sign>([](T v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }, kSigned);
  check_unary<T, op::Relu>([](T v) { return v > 0 ? v : 0; }, kSigned);
}

TYPED_TEST(exec_numeric, floor_ceiling) {
  using T = TypeParam;
  check_unary<T, op::Floor>([](T v) { return std::floor(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Ceiling>([](T v) { return std::ceil(static_cast<double>(v)); }, kSigned);
  if constexpr (is_float<T>) {
    auto got = run_op<T>(unary_factory<op::Floor>(),
                         {make_value(Shape{4}, vec<T>({-1.5, 1.5, -0.25, 2}))});
    EXPECT_EQ(got, vec<T>({-2, 1, -1, 2}));
    got = run_op<T>(unary_factory<op::Ceiling>(),
                    {make_value(Shape{4}, vec<T>({-1.5, 1.5, -0.25, 2}))});
    EXPECT_EQ(got, vec<T>({-1, 2, 0, 2}));
  }
}

TYPED_TEST(exec_real, transcendental) {
  using T = TypeParam;
  check_unary<T, op::Exp>([](T v) { return std::exp(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Log>([](T v) { return std::log(static_cast<double>(v)); },
                          {0.01, 0.5, 1, 2, 2.718281828459045, 10, 1000});
  check_unary<T, op::Sqrt>([](T v) { return std::sqrt(static_cast<double>(v)); },
                           {0, 0.25, 1, 2, 4, 9, 1e6});
  check_unary<T, op::Sin>([](T v) { return std::sin(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Cos>([](T v) { return std::cos(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Tanh>([](T v) { return std::tanh(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Sinh>([](T v) { return std::sinh(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Cosh>([](T v) { return std::cosh(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Atan>([](T v) { return std::atan(static_cast<double>(v)); }, kSigned);
  const std::vector<double> unit = {-0.99, -0.5, -0.25, 0, 0.1, 0.5, 0.75, 0.99};
  check_unary<T, op::Tan>([](T v) { return std::tan(static_cast<double>(v)); }, unit);
  check_unary<T, op::Asin>([](T v) { return std::asin(static_cast<double>(v)); }, unit);
  check_unary<T, op::Acos>([](T v) { return std::acos(static_cast<double>(v)); }, unit);
  check_unary<T, op::Sigmoid>([](T v) { return 1.0 / (1.0 + std::exp(-static_cast<double>(v))); },
                              {-100, -10, -3.75, -1, 0, 0.5, 1, 10, 100});
  check_unary<T, op::Erf>([](T v) { return std::erf(static_cast<double>(v)); }, kSigned);
  check_unary<T, op::Gelu>(
      [](T v) {
        double x = static_cast<double>(v);
        return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      },
      kSigned);
  // Values worth knowing by heart.
  auto got = run_op<T>(unary_factory<op::Exp>(), {make_value(Shape{2}, vec<T>({0, 1}))});
  EXPECT_TRUE(all_close(got, vec<T>({1, 2.718281828459045}), tol<T>()));
  // Log is exact at 1 and accurate relative to small results near 1.
  got = run_op<T>(unary_factory<op::Log>(), {make_value(Shape{3}, vec<T>({1, 0.999, 1.001}))});
  EXPECT_EQ(got[0], T(0));
  for (size_t i = 1; i < 3; ++i) {
    double x = static_cast<double>(i == 1 ? T(0.999) : T(1.001));
    EXPECT_NEAR(got[i], std::log(x), 1e-5 * std::fabs(std::log(x))) << x;
  }
  got = run_op<T>(unary_factory<op::Sigmoid>(), {make_value(Shape{1}, vec<T>({0}))});
  EXPECT_TRUE(all_close(got, vec<T>({0.5}), tol<T>()));
  got = run_op<T>(unary_factory<op::Sqrt>(), {make_value(Shape{1}, vec<T>({16}))});
  EXPECT_TRUE(all_close(got, vec<T>({4}), tol<T>()));
}

// ------------------------------------------------------------------------ select, convert

TYPED_TEST(exec_numeric, select) {
  using T = TypeParam;
  using B = element::boolean_t;
  auto select = [](const std::string& ab) -> Factory {
    return
        [ab](const OutputVector& a) { return std::make_shared<op::Select>(a[0], a[1], a[2], ab); };
  };
  auto got = run_op<T>(select("none"), {make_value(Shape{4}, std::vector<B>{1, 0, 0, 1}),
                                        make_value(Shape{4}, vec<T>({1, 2, 3, 4})),
                                        make_value(Shape{4}, vec<T>({-1, -2, -3, -4}))});
  EXPECT_EQ(got, vec<T>({1, -2, -3, 4}));
  // cond {3}, then {2,1}, else scalar: all broadcast to {2,3}.
  got = run_op<T>(select("numpy"),
                  {make_value(Shape{3}, std::vector<B>{1, 0, 1}),
                   make_value(Shape{2, 1}, vec<T>({10, 20})), make_value(Shape{}, vec<T>({-7}))});
  EXPECT_EQ(got, vec<T>({10, -7, 10, 20, -7, 20}));
  // cond {2,1}, then {3}, else {2,3}.
  got = run_op<T>(select("numpy"), {make_value(Shape{2, 1}, std::vector<B>{0, 1}),
                                    make_value(Shape{3}, vec<T>({1, 2, 3})),
                                    make_value(Shape{2, 3}, vec<T>({4, 5, 6, 7, 8, 9}))});
  EXPECT_EQ(got, vec<T>({4, 5, 6, 1, 2, 3}));
  got = run_op<T>(select("numpy"),
                  {make_value(Shape{0, 1}, std::vector<B>{}),
                   make_value(Shape{3}, vec<T>({1, 2, 3})), make_value(Shape{}, vec<T>({0}))});
  EXPECT_TRUE(got.empty());
}

TEST(exec_boolean, select_boolean_values) {
  using B = element::boolean_t;
  auto got = run_op<B>(
      [](const OutputVector& a) { return std::make_shared<op::Select>(a[0], a[1], a[2]); },
      {make_value(Shape{3}, std::vector<B>{1, 0, 1}), make_value(Shape{3}, std::vector<B>{0, 0, 1}),
       make_value(Shape{3}, std::vector<B>{1, 1, 0})});
  EXPECT_EQ(got, (std::vector<B>{0, 1, 1}));
}

namespace {
// Converts `values` (held as double) from type From to every type, checking against
// static_cast (and != 0 for boolean).
template <typename From>
void check_convert_from(const std::vector<double>& values) {
  std::vector<From> x;
  for (double v : values) x.push_back(static_cast<From>(v));
  Value in = make_value(Shape{x.size()}, x);
  auto conv = [](element::Type t) -> Factory {
    return [t](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], t); };
  };
  auto expect = [&](auto tag) {
    using To = decltype(tag);
    std::vector<To> e;
    for (From v : x) {
      if constexpr (std::is_same_v<To, element::boolean_t>)
        e.push_back(v != From(0) ? 1 : 0);
      else
        e.push_back(static_cast<To>(v));
    }
    EXPECT_EQ(run_op<To>(conv(element::from<To>()), {in}), e) << "to " << element::from<To>();
  };
  expect(float{});
  expect(double{});
  expect(int32_t{});
  expect(int64_t{});
  expect(element::boolean_t{});
}
}  // namespace

TEST(exec_convert, all_type_pairs) {
  check_convert_from<float>({-2.75, -1, -0.5, 0, 0.5, 1, 2.75, 100});
  check_convert_from<double>({-2.75, -1, -0.5, 0, 0.5, 1, 2.75, 1e9});
  check_convert_from<int32_t>({-5, -1, 0, 1, 2, 123456});
  check_convert_from<int64_t>({-5, -1, 0, 1, 2, 4294967296.0 + 7});
  check_convert_from<element::boolean_t>({0, 1, 1, 0});
}

TEST(exec_convert, by_hand) {
  auto got = run_op<int32_t>(
      [](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], element::i32); },
      {make_value(Shape{4}, std::vector<float>{2.7f, -2.7f, 0.4f, -0.4f})});
  EXPECT_EQ(got, (std::vector<int32_t>{2, -2, 0, 0}));
  auto b = run_op<element::boolean_t>(
      [](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], element::boolean); },
      {make_value(Shape{4}, std::vector<double>{0, 0.5, -1, -0.0})});
  EXPECT_EQ(b, (std::vector<element::boolean_t>{0, 1, 1, 0}));
}

// ---------------------------------------------------------------------------- Dot, MatMul

namespace {
Factory dot(int64_t n = -1) {
  return [n](const OutputVector& a) { return std::make_shared<op::Dot>(a[0], a[1], n); };
}
Factory matmul(bool ta = false, bool tb = false) {
  return
      [ta, tb](const OutputVector& a) { return std::make_shared<op::MatMul>(a[0], a[1], ta, tb); };
}

// NumPy's matmul on stored (possibly transposed) arguments, by index arithmetic.
template <typename T>
std::vector<T> matmul_ref(const std::vector<T>& a, Shape sa, const std::vector<T>& b, Shape sb,
                          bool ta, bool tb, Shape* out_shape) {
  bool av = sa.size() == 1, bv = sb.size() == 1;
  if (av) {
    sa.insert(sa.begin(), 1);
    ta = false;
  }
  if (bv) {
    sb.push_back(1);
    tb = false;
  }
  size_t ra = sa[sa.size() - 2], ca = sa.back(), rb = sb[sb.size() - 2], cb = sb.back();
  size_t m = ta ? ca : ra, k = ta ? ra : ca, n = tb ? rb : cb;
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch = numpy_shape(ba, bb);
  Shape out = batch;
  if (!av) out.push_back(m);
  if (!bv) out.push_back(n);
  *out_shape = out;
  std::vector<T> r(shape_size(batch) * m * n, T(0));
  for (size_t bi = 0; bi < shape_size(batch); ++bi) {
    auto coord = unravel(bi, batch);
    size_t ia = broadcast_index(ba, coord), ib = broadcast_index(bb, coord);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        T acc = 0;
        for (size_t p = 0; p < k; ++p) {
          T x = a[ia * ra * ca + (ta ? p * ca + i : i * ca + p)];
          T y = b[ib * rb * cb + (tb ? j * cb + p : p * cb + j)];
          acc += x * y;
        }
        r[(bi * m + i) * n + j] = acc;
      }
  }
  return r;
}
}  // namespace

TYPED_TEST(exec_numeric, dot_by_hand) {
  using T = TypeParam;
  // Vector . vector.
  EXPECT_EQ(run_op<T>(dot(), {make_value(Shape{3}, vec<T>({1, 2, 3})),
                              make_value(Shape{3}, vec<T>({4, -5, 6}))}),
            vec<T>({12}));
  // Matrix . vector and vector . matrix.
  auto m23 = make_value(Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(dot(), {m23, make_value(Shape{3}, vec<T>({1, 0, -1}))}), vec<T>({-2, -2}));
  EXPECT_EQ(run_op<T>(dot(), {make_value(Shape{2}, vec<T>({1, -1})), m23}), vec<T>({-3, -3, -3}));
  // Matrix . matrix.
  auto m32 = make_value(Shape{3, 2}, vec<T>({1, 0, 0, 1, 2, 3}));
  EXPECT_EQ(run_op<T>(dot(), {m23, m32}), vec<T>({7, 11, 16, 23}));
  EXPECT_EQ(run_op<T>(dot(1), {m23, m32}), vec<T>({7, 11, 16, 23}));
  // Scalars: the default count is 0, a scalar product.
  auto s = make_value(Shape{}, vec<T>({3}));
  EXPECT_EQ(run_op<T>(dot(), {s, m23}), vec<T>({3, 6, 9, 12, 15, 18}));
  EXPECT_EQ(run_op<T>(dot(), {m23, s}), vec<T>({3, 6, 9, 12, 15, 18}));
  EXPECT_EQ(run_op<T>(dot(), {s, make_value(Shape{}, vec<T>({-4}))}), vec<T>({-12}));
  // Count 0 on tensors: an outer product.
  EXPECT_EQ(run_op<T>(dot(0), {make_value(Shape{2}, vec<T>({1, 2})),
                               make_value(Shape{3}, vec<T>({1, 10, 100}))}),
            vec<T>({1, 10, 100, 2, 20, 200}));
  // Count 2: the whole of {2,2} against {2,2} is a scalar.
  EXPECT_EQ(run_op<T>(dot(2), {make_value(Shape{2, 2}, vec<T>({1, 2, 3, 4})),
                               make_value(Shape{2, 2}, vec<T>({5, 6, 7, 8}))}),
            vec<T>({70}));
  // An empty reduction gives zeros.
  EXPECT_EQ(run_op<T>(dot(), {make_value(Shape{2, 0}, std::vector<T>{}),
                              make_value(Shape{0, 3}, std::vector<T>{})}),
            vec<T>({0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(run_op<T>(dot(), {make_value(Shape{0, 3}, std::vector<T>{}), m32}).empty());
}

TYPED_TEST(exec_numeric, dot_reference) {
  using T = TypeParam;
  // Count 2: out[i][j] = sum over p, q of a[i][p][q] * b[p][q][j].
  {
    auto a = data<T>(2 * 3 * 4, -3, 7), b = data<T>(3 * 4 * 5, -2, 5, 3);
    std::vector<T> e(2 * 5, T(0));
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < 5; ++j)
        for (size_t p = 0; p < 3; ++p)
          for (size_t q = 0; q < 4; ++q)
            e[i * 5 + j] += a[(i * 3 + p) * 4 + q] * b[(p * 4 + q) * 5 + j];
    EXPECT_EQ(run_op<T>(dot(2), {make_value(Shape{2, 3, 4}, a), make_value(Shape{3, 4, 5}, b)}), e);
  }
  // Count 0: out[i][j][k] = a[i][j] * b[k].
  {
    auto a = data<T>(6, -3, 7), b = data<T>(4, -2, 5, 3);
    std::vector<T> e;
    for (size_t i = 0; i < 6; ++i)
      for (size_t k = 0; k < 4; ++k) e.push_back(a[i] * b[k]);
    EXPECT_EQ(run_op<T>(dot(0), {make_value(Shape{2, 3}, a), make_value(Shape{4}, b)}), e);
  }
  // Count 1 on a 3-D tensor: out[i][j][k] = sum over p of a[i][j][p] * b[p][k].
  {
    auto a = data<T>(2 * 3 * 17, -3, 7), b = data<T>(17 * 9, -2, 5, 3);
    std::vector<T> e(2 * 3 * 9, T(0));
    for (size_t ij = 0; ij < 6; ++ij)
      for (size_t k = 0; k < 9; ++k)
        for (size_t p = 0; p < 17; ++p) e[ij * 9 + k] += a[ij * 17 + p] * b[p * 9 + k];
    EXPECT_TRUE(
        all_close(run_op<T>(dot(), {make_value(Shape{2, 3, 17}, a), make_value(Shape{17, 9}, b)}),
                  e, tol<T>()));
  }
}

TYPED_TEST(exec_numeric, matmul_by_hand) {
  using T = TypeParam;
  auto a = make_value(Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}));
  auto b = make_value(Shape{3, 2}, vec<T>({1, 0, 0, 1, 2, 3}));
  EXPECT_EQ(run_op<T>(matmul(), {a, b}), vec<T>({7, 11, 16, 23}));
  // a^T is {3,2}: [[1,4],[2,5],[3,6]]; a^T . a^T^T = a^T . a.
  EXPECT_EQ(run_op<T>(matmul(true, false), {a, a}), vec<T>({17, 22, 27, 22, 29, 36, 27, 36, 45}));
  // a . a^T.
  EXPECT_EQ(run_op<T>(matmul(false, true), {a, a}), vec<T>({14, 32, 32, 77}));
  // b^T . a^T = (a . b)^T.
  EXPECT_EQ(run_op<T>(matmul(true, true), {b, a}), vec<T>({7, 16, 11, 23}));
  // 1-D promotion.
  auto v3 = make_value(Shape{3}, vec<T>({1, 0, -1}));
  auto v2 = make_value(Shape{2}, vec<T>({1, -1}));
  EXPECT_EQ(run_op<T>(matmul(), {a, v3}), vec<T>({-2, -2}));
  EXPECT_EQ(run_op<T>(matmul(), {v2, a}), vec<T>({-3, -3, -3}));
  EXPECT_EQ(run_op<T>(matmul(), {v3, v3}), vec<T>({2}));
  EXPECT_EQ(run_op<T>(matmul(true, true), {v3, v3}), vec<T>({2}));  // no transpose for vectors
  EXPECT_EQ(run_op<T>(matmul(false, true), {v3, a}), vec<T>({-2, -2}));
  // Zero-size inner dimension: zeros.
  EXPECT_EQ(run_op<T>(matmul(), {make_value(Shape{2, 0}, std::vector<T>{}),
                                 make_value(Shape{0, 2}, std::vector<T>{})}),
            vec<T>({0, 0, 0, 0}));
}

TYPED_TEST(exec_numeric, matmul_reference) {
  using T = TypeParam;
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  std::vector<Case> cases = {
      {{2, 3}, {3, 4}, false, false},
      {{3, 2}, {3, 4}, true, false},
      {{2, 3}, {4, 3}, false, true},
      {{3, 2}, {4, 3}, true, true},
      {{5, 2, 3}, {3, 4}, false, false},
      {{3, 4}, {5, 4, 2}, false, false},
      {{2, 1, 2, 3}, {4, 3, 5}, false, false},
      {{2, 1, 3, 2}, {4, 5, 3}, true, true},
      {{3, 1, 2, 3}, {1, 2, 3, 2}, false, false},
      {{7, 2, 3}, {3}, false, false},
      {{3}, {7, 3, 4}, false, false},
      {{4}, {2, 3, 4}, false, true},
      {{0, 2, 3}, {1, 3, 4}, false, false},
      {{2, 0, 3}, {3, 4}, false, false},
      {{1, 17}, {17, 33}, false, false},
      {{33, 17}, {33, 5}, true, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(to_braces(c.a) + " x " + to_braces(c.b) + (c.ta ? " ta" : "") +
                 (c.tb ? " tb" : ""));
    auto a = data<T>(shape_size(c.a), -3, 7), b = data<T>(shape_size(c.b), -2, 5, 3);
    Shape out;
    auto e = matmul_ref(a, c.a, b, c.b, c.ta, c.tb, &out);
    Value got = test::run_op_value(matmul(c.ta, c.tb), {make_value(c.a, a), make_value(c.b, b)});
    EXPECT_EQ(got.shape, out);
    EXPECT_TRUE(all_close(to_vector<T>(got), e, tol<T>()));
  }
}

// ------------------------------------------------------------------------ data movement

TYPED_TEST(exec_numeric, broadcast) {
  using T = TypeParam;
  auto bc = [](const Shape& s, const AxisSet& axes) -> Factory {
    return
        [s, axes](const OutputVector& a) { return std::make_shared<op::Broadcast>(a[0], s, axes); };
  };
  auto v = make_value(Shape{3}, vec<T>({1, 2, 3}));
  EXPECT_EQ(run_op<T>(bc({2, 3}, {0}), {v}), vec<T>({1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(run_op<T>(bc({3, 2}, {1}), {v}), vec<T>({1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(run_op<T>(bc({2, 3, 2}, {0, 2}), {v}), vec<T>({1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(run_op<T>(bc({2, 2}, {0, 1}), {make_value(Shape{}, vec<T>({5}))}),
            vec<T>({5, 5, 5, 5}));
  EXPECT_EQ(run_op<T>(bc({3}, {}), {v}), vec<T>({1, 2, 3}));
  EXPECT_TRUE(run_op<T>(bc({0, 3}, {0}), {v}).empty());
  EXPECT_EQ(run_op<T>(bc({2, 1, 2}, {0, 2}), {make_value(Shape{1}, vec<T>({4}))}),
            vec<T>({4, 4, 4, 4}));
  auto m = make_value(Shape{2, 2}, vec<T>({1, 2, 3, 4}));
  EXPECT_EQ(run_op<T>(bc({2, 3, 2}, {1}), {m}), vec<T>({1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
}

TYPED_TEST(exec_numeric, reshape) {
  using T = TypeParam;
  auto rs = [](const AxisVector& order, const Shape& s) -> Factory {
    return
        [order, s](const OutputVector& a) { return std::make_shared<op::Reshape>(a[0], order, s); };
  };
  auto m = make_value(Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(rs({0, 1}, {3, 2}), {m}), vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(rs({0, 1}, {2, 3}), {m}), vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(rs({1, 0}, {3, 2}), {m}), vec<T>({1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(run_op<T>(rs({1, 0}, {6}), {m}), vec<T>({1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(run_op<T>(rs({}, {1, 1}), {make_value(Shape{}, vec<T>({9}))}), vec<T>({9}));
  EXPECT_TRUE(run_op<T>(rs({1, 0}, {3, 0}), {make_value(Shape{0, 3}, std::vector<T>{})}).empty());
  // A 3-D permutation against index arithmetic: out[k][i][j] = in[i][j][k].
  auto x = data<T>(2 * 3 * 4, -10, 23);
  std::vector<T> e;
  for (size_t k = 0; k < 4; ++k)
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < 3; ++j) e.push_back(x[(i * 3 + j) * 4 + k]);
  EXPECT_EQ(run_op<T>(rs({2, 0, 1}, {4, 2, 3}), {make_value(Shape{2, 3, 4}, x)}), e);
  EXPECT_EQ(run_op<T>(rs({2, 0, 1}, {8, 3}), {make_value(Shape{2, 3, 4}, x)}), e);
}

TYPED_TEST(exec_numeric, slice) {
  using T = TypeParam;
  auto sl = [](const Coordinate& lo, const Coordinate& hi,
               const Strides& st = Strides()) -> Factory {
    return [lo, hi, st](const OutputVector& a) {
      return std::make_shared<op::Slice>(a[0], lo, hi, st);
    };
  };
  // x[i][j] = 10 * i + j on {4,5}.
  std::vector<T> x;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) x.push_back(static_cast<T>(10 * i + j));
  auto m = make_value(Shape{4, 5}, x);
  EXPECT_EQ(run_op<T>(sl({1, 2}, {3, 5}), {m}), vec<T>({12, 13, 14, 22, 23, 24}));
  EXPECT_EQ(run_op<T>(sl({1, 0}, {4, 5}, {2, 2}), {m}), vec<T>({10, 12, 14, 30, 32, 34}));
  EXPECT_EQ(run_op<T>(sl({0, 1}, {4, 5}, {3, 3}), {m}), vec<T>({1, 4, 31, 34}));
  EXPECT_EQ(run_op<T>(sl({0, 0}, {4, 5}), {m}), x);
  EXPECT_EQ(run_op<T>(sl({0, 4}, {4, 5}), {m}), vec<T>({4, 14, 24, 34}));
  EXPECT_TRUE(run_op<T>(sl({2, 1}, {2, 5}), {m}).empty());
  auto v = make_value(Shape{10}, data<T>(10, 0, 10, 1));  // 3, 4, ..., 9, 0, 1, 2
  EXPECT_EQ(run_op<T>(sl({1}, {10}, {3}), {v}), vec<T>({4, 7, 0}));
  EXPECT_EQ(run_op<T>(sl({9}, {10}, {5}), {v}), vec<T>({2}));
  EXPECT_EQ(run_op<T>(sl({}, {}), {make_value(Shape{}, vec<T>({8}))}), vec<T>({8}));
  // 3-D with a stride on every axis, against index arithmetic.
  Shape s3{5, 6, 7};
  auto x3 = data<T>(shape_size(s3), -50, 101, 1);
  std::vector<T> e3;
  for (size_t i = 1; i < 5; i += 2)
    for (size_t j = 0; j < 5; j += 3)
      for (size_t k = 2; k < 7; k += 2) e3.push_back(x3[(i * 6 + j) * 7 + k]);
  EXPECT_EQ(run_op<T>(sl({1, 0, 2}, {5, 5, 7}, {2, 3, 2}), {make_value(s3, x3)}), e3);
}

TYPED_TEST(exec_numeric, concat) {
  using T = TypeParam;
  auto cc = [](size_t axis) -> Factory {
    return [axis](const OutputVector& a) { return std::make_shared<op::Concat>(a, axis); };
  };
  auto a = make_value(Shape{2, 2}, vec<T>({1, 2, 3, 4}));
  auto b = make_value(Shape{1, 2}, vec<T>({5, 6}));
  auto c = make_value(Shape{2, 1}, vec<T>({7, 8}));
  auto e0 = make_value(Shape{0, 2}, std::vector<T>{});
  auto e1 = make_value(Shape{2, 0}, std::vector<T>{});
  EXPECT_EQ(run_op<T>(cc(0), {a, b}), vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(cc(0), {b, e0, a, b}), vec<T>({5, 6, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(cc(1), {a, c, a}), vec<T>({1, 2, 7, 1, 2, 3, 4, 8, 3, 4}));
  EXPECT_EQ(run_op<T>(cc(1), {e1, c, e1}), vec<T>({7, 8}));
  EXPECT_EQ(run_op<T>(cc(0), {a}), vec<T>({1, 2, 3, 4}));
  EXPECT_TRUE(run_op<T>(cc(0), {e0, e0}).empty());
  // Middle axis of a 3-D tensor.
  auto x = make_value(Shape{2, 1, 2}, vec<T>({1, 2, 3, 4}));
  auto y = make_value(Shape{2, 2, 2}, vec<T>({5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(run_op<T>(cc(1), {x, y}), vec<T>({1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
}

namespace {
Factory pad(const CoordinateDiff& below, const CoordinateDiff& above, const std::string& mode) {
  return [below, above, mode](const OutputVector& a) {
    return std::make_shared<op::Pad>(a[0], a[1], below, above, mode);
  };
}
}  // namespace

TYPED_TEST(exec_numeric, pad_1d_modes) {
  using T = TypeParam;
  auto v = make_value(Shape{3}, vec<T>({1, 2, 3}));
  auto z = make_value(Shape{}, vec<T>({-9}));
  // The NumPy equivalents: np.pad([1,2,3], (2,2), mode).
  EXPECT_EQ(run_op<T>(pad({2}, {2}, "constant"), {v, z}), vec<T>({-9, -9, 1, 2, 3, -9, -9}));
  EXPECT_EQ(run_op<T>(pad({2}, {2}, "edge"), {v, z}), vec<T>({1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(run_op<T>(pad({2}, {2}, "reflect"), {v, z}), vec<T>({3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(run_op<T>(pad({2}, {2}, "symmetric"), {v, z}), vec<T>({2, 1, 1, 2, 3, 3, 2}));
  EXPECT_EQ(run_op<T>(pad({3}, {3}, "symmetric"), {v, z}), vec<T>({3, 2, 1, 1, 2, 3, 3, 2, 1}));
  EXPECT_EQ(run_op<T>(pad({0}, {1}, "reflect"), {v, z}), vec<T>({1, 2, 3, 2}));
  EXPECT_EQ(run_op<T>(pad({4}, {0}, "edge"), {v, z}), vec<T>({1, 1, 1, 1, 1, 2, 3}));
  EXPECT_EQ(run_op<T>(pad({0}, {0}, "reflect"), {v, z}), vec<T>({1, 2, 3}));
  // Constant padding of an empty axis.
  EXPECT_EQ(run_op<T>(pad({1}, {2}, "constant"), {make_value(Shape{0}, std::vector<T>{}), z}),
            vec<T>({-9, -9, -9}));
}

TYPED_TEST(exec_numeric, pad_negative) {
  using T = TypeParam;
  auto v = make_value(Shape{5}, vec<T>({1, 2, 3, 4, 5}));
  auto z = make_value(Shape{}, vec<T>({0}));
  EXPECT_EQ(run_op<T>(pad({-1}, {-2}, "constant"), {v, z}), vec<T>({2, 3}));
  EXPECT_EQ(run_op<T>(pad({-2}, {1}, "constant"), {v, z}), vec<T>({3, 4, 5, 0}));
  EXPECT_EQ(run_op<T>(pad({2}, {-3}, "constant"), {v, z}), vec<T>({0, 0, 1, 2}));
  EXPECT_EQ(run_op<T>(pad({-1}, {2}, "edge"), {v, z}), vec<T>({2, 3, 4, 5, 5, 5}));
  EXPECT_EQ(run_op<T>(pad({2}, {-1}, "reflect"), {v, z}), vec<T>({3, 2, 1, 2, 3, 4}));
  EXPECT_EQ(run_op<T>(pad({-3}, {2}, "symmetric"), {v, z}), vec<T>({4, 5, 5, 4}));
  EXPECT_TRUE(run_op<T>(pad({-2}, {-3}, "constant"), {v, z}).empty());
}

TYPED_TEST(exec_numeric, pad_2d) {
  using T = TypeParam;
  // [[1,2,3],[4,5,6]]
  auto m = make_value(Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}));
  auto z = make_value(Shape{}, vec<T>({0}));
  EXPECT_EQ(run_op<T>(pad({1, 0}, {0, 1}, "constant"), {m, z}),
            vec<T>({0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0}));
  EXPECT_EQ(run_op<T>(pad({1, 1}, {1, 1}, "edge"), {m, z}),
            vec<T>({1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6, 4, 4, 5, 6, 6}));
  // np.pad(m, ((1, 0), (2, 0)), 'reflect')
  EXPECT_EQ(run_op<T>(pad({1, 2}, {0, 0}, "reflect"), {m, z}),
            vec<T>({6, 5, 4, 5, 6, 3, 2, 1, 2, 3, 6, 5, 4, 5, 6}));
  // np.pad(m, ((0, 1), (1, 1)), 'symmetric')
  EXPECT_EQ(run_op<T>(pad({0, 1}, {1, 1}, "symmetric"), {m, z}),
            vec<T>({1, 1, 2, 3, 3, 4, 4, 5, 6, 6, 4, 4, 5, 6, 6}));
  // Crop one axis, pad the other.
  EXPECT_EQ(run_op<T>(pad({-1, 1}, {0, -1}, "constant"), {m, z}), vec<T>({0, 4, 5}));
}

TYPED_TEST(exec_numeric, reverse) {
  using T = TypeParam;
  auto rv = [](const AxisSet& axes) -> Factory {
    return [axes](const OutputVector& a) { return std::make_shared<op::Reverse>(a[0], axes); };
  };
  auto m = make_value(Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(rv({}), {m}), vec<T>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run_op<T>(rv({0}), {m}), vec<T>({4, 5, 6, 1, 2, 3}));
  EXPECT_EQ(run_op<T>(rv({1}), {m}), vec<T>({3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(run_op<T>(rv({0, 1}), {m}), vec<T>({6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(run_op<T>(rv({0}), {make_value(Shape{1, 3}, vec<T>({1, 2, 3}))}), vec<T>({1, 2, 3}));
  EXPECT_TRUE(run_op<T>(rv({0, 1}), {make_value(Shape{0, 3}, std::vector<T>{})}).empty());
  EXPECT_EQ(run_op<T>(rv({}), {make_value(Shape{}, vec<T>({7}))}), vec<T>({7}));
  // 3-D, middle axis.
  auto x = data<T>(24, -12, 25, 1);
  std::vector<T> e;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 4; ++k) e.push_back(x[(i * 3 + (2 - j)) * 4 + k]);
  EXPECT_EQ(run_op<T>(rv({1}), {make_value(Shape{2, 3, 4}, x)}), e);
}

TEST(exec_boolean, data_movement) {
  using B = element::boolean_t;
  auto m = make_value(Shape{2, 2}, std::vector<B>{1, 0, 0, 0});
  EXPECT_EQ(run_op<B>(
                [](const OutputVector& a) {
                  return std::make_shared<op::Broadcast>(a[0], Shape{2, 2, 2}, AxisSet{2});
                },
                {m}),
            (std::vector<B>{1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_op<B>(
                [](const OutputVector& a) {
                  return std::make_shared<op::Reshape>(a[0], AxisVector{1, 0}, Shape{4});
                },
                {make_value(Shape{2, 2}, std::vector<B>{1, 1, 0, 0})}),
            (std::vector<B>{1, 0, 1, 0}));
  EXPECT_EQ(run_op<B>(
                [](const OutputVector& a) {
                  return std::make_shared<op::Slice>(a[0], Coordinate{0, 1}, Coordinate{2, 2});
                },
                {make_value(Shape{2, 2}, std::vector<B>{1, 0, 0, 1})}),
            (std::vector<B>{0, 1}));
  EXPECT_EQ(run_op<B>([](const OutputVector& a) { return std::make_shared<op::Concat>(a, 0); },
                      {make_value(Shape{1}, std::vector<B>{1}),
                       make_value(Shape{2}, std::vector<B>{0, 1})}),
            (std::vector<B>{1, 0, 1}));
  EXPECT_EQ(
      run_op<B>(
          [](const OutputVector& a) { return std::make_shared<op::Reverse>(a[0], AxisSet{0}); },
          {make_value(Shape{3}, std::vector<B>{1, 0, 0})}),
      (std::vector<B>{0, 0, 1}));
  EXPECT_EQ(run_op<B>(pad({1}, {1}, "constant"), {make_value(Shape{1}, std::vector<B>{0}),
                                                  make_value(Shape{}, std::vector<B>{1})}),
            (std::vector<B>{1, 0, 1}));
}

// ----------------------------------------------------------------------------- reductions

namespace {
template <typename Op>
Factory reduce(const AxisSet& axes) {
  return [axes](const OutputVector& a) { return std::make_shared<Op>(a[0], axes); };
}

template <typename T, typename F>
std::vector<T> reduce_ref(const std::vector<T>& x, const Shape& shape, const AxisSet& axes, T init,
                          F f) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!axes.count(d)) out.push_back(shape[d]);
  std::vector<T> r(shape_size(out), init);
  for (size_t i = 0; i < x.size(); ++i) {
    auto c = unravel(i, shape);
    size_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!axes.count(d)) o = o * shape[d] + c[d];
    r[o] = f(r[o], x[i]);
  }
  return r;
}

template <typename T>
T lowest_value() {
  return is_float<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}
template <typename T>
T highest_value() {
  return is_float<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
}
}  // namespace

TYPED_TEST(exec_numeric, reductions_by_hand) {
  using T = TypeParam;
  auto m = make_value(Shape{2, 3}, vec<T>({1, -2, 3, 4, 5, -6}));
  EXPECT_EQ(run_op<T>(reduce<op::Sum>({0}), {m}), vec<T>({5, 3, -3}));
  EXPECT_EQ(run_op<T>(reduce<op::Sum>({1}), {m}), vec<T>({2, 3}));
  EXPECT_EQ(run_op<T>(reduce<op::Sum>({0, 1}), {m}), vec<T>({5}));
  EXPECT_EQ(run_op<T>(reduce<op::Sum>({}), {m}), vec<T>({1, -2, 3, 4, 5, -6}));
  EXPECT_EQ(run_op<T>(reduce<op::Product>({0}), {m}), vec<T>({4, -10, -18}));
  EXPECT_EQ(run_op<T>(reduce<op::Product>({1}), {m}), vec<T>({-6, -120}));
  EXPECT_EQ(run_op<T>(reduce<op::Max>({0}), {m}), vec<T>({4, 5, 3}));
  EXPECT_EQ(run_op<T>(reduce<op::Max>({1}), {m}), vec<T>({3, 5}));
  EXPECT_EQ(run_op<T>(reduce<op::Min>({0, 1}), {m}), vec<T>({-6}));
  EXPECT_EQ(run_op<T>(reduce<op::Min>({1}), {m}), vec<T>({-2, -6}));
  // Reducing an axis of size 1 only drops it.
  auto k = make_value(Shape{2, 1, 3}, vec<T>({1, -2, 3, 4, 5, -6}));
  for (auto got : {run_op<T>(reduce<op::Sum>({1}), {k}), run_op<T>(reduce<op::Product>({1}), {k}),
                   run_op<T>(reduce<op::Max>({1}), {k}), run_op<T>(reduce<op::Min>({1}), {k})})
    EXPECT_EQ(got, vec<T>({1, -2, 3, 4, 5, -6}));
  // Scalars reduce over nothing.
  EXPECT_EQ(run_op<T>(reduce<op::Max>({}), {make_value(Shape{}, vec<T>({-3}))}), vec<T>({-3}));
}

TYPED_TEST(exec_numeric, reductions_over_empty_axes) {
  using T = TypeParam;
  auto e = make_value(Shape{2, 0}, std::vector<T>{});
  EXPECT_EQ(run_op<T>(reduce<op::Sum>({1}), {e}), vec<T>({0, 0}));
  EXPECT_EQ(run_op<T>(reduce<op::Product>({1}), {e}), vec<T>({1, 1}));
  EXPECT_EQ(run_op<T>(reduce<op::Max>({1}), {e}),
            (std::vector<T>{lowest_value<T>(), lowest_value<T>()}));
  EXPECT_EQ(run_op<T>(reduce<op::Min>({1}), {e}),
            (std::vector<T>{highest_value<T>(), highest_value<T>()}));
  EXPECT_EQ(run_op<T>(reduce<op::Max>({0, 1}), {e}), std::vector<T>{lowest_value<T>()});
  EXPECT_TRUE(run_op<T>(reduce<op::Sum>({1}), {make_value(Shape{0, 3}, std::vector<T>{})}).empty());
  auto e2 = make_value(Shape{0, 3}, std::vector<T>{});
  EXPECT_EQ(run_op<T>(reduce<op::Sum>({0}), {e2}), vec<T>({0, 0, 0}));
  EXPECT_EQ(run_op<T>(reduce<op::Max>({0}), {e2}), std::vector<T>(3, lowest_value<T>()));
  if constexpr (is_float<T>) {
    EXPECT_EQ(run_op<T>(reduce<op::Max>({1}), {e})[0], -std::numeric_limits<T>::infinity());
    EXPECT_EQ(run_op<T>(reduce<op::Min>({1}), {e})[0], std::numeric_limits<T>::infinity());
  }
}

TYPED_TEST(exec_numeric, reductions_reference) {
  using T = TypeParam;
  Shape s{3, 4, 5};
  auto x = data<T>(shape_size(s), -4, 9);
  auto small = data<T>(shape_size(s), -1, 3);  // keeps products in range
  for (const AxisSet& axes : {AxisSet{0}, AxisSet{1}, AxisSet{2}, AxisSet{0, 2}, AxisSet{1, 2},
                              AxisSet{0, 1, 2}, AxisSet{}}) {
    SCOPED_TRACE(to_braces(axes));
    EXPECT_TRUE(all_close(run_op<T>(reduce<op::Sum>(axes), {make_value(s, x)}),
                          reduce_ref<T>(x, s, axes, T(0), [](T a, T b) { return a + b; }),
                          tol<T>()));
    EXPECT_TRUE(all_close(run_op<T>(reduce<op::Product>(axes), {make_value(s, small)}),
                          reduce_ref<T>(small, s, axes, T(1), [](T a, T b) { return a * b; }),
                          tol<T>()));
    EXPECT_EQ(
        run_op<T>(reduce<op::Max>(axes), {make_value(s, x)}),
        reduce_ref<T>(x, s, axes, lowest_value<T>(), [](T a, T b) { return std::max(a, b); }));
    EXPECT_EQ(
        run_op<T>(reduce<op::Min>(axes), {make_value(s, x)}),
        reduce_ref<T>(x, s, axes, highest_value<T>(), [](T a, T b) { return std::min(a, b); }));
  }
}

TYPED_TEST(exec_real, nan_propagates_through_max_min_reductions) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  // Rows: NaN first, NaN in the middle, no NaN.
  auto m = make_value(Shape{3, 3}, std::vector<T>{nan, 1, 2, 3, nan, 5, 6, 7, -8});
  EXPECT_TRUE(all_close(run_op<T>(reduce<op::Max>({1}), {m}), std::vector<T>{nan, nan, 7}));
  EXPECT_TRUE(all_close(run_op<T>(reduce<op::Min>({1}), {m}), std::vector<T>{nan, nan, -8}));
  EXPECT_TRUE(all_close(run_op<T>(reduce<op::Max>({0}), {m}), std::vector<T>{nan, nan, 5}));
  EXPECT_TRUE(all_close(run_op<T>(reduce<op::Min>({0, 1}), {m}), std::vector<T>{nan}));
  EXPECT_TRUE(all_close(run_op<T>(reduce<op::Sum>({1}), {m}), std::vector<T>{nan, nan, 5}));
}

namespace {
Factory argmax(size_t axis, element::Type t = element::i64) {
  return [axis, t](const OutputVector& a) { return std::make_shared<op::ArgMax>(a[0], axis, t); };
}
Factory argmin(size_t axis, element::Type t = element::i64) {
  return [axis, t](const OutputVector& a) { return std::make_shared<op::ArgMin>(a[0], axis, t); };
}
}  // namespace

TYPED_TEST(exec_numeric, argmax_argmin) {
  using T = TypeParam;
  // [[3, 1, 3], [0, 0, -1]]: ties give the first index.
  auto m = make_value(Shape{2, 3}, vec<T>({3, 1, 3, 0, 0, -1}));
  EXPECT_EQ(run_op<int64_t>(argmax(1), {m}), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(run_op<int64_t>(argmin(1), {m}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(run_op<int32_t>(argmax(0, element::i32), {m}), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(run_op<int32_t>(argmin(0, element::i32), {m}), (std::vector<int32_t>{1, 1, 1}));
  auto ties = make_value(Shape{5}, vec<T>({2, 7, 7, -1, -1}));
  EXPECT_EQ(run_op<int64_t>(argmax(0), {ties}), std::vector<int64_t>{1});
  EXPECT_EQ(run_op<int64_t>(argmin(0), {ties}), std::vector<int64_t>{3});
  auto all_same = make_value(Shape{4}, vec<T>({5, 5, 5, 5}));
  EXPECT_EQ(run_op<int32_t>(argmax(0, element::i32), {all_same}), std::vector<int32_t>{0});
  EXPECT_EQ(run_op<int32_t>(argmin(0, element::i32), {all_same}), std::vector<int32_t>{0});
  EXPECT_TRUE(run_op<int64_t>(argmax(1), {make_value(Shape{0, 3}, std::vector<T>{})}).empty());
  // Against a reference loop, middle axis of a 3-D tensor.
  Shape s{3, 4, 5};
  auto x = data<T>(shape_size(s), -4, 9, 11);
  std::vector<int64_t> emax, emin;
  for (size_t i = 0; i < 3; ++i)
    for (size_t k = 0; k < 5; ++k) {
      size_t bmax = 0, bmin = 0;
      for (size_t j = 1; j < 4; ++j) {
        if (x[(i * 4 + j) * 5 + k] > x[(i * 4 + bmax) * 5 + k]) bmax = j;
        if (x[(i * 4 + j) * 5 + k] < x[(i * 4 + bmin) * 5 + k]) bmin = j;
      }
      emax.push_back(static_cast<int64_t>(bmax));
      emin.push_back(static_cast<int64_t>(bmin));
    }
  EXPECT_EQ(run_op<int64_t>(argmax(1), {make_value(s, x)}), emax);
  EXPECT_EQ(run_op<int64_t>(argmin(1), {make_value(s, x)}), emin);
}

namespace {
template <typename T>
std::vector<T> softmax_ref(const std::vector<T>& x, const Shape& s, const AxisSet& axes) {
  auto m = reduce_ref<T>(x, s, axes, lowest_value<T>(), [](T a, T b) { return std::max(a, b); });
  Shape out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!axes.count(d)) out.push_back(s[d]);
  auto group = [&](size_t i) {
    auto c = unravel(i, s);
    size_t o = 0;
    for (size_t d = 0; d < s.size(); ++d)
      if (!axes.count(d)) o = o * s[d] + c[d];
    return o;
  };
  std::vector<double> sum(shape_size(out), 0.0);
  for (size_t i = 0; i < x.size(); ++i)
    sum[group(i)] += std::exp(double(x[i]) - double(m[group(i)]));
  std::vector<T> r(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    r[i] = static_cast<T>(std::exp(double(x[i]) - double(m[group(i)])) / sum[group(i)]);
  return r;
}
}  // namespace

TYPED_TEST(exec_real, softmax) {
  using T = TypeParam;
  auto sm = [](const AxisSet& axes) -> Factory {
    return [axes](const OutputVector& a) { return std::make_shared<op::Softmax>(a[0], axes); };
  };
  // By hand: softmax([0, ln 3]) = [1/4, 3/4]; a constant row is uniform.
  auto got = run_op<T>(sm({1}), {make_value(Shape{2, 2}, vec<T>({0, std::log(3.0), 5, 5}))});
  EXPECT_TRUE(all_close(got, vec<T>({0.25, 0.75, 0.5, 0.5}), tol<T>()));
  // Large values do not overflow.
  got = run_op<T>(sm({0}), {make_value(Shape{2}, vec<T>({1000, 1000}))});
  EXPECT_TRUE(all_close(got, vec<T>({0.5, 0.5}), tol<T>()));
  Shape s{3, 4, 5};
  std::vector<T> x;
  for (size_t i = 0; i < shape_size(s); ++i) x.push_back(static_cast<T>(std::sin(double(i)) * 4));
  for (const AxisSet& axes : {AxisSet{0}, AxisSet{1}, AxisSet{2}, AxisSet{0, 1}, AxisSet{1, 2},
                              AxisSet{0, 2}, AxisSet{0, 1, 2}}) {
    SCOPED_TRACE(to_braces(axes));
    auto r = run_op<T>(sm(axes), {make_value(s, x)});
    EXPECT_TRUE(all_close(r, softmax_ref(x, s, axes), tol<T>()));
  }
  // Over the last axis, row by row (CPU's vectorised loop): rows of one element, of fewer than
  // a vector, of whole vectors, with a tail, and long ones.
  for (size_t n : {1, 7, 16, 33, 128}) {
    SCOPED_TRACE(n);
    Shape rs{3, n};
    std::vector<T> v;
    for (size_t i = 0; i < shape_size(rs); ++i)
      v.push_back(static_cast<T>(std::sin(double(i) * 0.37) * 6));
    auto r = run_op<T>(sm({1}), {make_value(rs, v)});
    EXPECT_TRUE(all_close(r, softmax_ref(v, rs, AxisSet{1}), tol<T>()));
  }
  // Every element of the only group: sums to one.
  auto all = run_op<T>(sm({0, 1}), {make_value(Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}))});
  EXPECT_NEAR(std::accumulate(all.begin(), all.end(), 0.0), 1.0, 1e-5);
  EXPECT_TRUE(run_op<T>(sm({1}), {make_value(Shape{0, 3}, std::vector<T>{})}).empty());
}

// --------------------------------------------------------------------------------- OneHot

TYPED_TEST(exec_numeric, one_hot) {
  using T = TypeParam;
  auto oh = [](const Shape& s, size_t axis) -> Factory {
    return [s, axis](const OutputVector& a) { return std::make_shared<op::OneHot>(a[0], s, axis); };
  };
  auto idx = make_value(Shape{3}, vec<T>({2, 0, 1}));
  EXPECT_EQ(run_op<T>(oh({3, 4}, 1), {idx}), vec<T>({0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(run_op<T>(oh({4, 3}, 0), {idx}), vec<T>({0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_op<T>(oh({3}, 0), {make_value(Shape{}, vec<T>({1}))}), vec<T>({0, 1, 0}));
  // {2,2} indices, one_hot_axis 1 of {2,3,2}: out[i][v][j] = (x[i][j] == v).
  auto m = make_value(Shape{2, 2}, vec<T>({0, 2, 1, 1}));
  EXPECT_EQ(run_op<T>(oh({2, 3, 2}, 1), {m}), vec<T>({1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_TRUE(run_op<T>(oh({0, 3}, 1), {make_value(Shape{0}, std::vector<T>{})}).empty());
}

TYPED_TEST(exec_numeric, one_hot_out_of_range_throws) {
  using T = TypeParam;
  auto oh = [](const OutputVector& a) {
    return std::make_shared<op::OneHot>(a[0], Shape{2, 3}, 1);
  };
  for (double bad : {3.0, -1.0, 100.0}) {
    SCOPED_TRACE(bad);
    std::string msg = test::error_of<std::exception>([&] {
      run_op<T>(oh, {make_value(Shape{2}, vec<T>({0, bad}))});
    });
    EXPECT_TRUE(test::starts_with(msg, "[OneHot]")) << msg;
  }
  if constexpr (is_float<T>) {
    std::string msg = test::error_of<std::exception>([&] {
      run_op<T>(oh, {make_value(Shape{2}, vec<T>({0, 1.5}))});
    });
    EXPECT_TRUE(test::starts_with(msg, "[OneHot]")) << msg;
  }
}

// ------------------------------------------------------------- Parameter, Constant, Result

TYPED_TEST(exec_numeric, constants_parameters_results) {
  using T = TypeParam;
  auto p = std::make_shared<op::Parameter>(element::from<T>(), Shape{3});
  auto c = std::make_shared<op::Constant>(element::from<T>(), Shape{3}, vec<T>({1, 2, 3}));
  auto sum = std::make_shared<op::Add>(p, c);
  auto f = std::make_shared<Function>(OutputVector{sum, c, p}, ParameterVector{p});
  for (bool optimize : {true, false}) {
    auto out = test::run_function(f, {make_value(Shape{3}, vec<T>({10, 20, 30}))}, optimize);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(to_vector<T>(out[0]), vec<T>({11, 22, 33}));
    EXPECT_EQ(to_vector<T>(out[1]), vec<T>({1, 2, 3}));
    EXPECT_EQ(to_vector<T>(out[2]), vec<T>({10, 20, 30}));
  }
}

// A chain of several ops, all constants: folded at compile time, same values as unfolded.
TYPED_TEST(exec_numeric, constant_graph_matches_unfolded) {
  using T = TypeParam;
  auto a =
      std::make_shared<op::Constant>(element::from<T>(), Shape{2, 3}, vec<T>({1, 2, 3, 4, 5, 6}));
  auto b = std::make_shared<op::Constant>(element::from<T>(), Shape{3}, vec<T>({1, -1, 2}));
  auto mul = std::make_shared<op::Multiply>(a, b, "numpy");
  auto red = std::make_shared<op::Sum>(mul, AxisSet{1});
  auto rev = std::make_shared<op::Reverse>(red, AxisSet{0});
  auto f = std::make_shared<Function>(OutputVector{rev}, ParameterVector{});
  // rows: 1 - 2 + 6 = 5, 4 - 5 + 12 = 11; reversed.
  EXPECT_EQ(to_vector<T>(test::run_function(f, {}, true).at(0)), vec<T>({11, 5}));
  EXPECT_EQ(to_vector<T>(test::run_function(f, {}, false).at(0)), vec<T>({11, 5}));
}

// ------------------------------------------------------------------------- Executable API

TEST(exec_api, call_checks_tensors) {
  auto p = std::make_shared<op::Parameter>(element::f32, Shape{2});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Negative>(p)},
                                      ParameterVector{p});
  auto backend = test::cpu_backend();
  auto exe = backend->compile(f);
  auto good = backend->create_tensor(element::f32, Shape{2});
  auto wrong_shape = backend->create_tensor(element::f32, Shape{3});
  auto wrong_type = backend->create_tensor(element::i32, Shape{2});
  EXPECT_THROW(exe->call({good}, {}), std::invalid_argument);
  EXPECT_THROW(exe->call({}, {good}), std::invalid_argument);
  std::string msg =
      test::error_of<std::invalid_argument>([&] { exe->call({good}, {wrong_shape}); });
  EXPECT_TRUE(test::contains(msg, "f32{2}") && test::contains(msg, "f32{3}")) << msg;
  EXPECT_THROW(exe->call({wrong_type}, {good}), std::invalid_argument);
  EXPECT_THROW(runtime::Backend::create("GPU"), std::invalid_argument);
  // Runs again with new data.
  float in[2] = {1, -2}, out[2] = {0, 0};
  auto ti = backend->create_tensor(element::f32, Shape{2}, in);
  auto to = backend->create_tensor(element::f32, Shape{2}, out);
  exe->call({to}, {ti});
  EXPECT_EQ(out[0], -1);
  EXPECT_EQ(out[1], 2);
  in[0] = 5;
  exe->call({to}, {ti});
  EXPECT_EQ(out[0], -5);
}

// ------------------------------------------------------------- the small integer types

// Arithmetic wraps around (as NumPy's), unsigned negation included; integer division by zero
// is an error, not a crash.
TYPED_TEST(exec_small_int, arithmetic_comparison_reduction) {
  using T = TypeParam;
  constexpr T hi = std::numeric_limits<T>::max();
  constexpr T lo = std::numeric_limits<T>::lowest();
  std::vector<T> a = {T(0), T(1), T(7), hi, lo, T(12)};
  std::vector<T> b = {T(3), T(2), T(7), T(1), T(1), T(5)};
  auto va = make_value(Shape{6}, a), vb = make_value(Shape{6}, b);
  std::vector<T> sum, diff, quot, neg;
  for (size_t i = 0; i < a.size(); ++i) {
    sum.push_back(static_cast<T>(a[i] + b[i]));
    diff.push_back(static_cast<T>(a[i] - b[i]));
    quot.push_back(static_cast<T>(a[i] / b[i]));  // b > 0, a >= 0 or exact: floor == trunc
    neg.push_back(static_cast<T>(0 - a[i]));
  }
  EXPECT_EQ(run_op<T>(binary_factory<op::Add>(), {va, vb}), sum);
  EXPECT_EQ(run_op<T>(binary_factory<op::Subtract>(), {va, vb}), diff);
  if constexpr (std::is_unsigned_v<T>) {
    EXPECT_EQ(run_op<T>(binary_factory<op::Divide>(), {va, vb}), quot);
    EXPECT_EQ(run_op<T>(unary_factory<op::Abs>(), {va}), a);
    EXPECT_EQ(run_op<T>(unary_factory<op::Relu>(), {va}), a);
  }
  EXPECT_EQ(run_op<T>(unary_factory<op::Negative>(), {va}), neg);
  auto gt = run_op<char>(binary_factory<op::Greater>(), {va, vb});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(gt[i] != 0, a[i] > b[i]) << i;
  auto total = run_op<T>([](const OutputVector& x) {
    return std::make_shared<op::Sum>(x[0], AxisSet{0});
  }, {vb});
  EXPECT_EQ(total, std::vector<T>{T(19)});
  auto biggest = run_op<T>([](const OutputVector& x) {
    return std::make_shared<op::Max>(x[0], AxisSet{0});
  }, {va});
  EXPECT_EQ(biggest, std::vector<T>{hi});
  auto zero = make_value(Shape{6}, std::vector<T>(6, T(0)));
  EXPECT_THROW(run_op<T>(binary_factory<op::Divide>(), {va, zero}), std::domain_error);
}

TYPED_TEST(exec_small_int, convert_and_topk) {
  using T = TypeParam;
  auto v = make_value(Shape{2, 3}, std::vector<T>{T(5), T(1), T(9), T(2), T(8), T(8)});
  auto as_f64 = run_op<double>([](const OutputVector& x) {
    return std::make_shared<op::Convert>(x[0], element::f64);
  }, {v});
  EXPECT_EQ(as_f64, (std::vector<double>{5, 1, 9, 2, 8, 8}));
  auto top = run_op<T>([](const OutputVector& x) {
    return std::make_shared<op::GetOutputElement>(std::make_shared<op::TopK>(x[0], 2, 1), 0);
  }, {v});
  EXPECT_EQ(top, (std::vector<T>{T(9), T(5), T(8), T(8)}));
  auto idx = run_op<int64_t>([](const OutputVector& x) {
    return std::make_shared<op::GetOutputElement>(std::make_shared<op::TopK>(x[0], 2, 1, false), 1);
  }, {v});
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 0, 0, 1}));
}
