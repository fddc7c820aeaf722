// f16 and bf16: the conversion routines (every f16 and bf16 bit pattern, rounding ties,
// overflow, subnormals, NaN), the element types, the storage-only rule, and Convert and the
// data-movement ops on the CPU and INTERPRETER backends.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ngraph/low_precision.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/serializer.hpp"
#include "test_utils.hpp"

using namespace ngraph;

namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

template <typename T>
test::Value value_of(const Shape& shape, const std::vector<T>& values) {
  test::Value v{element::from<T>(), shape, std::vector<char>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(v.bytes.data(), values.data(), v.bytes.size());
  return v;
}

template <typename T>
std::vector<T> values_in(const test::Value& v) {
  EXPECT_EQ(v.type, element::from<T>());
  std::vector<T> out(v.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
  return out;
}

template <typename T>
std::vector<T> from_floats(const std::vector<float>& xs) {
  std::vector<T> out;
  for (float x : xs) out.push_back(T(x));
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------- float16

TEST(float16, every_bit_pattern_round_trips_through_float) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    float16 h = float16::from_bits(static_cast<uint16_t>(b));
    float f = h.to_float();
    ASSERT_EQ(float16(f).bits(), b) << std::hex << "0x" << b << " -> " << f;
    ASSERT_EQ(std::isnan(f), h.is_nan()) << std::hex << b;
  }
}

TEST(float16, decodes_known_values) {
  EXPECT_EQ(float16::from_bits(0x3C00).to_float(), 1.0f);
  EXPECT_EQ(float16::from_bits(0xC000).to_float(), -2.0f);
  EXPECT_EQ(float16::from_bits(0x7BFF).to_float(), 65504.0f);  // largest finite
  EXPECT_EQ(float16::from_bits(0x0400).to_float(), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(float16::from_bits(0x0001).to_float(), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float16::from_bits(0x03FF).to_float(), std::ldexp(1023.0f, -24));
  EXPECT_EQ(float16::from_bits(0x3555).to_float(), 0.25f * (1 + 341 / 1024.0f));  // 0.33325195
  EXPECT_EQ(float16::from_bits(0x7C00).to_float(), std::numeric_limits<float>::infinity());
  EXPECT_EQ(float16::from_bits(0xFC00).to_float(), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits_of(float16::from_bits(0x8000).to_float()), 0x80000000u);  // -0
  EXPECT_TRUE(std::isnan(float16::from_bits(0x7E00).to_float()));
  EXPECT_EQ(bits_of(float16::from_bits(0x7E01).to_float()), 0x7FC02000u);  // payload kept
}

// Between every pair of neighbouring finite f16 values, the midpoint goes to the one with an
// even last bit, and the floats just either side of it to the nearer one.
TEST(float16, rounds_every_midpoint_to_even) {
  for (uint16_t b = 0; b < 0x7BFF; ++b) {
    float lo = float16::from_bits(b).to_float(), hi = float16::from_bits(b + 1).to_float();
    float mid = (lo + hi) / 2;  // exact: f16 has far fewer bits than float
    uint16_t even = (b & 1) ? b + 1 : b;
    ASSERT_EQ(float16(mid).bits(), even) << std::hex << b;
    ASSERT_EQ(float16(std::nextafter(mid, 0.0f)).bits(), b) << std::hex << b;
    ASSERT_EQ(float16(std::nextafter(mid, 1e9f)).bits(), b + 1) << std::hex << b;
    ASSERT_EQ(float16(-mid).bits(), even | 0x8000) << std::hex << b;
  }
}

TEST(float16, overflows_to_infinity_and_underflows_to_zero) {
  EXPECT_EQ(float16(65504.0f).bits(), 0x7BFF);
  EXPECT_EQ(float16(65519.99f).bits(), 0x7BFF);
  EXPECT_EQ(float16(65520.0f).bits(), 0x7C00);  // the tie with 65536 rounds to even: inf
  EXPECT_EQ(float16(1e10f).bits(), 0x7C00);
  EXPECT_EQ(float16(-1e300).bits(), 0xFC00);
  EXPECT_EQ(float16(std::ldexp(1.0f, -25)).bits(), 0x0000);  // half the smallest: even 0
  EXPECT_EQ(float16(std::ldexp(1.0f, -25) * 1.0001f).bits(), 0x0001);
  EXPECT_EQ(float16(std::ldexp(3.0f, -25)).bits(), 0x0002);  // 1.5 ulps: even 2
  EXPECT_EQ(float16(-std::ldexp(1.0f, -30)).bits(), 0x8000);  // -0
  EXPECT_EQ(float16(1e-300).bits(), 0x0000);
  EXPECT_EQ(float16(std::numeric_limits<float>::infinity()).bits(), 0x7C00);
}

TEST(float16, nan_stays_nan) {
  EXPECT_TRUE(float16(std::numeric_limits<float>::quiet_NaN()).is_nan());
  EXPECT_TRUE(float16(float_of(0x7F800001)).is_nan());  // payload only in the low bits
  EXPECT_TRUE(float16(float_of(0xFFC00000)).is_nan());
  EXPECT_TRUE(float16(std::numeric_limits<double>::quiet_NaN()).is_nan());
  EXPECT_FALSE(float16::from_bits(0x7E00) == float16::from_bits(0x7E00));
}

TEST(float16, rounds_doubles_and_integers_once) {
  // 1 + 2^-11 + 2^-40: through float it would be the tie 1 + 2^-11 and round to 1.
  EXPECT_EQ(float16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)).bits(), 0x3C01);
  EXPECT_EQ(float16(1.0 + std::ldexp(1.0, -11)).bits(), 0x3C00);
  EXPECT_EQ(float16(int64_t{2049}).bits(), 0x6800);  // tie between 2048 and 2050: 2048
  EXPECT_EQ(float16(int64_t{2051}).bits(), 0x6802);  // tie: 2052
  EXPECT_EQ(float16(int64_t{-65504}).bits(), 0xFBFF);
  EXPECT_EQ(float16(std::numeric_limits<uint64_t>::max()).bits(), 0x7C00);
  EXPECT_EQ(float16(std::numeric_limits<int64_t>::min()).bits(), 0xFC00);
  EXPECT_EQ(float16(true).bits(), 0x3C00);
  EXPECT_EQ(static_cast<int32_t>(float16(-7.75f)), -7);  // to integers: truncates
  EXPECT_TRUE(static_cast<bool>(float16(0.5f)));
  EXPECT_FALSE(static_cast<bool>(float16(-0.0f)));
}

