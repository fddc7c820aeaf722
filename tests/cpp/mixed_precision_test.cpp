// Mixed precision (bf16): the type rules of the products that take bf16 operands, the
// INTERPRETER's emulation, and the CPU pass (casts one per value, the products' results
// against the INTERPRETER's). The CPU cases skip where oneDNN has no bf16 instructions; the
// Python suite (test_mixed_precision.py) covers the fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <cstring>
#include <dnnl.hpp>
#include <limits>

#include "ngraph/ops.hpp"
#include "ngraph/pass/mixed_precision.hpp"
#include "ngraph/runtime/cpu/block_cast.hpp"
#include "ngraph/runtime/cpu/cpu_features.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/filters_bf16.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using runtime::Precision;
using runtime::cpu::CompileOptions;

namespace {

std::shared_ptr<op::Parameter> param(const Shape& s, element::Type t = element::f32) {
  return std::make_shared<op::Parameter>(t, s);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

float bf16_round(float x) { return static_cast<float>(bfloat16(x)); }

}  // namespace

TEST(mixed_precision, products_take_bf16_operands_and_give_f32) {
  auto a = param({2, 3}, element::bf16), b = param({3, 4}, element::bf16);
  EXPECT_EQ(std::make_shared<op::Dot>(a, b)->get_element_type(), element::f32);
  EXPECT_EQ(std::make_shared<op::MatMul>(a, b)->get_element_type(), element::f32);
  auto x = param({1, 2, 5, 5}, element::bf16), w = param({4, 2, 3, 3}, element::bf16);
  EXPECT_EQ(std::make_shared<op::Convolution>(x, w)->get_element_type(), element::f32);
  // Both operands bf16, or neither; other ops still refuse bf16, naming the op.
  EXPECT_THROW(std::make_shared<op::MatMul>(a, param({3, 4})), ElementTypeError);
  std::string e = test::error_of<std::exception>([&] { std::make_shared<op::Add>(a, a); });
  EXPECT_TRUE(test::contains(e, "[Add] element type bf16 is storage-only")) << e;
}

TEST(mixed_precision, backends_name_the_precision) {
  EXPECT_EQ(runtime::precision_from_name("bf16"), Precision::bf16);
  std::string e = test::error_of<std::exception>([] { (void)runtime::precision_from_name("fp8"); });
  EXPECT_TRUE(test::contains(e, "precision must be \"f32\" or \"bf16\", got \"fp8\"")) << e;
}

// The reference: the product of the operands rounded to bf16, summed in double.
TEST(mixed_precision, interpreter_rounds_the_operands_to_bf16) {
  auto a = param({3, 5}), b = param({5, 2});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Dot>(a, b)}, ParameterVector{a, b});
  auto av = random_floats(15, 1), bv = random_floats(10, 2);
  auto backend = test::interpreter_backend();
  auto got = test::to_vector<float>(test::run_executable(
      *backend, *backend->compile(f, Precision::bf16),
      {test::make_value(Shape{3, 5}, av), test::make_value(Shape{5, 2}, bv)})[0]);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 2; ++j) {
      double sum = 0;
      for (size_t k = 0; k < 5; ++k) sum += double(bf16_round(av[i * 5 + k])) * bf16_round(bv[k * 2 + j]);
      EXPECT_FLOAT_EQ(got[i * 2 + j], static_cast<float>(sum));
    }
}