// ---------------------------------------------------------------------------- bfloat16

TEST(bfloat16, every_bit_pattern_is_the_top_of_a_float_and_round_trips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    bfloat16 h = bfloat16::from_bits(static_cast<uint16_t>(b));
    float f = h.to_float();
    ASSERT_EQ(bits_of(f), b << 16) << std::hex << b;
    ASSERT_EQ(bfloat16(f).bits(), b) << std::hex << b;
    if (!h.is_nan()) {
      ASSERT_EQ(bfloat16(static_cast<double>(f)).bits(), b) << std::hex << b;
    }
  }
}

TEST(bfloat16, known_values) {
  EXPECT_EQ(bfloat16(1.0f).bits(), 0x3F80);
  EXPECT_EQ(bfloat16(-2.0f).bits(), 0xC000);
  EXPECT_EQ(bfloat16(3.14159265f).bits(), 0x4049);  // 3.140625
  EXPECT_EQ(bfloat16(0.1f).bits(), 0x3DCD);         // 0x3DCCCCCD rounds up
  EXPECT_EQ(bfloat16(float_of(0x3F808000)).bits(), 0x3F80);  // tie: even
  EXPECT_EQ(bfloat16(float_of(0x3F818000)).bits(), 0x3F82);  // tie: even (up)
  EXPECT_EQ(bfloat16(float_of(0x3F808001)).bits(), 0x3F81);
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits(), 0x7F80);  // rounds to inf
  EXPECT_EQ(bfloat16(float_of(0x7F7F7FFF)).bits(), 0x7F7F);  // largest finite
  EXPECT_EQ(bfloat16(-std::numeric_limits<float>::infinity()).bits(), 0xFF80);
  EXPECT_EQ(bfloat16(float_of(0x00008000)).bits(), 0x0000);  // subnormal tie: even 0
  EXPECT_EQ(bfloat16(float_of(0x00018000)).bits(), 0x0002);  // subnormal tie: even 2
  EXPECT_EQ(bfloat16(float_of(0x00010001)).bits(), 0x0001);  // subnormals are kept
  EXPECT_EQ(bfloat16(1e300).bits(), 0x7F80);
  EXPECT_EQ(bfloat16(-1e-300).bits(), 0x8000);
}

TEST(bfloat16, nan_stays_nan) {
  EXPECT_EQ(bfloat16(float_of(0x7FC00000)).bits(), 0x7FC0);
  EXPECT_EQ(bfloat16(float_of(0xFFC12345)).bits(), 0xFFC1);  // sign and top payload kept
  EXPECT_TRUE(bfloat16(float_of(0x7F800001)).is_nan());      // would round to inf by bits
  EXPECT_TRUE(bfloat16(float_of(0x7FFFFFFF)).is_nan());      // would carry into the sign
  EXPECT_TRUE(bfloat16(std::nan("")).is_nan());
}

TEST(bfloat16, double_and_float_paths_agree_and_integers_round_once) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    float f = float_of(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(bfloat16(f).bits(), bfloat16(static_cast<double>(f)).bits()) << std::hex << bits_of(f);
    ASSERT_EQ(float16(f).bits(), float16(static_cast<double>(f)).bits()) << std::hex << bits_of(f);
  }
  // 2^62 + 2^54 + 1: through a double it would be the tie 2^62 + 2^54 and round to 2^62.
  int64_t v = (int64_t{1} << 62) + (int64_t{1} << 54) + 1;
  EXPECT_EQ(bfloat16(v).to_float(), std::ldexp(1.0f, 62) + std::ldexp(1.0f, 55));
  EXPECT_EQ(bfloat16(-v).to_float(), -(std::ldexp(1.0f, 62) + std::ldexp(1.0f, 55)));
  EXPECT_EQ(bfloat16(uint64_t{(uint64_t{1} << 63) + (uint64_t{1} << 55) + 1}).to_float(),
            std::ldexp(1.0f, 63) + std::ldexp(1.0f, 56));
  EXPECT_EQ(bfloat16(int64_t{257}).to_float(), 256.0f);  // tie: even
  EXPECT_EQ(bfloat16(int64_t{259}).to_float(), 260.0f);
  EXPECT_EQ(bfloat16(std::numeric_limits<int64_t>::min()).to_float(), -std::ldexp(1.0f, 63));
}

TEST(bfloat16, converts_to_and_from_float16_through_float) {
  EXPECT_EQ(bfloat16(float16(1.5f)).bits(), 0x3FC0);
  EXPECT_EQ(float16(bfloat16::from_bits(0x7F7F)).bits(), 0x7C00);  // 3.4e38: inf in f16
  EXPECT_EQ(float16(bfloat16(0.1f)).to_float(), float16(bfloat16(0.1f).to_float()).to_float());
}

// --------------------------------------------------------------------------- the types

TEST(element_type, f16_and_bf16_are_two_byte_storage_only_reals) {
  for (auto t : {element::f16, element::bf16}) {
    EXPECT_EQ(t.size(), 2u);
    EXPECT_TRUE(t.is_real());
    EXPECT_TRUE(t.is_storage_only());
    EXPECT_FALSE(t.is_integral());
    EXPECT_TRUE(t.is_signed());
  }
  EXPECT_FALSE(element::f32.is_storage_only());
  EXPECT_EQ(element::f16.get_type_name(), "f16");
  EXPECT_EQ(element::bf16.get_type_name(), "bf16");
  EXPECT_STREQ(element::f16.c_type_string(), "float16");
  EXPECT_STREQ(element::bf16.c_type_string(), "bfloat16");
  EXPECT_EQ(element::Type::from_name("float16"), element::f16);
  EXPECT_EQ(element::Type::from_name("half"), element::f16);
  EXPECT_EQ(element::Type::from_name("bfloat16"), element::bf16);
  EXPECT_EQ(element::Type::from_name("bf16"), element::bf16);
  EXPECT_EQ(element::from<float16>(), element::f16);
  EXPECT_EQ(element::from<bfloat16>(), element::bf16);
  std::string msg = test::error_of<std::invalid_argument>(
      [] { element::dispatch(element::bf16, [](auto) {}); });
  EXPECT_TRUE(test::contains(msg, "bf16 is storage-only")) << msg;
  EXPECT_EQ(element::dispatch_storage(element::f16, [](auto tag) { return sizeof(tag); }), 2u);
}