// A convolution, its data gradient's product and a matmul sharing an operand: each f32 value
// read by products is cast once, and the results match the INTERPRETER's bf16 emulation.
TEST(mixed_precision, cpu_casts_each_value_once_and_matches_the_reference) {
  if (!runtime::cpu::bf16_native()) GTEST_SKIP() << "oneDNN has no bf16 instructions here";
  auto x = param({2, 4, 6, 6}), w = param({8, 4, 3, 3}), dy = param({2, 8, 6, 6});
  auto y = std::make_shared<op::Convolution>(x, w, Strides{1, 1}, Strides{1, 1}, CoordinateDiff{1, 1},
                                             CoordinateDiff{1, 1});
  auto dx = std::make_shared<op::ConvolutionBackpropData>(x->get_shape(), w, dy, y->get_window());
  auto dw = std::make_shared<op::ConvolutionBackpropFilters>(x, w->get_shape(), dy, y->get_window());
  auto f = std::make_shared<Function>(OutputVector{y, dx, dw}, ParameterVector{x, w, dy});
  std::vector<test::Value> in{test::make_value(x->get_shape(), random_floats(shape_size(x->get_shape()), 3)),
                              test::make_value(w->get_shape(), random_floats(shape_size(w->get_shape()), 4)),
                              test::make_value(dy->get_shape(), random_floats(shape_size(dy->get_shape()), 5))};
  CompileOptions options;
  options.precision = Precision::bf16;
  std::vector<std::string> schedule;
  auto got = test::run_compiled(f, in, options, &schedule);
  auto backend = test::interpreter_backend();
  auto ref = test::run_executable(*backend, *backend->compile(f, Precision::bf16), in);
  // x, w and dy each cast once (w maybe once per layout its two readers want).
  size_t casts = test::count_steps(schedule, "CPUPrecisionCast");
  EXPECT_GE(casts, 3u) << ::testing::PrintToString(schedule);
  EXPECT_LE(casts, 4u) << ::testing::PrintToString(schedule);
  for (size_t r = 0; r < 3; ++r) {
    auto g = test::to_vector<float>(got[r]), e = test::to_vector<float>(ref[r]);
    float scale = 0;
    for (float v : e) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i] / scale, e[i] / scale, 2e-5) << r << " " << i;
  }
}

// bf16 activations (Node::bf16_sets): a product's output and a batch norm's data and output
// typed bf16 where stored, the statistics f32; and the pass keeps nothing in bf16 that a
// result (or any op without a set) reads.
TEST(mixed_precision, stored_bf16_sets_type_the_values_and_results_stay_f32) {
  auto x = param({2, 4, 6, 6}, element::bf16), w = param({8, 4, 3, 3}, element::bf16);
  auto gamma = param({8}), beta = param({8});
  auto y = std::make_shared<op::Convolution>(x, w);
  auto bn = std::make_shared<op::BatchNormTraining>(y, gamma, beta, 1e-5);
  auto unset = std::make_shared<op::BatchNormTraining>(y, gamma, beta, 1e-5);
  ASSERT_EQ(y->bf16_sets().size(), 1u);
  ASSERT_EQ(bn->bf16_sets().size(), 1u);
  EXPECT_EQ(bn->bf16_sets()[0].inputs, std::vector<size_t>{op::BatchNormBase::INPUT_DATA});
  EXPECT_THROW(bn->set_bf16_stored({1}), NodeValidationFailure);
  y->set_bf16_stored({0});
  y->validate_and_infer_types();
  EXPECT_EQ(y->get_element_type(), element::bf16);
  EXPECT_THROW(unset->validate_and_infer_types(), ElementTypeError);  // bf16 data, no set
  bn->set_bf16_stored({0});
  bn->validate_and_infer_types();
  EXPECT_EQ(bn->get_output_element_type(0), element::bf16);
  EXPECT_EQ(bn->get_output_element_type(1), element::f32);
  EXPECT_EQ(bn->get_output_element_type(2), element::f32);
  // As built (f32 output), with the normalized value a result: nothing is retyped.
  auto y2 = std::make_shared<op::Convolution>(x, w);
  auto bn2 = std::make_shared<op::BatchNormTraining>(y2, gamma, beta, 1e-5);
  Function f(OutputVector{bn2->output(0), bn2->output(1)}, ParameterVector{x, w, gamma, beta});
  auto all = [](const Node&, const Node::Bf16Set&) { return true; };
  EXPECT_EQ(pass::store_bf16(f, all, [](const Node&) { return false; }), 0u);
  EXPECT_EQ(y2->get_element_type(), element::f32);
  EXPECT_EQ(bn2->get_output_element_type(0), element::f32);
}

// The weights cast between two layouts that tile alike (block_cast.hpp) gives oneDNN's
// reorder's bits, special values included.
TEST(mixed_precision, block_cast_matches_the_dnnl_reorder_bitwise) {
  if (!runtime::cpu::bf16_native()) GTEST_SKIP() << "oneDNN has no bf16 instructions here";
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 1e-40f, -1e-40f, -0.0f,
                            1.00390625f /* a tie: to even */, 1.01171875f /* a tie: up */, 3.4e38f};
  // ResNet-50's pairs (forward ABcd8b16a2b; backward-data ABcd8a16b2a for 3x3, BAcd8a16b2a for
  // 1x1), also where the channels are not multiples of 16 (padded blocks).
  for (const dnnl::memory::dims& dims : {dnnl::memory::dims{64, 48, 3, 3}, dnnl::memory::dims{40, 20, 3, 3},
                                         dnnl::memory::dims{24, 72, 1, 1}, dnnl::memory::dims{16, 16, 1, 1}}) {
    auto values = random_floats(static_cast<size_t>(dims[0] * dims[1] * dims[2] * dims[3]), 7);
    for (size_t k = 0; k < std::size(specials); ++k) values[k * 97 % values.size()] = specials[k];
    dnnl::memory::desc src(dims, dt::f32, tag::ABcd16b16a);
    for (tag to : {tag::ABcd8b16a2b, tag::ABcd8a16b2a, tag::BAcd8a16b2a, tag::ABcd16a16b}) {
      dnnl::memory::desc dst(dims, dt::bf16, to);
      dnnl::memory plain({dims, dt::f32, tag::abcd}, runtime::cpu::dnnl_engine(), values.data());
      dnnl::memory blocked(src, runtime::cpu::dnnl_engine()), expected(dst, runtime::cpu::dnnl_engine()),
          got(dst, runtime::cpu::dnnl_engine());
      dnnl::reorder(plain, blocked).execute(runtime::cpu::dnnl_stream(), plain, blocked);
      dnnl::reorder(blocked, expected).execute(runtime::cpu::dnnl_stream(), blocked, expected);
      runtime::cpu::dnnl_stream().wait();
      for (bool in_registers : {true, false}) {  // the pair transpose's two paths
        auto kernel = runtime::cpu::block_permuting_cast(src, dst, in_registers);
        ASSERT_TRUE(kernel.has_value());
        std::memset(got.get_data_handle(), 0xff, dst.get_size());
        const void* in[] = {blocked.get_data_handle()};
        void* out[] = {got.get_data_handle()};
        (*kernel)(in, out);
        EXPECT_EQ(std::memcmp(got.get_data_handle(), expected.get_data_handle(), dst.get_size()), 0)
            << "layout " << static_cast<int>(to) << " dims " << ::testing::PrintToString(dims) << " " << in_registers;
      }
    }
  }
  const dnnl::memory::dims dims{64, 48, 3, 3};
  dnnl::memory::desc src(dims, dt::f32, tag::ABcd16b16a);
  // One layout (no permutation) and layouts that do not tile alike are left to oneDNN.
  EXPECT_FALSE(runtime::cpu::block_permuting_cast(src, {dims, dt::bf16, tag::ABcd16b16a}).has_value());
  EXPECT_FALSE(runtime::cpu::block_permuting_cast(src, {dims, dt::bf16, tag::aBcd16b}).has_value());
}