TEST(low_precision, arithmetic_ops_refuse_f16_and_bf16_naming_op_type_and_fix) {
  for (auto t : {element::f16, element::bf16}) {
    auto a = std::make_shared<op::Parameter>(t, Shape{2, 2});
    auto b = std::make_shared<op::Parameter>(t, Shape{2, 2});
    std::string msg = test::error_of<ElementTypeError>([&] { std::make_shared<op::Add>(a, b); });
    EXPECT_TRUE(test::starts_with(msg, "[Add] element type " + t.get_type_name() + " is storage-only"))
        << msg;
    EXPECT_TRUE(test::contains(msg, "ng.convert(x, np.float32)")) << msg;
    // Products take bf16 operands (mixed precision: they give f32), not f16.
    if (t == element::bf16) {
      EXPECT_EQ(std::make_shared<op::Dot>(a, b)->get_element_type(), element::f32);
    } else {
      msg = test::error_of<ElementTypeError>([&] { std::make_shared<op::Dot>(a, b); });
      EXPECT_TRUE(test::starts_with(msg, "[Dot] element type")) << msg;
    }
    msg = test::error_of<ElementTypeError>([&] { std::make_shared<op::Sum>(a, AxisSet{0}); });
    EXPECT_TRUE(test::starts_with(msg, "[Sum] element type")) << msg;
    msg = test::error_of<ElementTypeError>([&] { std::make_shared<op::Relu>(a); });
    EXPECT_TRUE(test::starts_with(msg, "[Relu] element type")) << msg;
    // f16 inputs to an op whose output is boolean are refused too.
    msg = test::error_of<ElementTypeError>([&] { std::make_shared<op::Less>(a, b); });
    EXPECT_TRUE(test::starts_with(msg, "[Less] element type")) << msg;
    msg = test::error_of<ElementTypeError>([&] { std::make_shared<op::AllReduce>(a); });
    EXPECT_TRUE(test::starts_with(msg, "[AllReduce] element type " + t.get_type_name())) << msg;
  }
}

// --------------------------------------------------------------------------- the ops

TEST(low_precision, convert_to_and_from_every_type_on_both_backends) {
  // Exact in f16 and bf16 (8 significant bits at most); integer types get their truncation.
  std::vector<float> xs = {0.0f, -1.5f, 2.0f, 100.5f, -0.0f, 7.0f};
  for (auto low : {element::f16, element::bf16}) {
    SCOPED_TRACE(low.get_type_name());
    for (auto other : {element::boolean, element::f32, element::f64, element::i8, element::i16,
                       element::i32, element::i64, element::u8, element::u16, element::u32,
                       element::u64, element::f16, element::bf16}) {
      SCOPED_TRACE(other.get_type_name());
      // The values as `other` (unsigned: their absolute values), then to `low` and back.
      test::Value in = element::dispatch_storage(other, [&](auto tag) {
        using T = decltype(tag);
        std::vector<T> v;
        for (float x : xs) {
          if (other == element::boolean) v.push_back(static_cast<T>(x != 0));
          else v.push_back(static_cast<T>(other.is_signed() ? x : std::fabs(x)));
        }
        return value_of(Shape{2, 3}, v);
      });
      auto to_low = [low](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], low); };
      test::Value lowered = test::run_op_value(to_low, {in});
      test::Value back = test::run_op_value(
          [other](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], other); },
          {lowered});
      EXPECT_EQ(back.bytes, in.bytes);  // every value above is exact in f16, bf16 and other
      if (other == element::f32) {  // -0.0 keeps its sign (oneDNN's reorder would lose it)
        EXPECT_EQ(bits_of(values_in<float>(back)[4]), 0x80000000u);
      }
    }
  }
}

TEST(low_precision, convert_rounds_like_the_routines_on_both_backends) {
  std::vector<float> xs = {0.1f, 1e-8f, -65520.0f, 65519.0f, 3.0e38f, float_of(0x00018000),
                           float_of(0x3F808000), std::numeric_limits<float>::quiet_NaN(),
                           -std::numeric_limits<float>::infinity(), 1.0f / 3.0f};
  auto in = value_of(Shape{xs.size()}, xs);
  auto f16 = values_in<float16>(test::run_op_value(
      [](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], element::f16); }, {in}));
  auto bf16 = values_in<bfloat16>(test::run_op_value(
      [](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], element::bf16); }, {in}));
  for (size_t i = 0; i < xs.size(); ++i) {
    SCOPED_TRACE(xs[i]);
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(f16[i].is_nan());
      EXPECT_TRUE(bf16[i].is_nan());
    } else {
      EXPECT_EQ(f16[i].bits(), float16(xs[i]).bits());
      EXPECT_EQ(bf16[i].bits(), bfloat16(xs[i]).bits());
    }
  }
  // f64 and i64 sources round once (not through f32).
  std::vector<double> ds = {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)};
  auto h = values_in<float16>(test::run_op_value(
      [](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], element::f16); },
      {value_of(Shape{1}, ds)}));
  EXPECT_EQ(h[0].bits(), 0x3C01);
  std::vector<int64_t> is = {(int64_t{1} << 62) + (int64_t{1} << 54) + 1};
  auto b = values_in<bfloat16>(test::run_op_value(
      [](const OutputVector& a) { return std::make_shared<op::Convert>(a[0], element::bf16); },
      {value_of(Shape{1}, is)}));
  EXPECT_EQ(b[0].to_float(), std::ldexp(1.0f, 62) + std::ldexp(1.0f, 55));
}