// ResNet-50's weight casts (its 64x64 bf16 step: each f32 ABcd16b16a weight to the forward's
// ABcd8b16a2b and the backward-data's ABcd8a16b2a / BAcd8a16b2a), timed: the kernel against
// its per-pair path (transpose_in_registers false), oneDNN's reorder and oneDNN's conversion
// without permutation (the memory's speed), interleaved, medians.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*block_cast_speed*'.
TEST(mixed_precision, DISABLED_block_cast_speed) {
  if (!runtime::cpu::bf16_native()) GTEST_SKIP() << "oneDNN has no bf16 instructions here";
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  struct Conv { int64_t o, i, k, count; };
  const Conv convs[] = {{64, 64, 1, 1},   {64, 64, 3, 3},    {256, 64, 1, 4},   {64, 256, 1, 2},
                        {128, 256, 1, 1}, {128, 128, 3, 4},  {512, 128, 1, 4},  {256, 512, 1, 1},
                        {128, 512, 1, 3}, {256, 256, 3, 6},  {1024, 256, 1, 6}, {512, 1024, 1, 1},
                        {256, 1024, 1, 5}, {512, 512, 3, 3}, {2048, 512, 1, 3}, {512, 2048, 1, 2},
                        {512, 256, 1, 1}};
  struct Case { std::vector<dnnl::memory> src, dst; std::vector<runtime::cpu::Kernel> fast, pairs; std::vector<dnnl::reorder> onednn, same; std::vector<dnnl::memory> plain; };
  Case fwd, bwd;
  size_t weights = 0;
  for (const Conv& c : convs)
    for (int64_t n = 0; n < c.count; ++n) {
      dnnl::memory::dims dims{c.o, c.i, c.k, c.k};
      weights += static_cast<size_t>(c.o * c.i * c.k * c.k);
      dnnl::memory::desc src(dims, dt::f32, tag::ABcd16b16a);
      for (Case* cs : {&fwd, &bwd}) {
        dnnl::memory::desc dst(dims, dt::bf16, cs == &fwd ? tag::ABcd8b16a2b : c.k == 1 ? tag::BAcd8a16b2a : tag::ABcd8a16b2a);
        cs->src.emplace_back(src, runtime::cpu::dnnl_engine());
        cs->dst.emplace_back(dst, runtime::cpu::dnnl_engine());
        auto v = random_floats(src.get_size() / 4, 9);
        std::memcpy(cs->src.back().get_data_handle(), v.data(), src.get_size());
        cs->fast.push_back(*runtime::cpu::block_permuting_cast(src, dst));
        cs->pairs.push_back(*runtime::cpu::block_permuting_cast(src, dst, false));
        cs->onednn.emplace_back(dnnl::reorder::primitive_desc(runtime::cpu::dnnl_engine(), src, runtime::cpu::dnnl_engine(), dst));
        dnnl::memory::desc same(dims, dt::bf16, tag::ABcd16b16a);
        cs->plain.emplace_back(same, runtime::cpu::dnnl_engine());
        cs->same.emplace_back(dnnl::reorder::primitive_desc(runtime::cpu::dnnl_engine(), src, runtime::cpu::dnnl_engine(), same));
      }
    }
  auto time = [](Case& cs, int which) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < cs.src.size(); ++k) {
      const void* in[] = {cs.src[k].get_data_handle()};
      void* out[] = {cs.dst[k].get_data_handle()};
      if (which == 0) cs.fast[k](in, out);
      else if (which == 1) cs.pairs[k](in, out);
      else if (which == 2) cs.onednn[k].execute(runtime::cpu::dnnl_stream(), cs.src[k], cs.dst[k]);
      else cs.same[k].execute(runtime::cpu::dnnl_stream(), cs.src[k], cs.plain[k]);
    }
    runtime::cpu::dnnl_stream().wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const char* names[] = {"kernel", "per-pair path", "oneDNN reorder", "oneDNN, no permutation (memory speed)"};
  for (Case* cs : {&fwd, &bwd}) {
    std::vector<double> ms[4];
    for (int round = 0; round < 21; ++round)
      for (int which = 0; which < 4; ++which) ms[which].push_back(time(*cs, which));
    for (int which = 0; which < 4; ++which) {
      std::sort(ms[which].begin(), ms[which].end());
      std::printf("%s %zu casts (%.1f M weights): %s %.2f ms (%.1f GB/s read+write)\n", cs == &fwd ? "forward" : "backward-data",
                  cs->src.size(), weights / 1e6, names[which], ms[which][10], weights * 6 / ms[which][10] / 1e6);
    }
  }
}

namespace {

// A bf16 2-D convolution's filter gradient by oneDNN's primitive: data and delta (random,
// bf16, aBcd16b), the gradient (f32, ABcd16b16a) into `expected`.
struct FilterCase {
  dnnl::memory data, delta, expected;
};

FilterCase dnnl_filter_gradient(const runtime::cpu::FilterProblem& p) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto& engine = runtime::cpu::dnnl_engine();
  dnnl::memory::desc data({p.n, p.ic, p.ih, p.iw}, dt::bf16, tag::aBcd16b), delta({p.n, p.oc, p.oh, p.ow}, dt::bf16, tag::aBcd16b),
      filters({p.oc, p.ic, p.kh, p.kw}, dt::f32, tag::ABcd16b16a), filters16({p.oc, p.ic, p.kh, p.kw}, dt::bf16, tag::any);
  const dnnl::memory::dims strides{p.sh, p.sw}, pad_l{p.ph, p.pw},
      pad_r{(p.oh - 1) * p.sh + p.kh - p.ih - p.ph, (p.ow - 1) * p.sw + p.kw - p.iw - p.pw};
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, data, filters16,
                                     delta, strides, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc hint(fd, engine);
  dnnl::convolution_backward_weights::desc bd(dnnl::algorithm::convolution_direct, data, filters, delta, strides, pad_l, pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(bd, engine, hint);
  FilterCase c{dnnl::memory(data, engine), dnnl::memory(delta, engine), dnnl::memory(filters, engine)};
  unsigned seed = static_cast<unsigned>(p.oc + p.ih);
  for (dnnl::memory* m : {&c.data, &c.delta}) {
    auto values = random_floats(m->get_desc().get_size() / 2, ++seed);
    auto* bits = static_cast<uint16_t*>(m->get_data_handle());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = bfloat16(values[i]).bits();
  }
  dnnl::convolution_backward_weights(pd).execute(
      runtime::cpu::dnnl_stream(),
      {{DNNL_ARG_SRC, c.data}, {DNNL_ARG_DIFF_DST, c.delta}, {DNNL_ARG_DIFF_WEIGHTS, c.expected}});
  runtime::cpu::dnnl_stream().wait();
  return c;
}

}  // namespace