TEST(low_precision, data_movement_ops_move_f16_and_bf16_on_both_backends) {
  std::vector<float> xs = {1, 2, 3, 4, 5, 6};
  auto check = [&](auto tag) {
    using T = decltype(tag);
    auto in = value_of(Shape{2, 3}, from_floats<T>(xs));
    auto out = [&](const test::OpFactory& make, std::vector<test::Value> inputs) {
      std::vector<float> r;
      for (T v : values_in<T>(test::run_op_value(make, inputs))) r.push_back(v.to_float());
      return r;
    };
    EXPECT_EQ(out([](const OutputVector& a) {
                return std::make_shared<op::Reshape>(a[0], AxisVector{1, 0}, Shape{3, 2});
              }, {in}),
              (std::vector<float>{1, 4, 2, 5, 3, 6}));
    EXPECT_EQ(out([](const OutputVector& a) {
                return std::make_shared<op::Slice>(a[0], Coordinate{0, 1}, Coordinate{2, 3});
              }, {in}),
              (std::vector<float>{2, 3, 5, 6}));
    EXPECT_EQ(out([](const OutputVector& a) { return std::make_shared<op::Reverse>(a[0], AxisSet{1}); },
                  {in}),
              (std::vector<float>{3, 2, 1, 6, 5, 4}));
    EXPECT_EQ(out([](const OutputVector& a) { return std::make_shared<op::Concat>(OutputVector{a[0], a[0]}, 0); },
                  {in}),
              (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(out([](const OutputVector& a) {
                return std::make_shared<op::Broadcast>(a[0], Shape{2, 2, 3}, AxisSet{0});
              }, {in}),
              (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
    std::vector<char> cond = {1, 0, 1, 0, 1, 0};
    auto other = value_of(Shape{2, 3}, from_floats<T>({-1, -2, -3, -4, -5, -6}));
    EXPECT_EQ(out([](const OutputVector& a) { return std::make_shared<op::Select>(a[0], a[1], a[2]); },
                  {value_of(Shape{2, 3}, cond), in, other}),
              (std::vector<float>{1, -2, 3, -4, 5, -6}));
    auto pad_value = value_of(Shape{}, from_floats<T>({9}));
    EXPECT_EQ(out([](const OutputVector& a) {
                return std::make_shared<op::Pad>(a[0], a[1], CoordinateDiff{0, 1}, CoordinateDiff{0, 0});
              }, {in, pad_value}),
              (std::vector<float>{9, 1, 2, 3, 9, 4, 5, 6}));
  };
  check(float16{});
  check(bfloat16{});
}

TEST(low_precision, constants_serialize_and_round_trip) {
  for (auto t : {element::f16, element::bf16}) {
    SCOPED_TRACE(t.get_type_name());
    auto c = std::make_shared<op::Constant>(t, Shape{4}, std::vector<double>{0.1, -2.5, 65504, 1e-7});
    auto p = std::make_shared<op::Parameter>(t, Shape{4});
    auto f = std::make_shared<Function>(OutputVector{c, p}, ParameterVector{p});
    std::string text = serialize(f);
    EXPECT_TRUE(test::contains(text, t == element::f16 ? "\"float16\"" : "\"bfloat16\"")) << text;
    auto g = deserialize(text);
    auto c2 = std::dynamic_pointer_cast<op::Constant>(g->get_results()[0]->input_value(0).get_node_shared_ptr());
    ASSERT_TRUE(c2);
    EXPECT_EQ(c2->get_element_type(), t);
    EXPECT_EQ(std::memcmp(c2->get_data_ptr(), c->get_data_ptr(), c->byte_size()), 0);
    EXPECT_EQ(c->get_vector<double>()[1], -2.5);
  }
}