// The short-reduction bf16 filter gradient (filters_bf16.hpp) against oneDNN's: the same
// exact bf16 products summed in f32 in another order, so equal up to f32 rounding (norm-wise
// 1e-6): ResNet-50's last-stage layers at 64x64, strides with padding on either side, odd
// reductions (a zero pair completes them), one and several channel blocks.
TEST(mixed_precision, short_reduction_filter_gradient_matches_dnnl) {
  if (!runtime::cpu::bf16_native()) GTEST_SKIP() << "oneDNN has no bf16 instructions here";
  using P = runtime::cpu::FilterProblem;
  //            n  ic  ih iw  oc  oh ow kh kw sh sw ph pw
  for (const P& p : {P{8, 512, 4, 4, 512, 2, 2, 3, 3, 2, 2, 1, 1}, P{8, 512, 2, 2, 64, 2, 2, 3, 3, 1, 1, 1, 1},
                     P{8, 1024, 4, 4, 96, 2, 2, 1, 1, 2, 2, 0, 0}, P{3, 32, 5, 5, 48, 3, 3, 3, 3, 2, 2, 1, 1},
                     P{1, 16, 7, 5, 16, 3, 3, 3, 3, 2, 2, 0, 1}, P{5, 48, 3, 3, 32, 3, 3, 1, 1, 1, 1, 0, 0}}) {
    FilterCase c = dnnl_filter_gradient(p);
    auto kernel = runtime::cpu::filters_bf16(p, c.data.get_desc(), c.delta.get_desc(), c.expected.get_desc());
    ASSERT_TRUE(kernel.has_value()) << p.n << " " << p.ic << " " << p.oc;
    size_t n = c.expected.get_desc().get_size() / sizeof(float);
    std::vector<float> got(n, std::numeric_limits<float>::quiet_NaN());
    const void* in[] = {c.data.get_data_handle(), c.delta.get_data_handle()};
    void* out[] = {got.data()};
    (*kernel)(in, out);
    const auto* want = static_cast<const float*>(c.expected.get_data_handle());
    double err = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    EXPECT_GT(norm, 0);
    EXPECT_LE(std::sqrt(err), 1e-6 * std::sqrt(norm)) << p.n << " " << p.ic << " " << p.oc << " " << p.sh;
  }
  // Longer reductions, channels off the blocks, other layouts: left to oneDNN.
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  P p{8, 64, 4, 4, 64, 4, 4, 1, 1, 1, 1, 0, 0};
  dnnl::memory::desc data({8, 64, 4, 4}, dt::bf16, tag::aBcd16b), delta({8, 64, 4, 4}, dt::bf16, tag::aBcd16b),
      filters({64, 64, 1, 1}, dt::f32, tag::ABcd16b16a);
  EXPECT_FALSE(runtime::cpu::filters_bf16(p, data, delta, filters).has_value());  // 128 > 64
  EXPECT_TRUE(runtime::cpu::filters_bf16(p, data, delta, filters, 128).has_value());
  EXPECT_FALSE(runtime::cpu::filters_bf16(p, {{8, 64, 4, 4}, dt::bf16, tag::acdb}, delta, filters, 128).has_value());
  EXPECT_FALSE(runtime::cpu::filters_bf16(p, data, delta, {{64, 64, 1, 1}, dt::f32, tag::abcd}, 128).has_value());
  P off{8, 24, 2, 2, 64, 2, 2, 1, 1, 1, 1, 0, 0};
  EXPECT_FALSE(runtime::cpu::filters_bf16(off, {{8, 24, 2, 2}, dt::bf16, tag::aBcd16b},
                                          {{8, 64, 2, 2}, dt::bf16, tag::aBcd16b},
                                          {{64, 24, 1, 1}, dt::f32, tag::ABcd16b16a})
                   .has_value());
}

namespace {

// ResNet-50's convolution weights (out, in, kernel, count) at any image size.
struct ResNetConv {
  int64_t o, i, k, count;
};
const ResNetConv resnet50_convs[] = {
    {64, 64, 1, 1},    {64, 64, 3, 3},     {256, 64, 1, 4},   {64, 256, 1, 2},  {128, 256, 1, 1}, {128, 128, 3, 4},
    {512, 128, 1, 4},  {256, 512, 1, 1},   {128, 512, 1, 3},  {256, 256, 3, 6}, {1024, 256, 1, 6}, {512, 1024, 1, 1},
    {256, 1024, 1, 5}, {512, 512, 3, 3},   {2048, 512, 1, 3}, {512, 2048, 1, 2}, {512, 256, 1, 1}};

// The forward's and the backward data's bf16 layouts of a weight.
std::pair<dnnl::memory::desc, dnnl::memory::desc> weight_layouts(const dnnl::memory::dims& dims) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  return {{dims, dt::bf16, tag::ABcd8b16a2b}, {dims, dt::bf16, dims[2] == 1 ? tag::BAcd8a16b2a : tag::ABcd8a16b2a}};
}

}  // namespace

// The pair kernel (both casts of a weight, read once; the second output stored non-temporally
// where it is 64-byte aligned) gives the two casts' bits, aligned or not.
TEST(mixed_precision, block_cast_pair_matches_the_two_casts_bitwise) {
  if (!runtime::cpu::bf16_native()) GTEST_SKIP() << "oneDNN has no bf16 instructions here";
  using dt = dnnl::memory::data_type;
  for (const dnnl::memory::dims& dims : {dnnl::memory::dims{64, 48, 3, 3}, dnnl::memory::dims{40, 20, 3, 3},
                                         dnnl::memory::dims{24, 72, 1, 1}, dnnl::memory::dims{512, 512, 3, 3},
                                         dnnl::memory::dims{2048, 512, 1, 1}}) {
    dnnl::memory::desc src(dims, dt::f32, dnnl::memory::format_tag::ABcd16b16a);
    auto [fwd, bwd] = weight_layouts(dims);
    auto values = random_floats(src.get_size() / 4, 11);
    values[5] = std::numeric_limits<float>::quiet_NaN();
    values[17] = 1e-40f;
    auto one = *runtime::cpu::block_permuting_cast(src, fwd), other = *runtime::cpu::block_permuting_cast(src, bwd);
    auto pair = runtime::cpu::block_permuting_cast_pair(src, fwd, bwd);
    ASSERT_TRUE(pair.has_value());
    std::vector<uint16_t> want0(fwd.get_size() / 2), want1(bwd.get_size() / 2), got0(want0.size() + 64),
        got1(want1.size() + 64, 0xffff);
    const void* in[] = {values.data()};
    void* out0[] = {want0.data()};
    void* out1[] = {want1.data()};
    one(in, out0);
    other(in, out1);
    for (size_t shift : {size_t(0), size_t(1)}) {  // 2-byte shift: not 64-byte aligned
      auto* g1 = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(got1.data()) + 63) / 64 * 64) + shift;
      void* out[] = {got0.data(), g1};
      (*pair)(in, out);
      EXPECT_EQ(std::memcmp(got0.data(), want0.data(), fwd.get_size()), 0) << ::testing::PrintToString(dims);
      EXPECT_EQ(std::memcmp(g1, want1.data(), bwd.get_size()), 0) << ::testing::PrintToString(dims) << shift;
    }
  }
}

// The pair kernel against the two casts over ResNet-50's weights (20.8 M each way), interleaved,
// medians of 15. Run with --gtest_also_run_disabled_tests --gtest_filter='*block_cast_pair_speed*'.
TEST(mixed_precision, DISABLED_block_cast_pair_speed) {
  if (!runtime::cpu::bf16_native()) GTEST_SKIP() << "oneDNN has no bf16 instructions here";
  using dt = dnnl::memory::data_type;
  std::vector<dnnl::memory> src, fwd, bwd;
  std::vector<runtime::cpu::Kernel> one, other, pair;
  for (const ResNetConv& c : resnet50_convs)
    for (int64_t n = 0; n < c.count; ++n) {
      dnnl::memory::dims dims{c.o, c.i, c.k, c.k};
      dnnl::memory::desc s(dims, dt::f32, dnnl::memory::format_tag::ABcd16b16a);
      auto [f, b] = weight_layouts(dims);
      src.emplace_back(s, runtime::cpu::dnnl_engine());
      fwd.emplace_back(f, runtime::cpu::dnnl_engine());
      bwd.emplace_back(b, runtime::cpu::dnnl_engine());
      auto v = random_floats(s.get_size() / 4, 9);
      std::memcpy(src.back().get_data_handle(), v.data(), s.get_size());
      one.push_back(*runtime::cpu::block_permuting_cast(s, f));
      other.push_back(*runtime::cpu::block_permuting_cast(s, b));
      pair.push_back(*runtime::cpu::block_permuting_cast_pair(s, f, b));
    }
  auto time = [&](bool paired) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < src.size(); ++k) {
      const void* in[] = {src[k].get_data_handle()};
      void* out[] = {fwd[k].get_data_handle(), bwd[k].get_data_handle()};
      void* out1[] = {bwd[k].get_data_handle()};
      if (paired) pair[k](in, out);
      else {
        one[k](in, out);
        other[k](in, out1);
      }
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> ms[2];
  for (int round = 0; round < 15; ++round)
    for (int paired = 0; paired < 2; ++paired) ms[paired].push_back(time(paired == 1));
  for (auto& m : ms) std::sort(m.begin(), m.end());
  std::printf("ResNet-50's weight casts, both layouts: two casts %.2f ms, the pair kernel %.2f ms\n", ms[0][7], ms[1][7]);
}
