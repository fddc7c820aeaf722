// The INTERPRETER backend: registration, a kernel for every op, the semantics the CPU backend
// exposes (results, variables and their updates, multi-output ops, collectives, errors), and a
// few ops against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>

#include "ngraph/runtime/interpreter/int_backend.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using test::contains;
using test::make_value;
using test::to_vector;
using test::Value;

namespace {

std::shared_ptr<runtime::Backend> interpreter() { return test::interpreter_backend(); }

std::vector<Value> run(const std::shared_ptr<runtime::Executable>& exe, const std::vector<Value>& inputs) {
  return test::run_executable(*interpreter(), *exe, inputs);
}

std::vector<Value> run(const std::shared_ptr<Function>& f, const std::vector<Value>& inputs) {
  return test::run_on_interpreter(f, inputs);
}

std::shared_ptr<op::Parameter> param(element::Type t, const Shape& s) {
  return std::make_shared<op::Parameter>(t, s);
}

}  // namespace

TEST(interpreter, is_registered_beside_cpu) {
  auto devices = runtime::Backend::get_registered_devices();
  EXPECT_NE(std::find(devices.begin(), devices.end(), "INTERPRETER"), devices.end());
  EXPECT_NE(std::find(devices.begin(), devices.end(), "CPU"), devices.end());
  EXPECT_TRUE(std::dynamic_pointer_cast<runtime::interpreter::INTBackend>(interpreter()));
  std::string msg = test::error_of<std::invalid_argument>([] { runtime::Backend::create("interp"); });
  EXPECT_TRUE(contains(msg, "unknown backend 'interp'")) << msg;
  EXPECT_TRUE(contains(msg, "INTERPRETER")) << msg;
}

TEST(interpreter, every_op_has_a_kernel) {
  std::vector<std::string> missing;
  for (const auto& op : OpRegistry::get().names())
    if (!runtime::interpreter::is_structural_op(op) &&
        !runtime::interpreter::KernelRegistry::get().contains(op))
      missing.push_back(op);
  EXPECT_TRUE(missing.empty()) << "ops without an INTERPRETER kernel: " << join(missing, ", ");
}

TEST(interpreter, every_kernel_belongs_to_a_core_op) {
  for (const auto& name : runtime::interpreter::KernelRegistry::get().names()) {
    EXPECT_TRUE(OpRegistry::get().contains(name)) << "kernel for unknown op " << name;
    EXPECT_FALSE(runtime::interpreter::is_structural_op(name)) << "kernel for structural op " << name;
  }
}

TEST(interpreter, runs_every_element_type_of_the_core) {
  const auto& types = runtime::interpreter::supported_element_types();
  for (const char* name : {"boolean", "f32", "f64", "i32", "i64"})
    EXPECT_NE(std::find(types.begin(), types.end(), element::Type::from_name(name)), types.end()) << name;
}

TEST(interpreter, numpy_broadcasting_add) {
  auto a = param(element::f32, {2, 3}), b = param(element::f32, {3});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Add>(a, b, "numpy")},
                                      ParameterVector{a, b});
  auto out = run(f, {make_value<float>({2, 3}, {1, 2, 3, 4, 5, 6}), make_value<float>({3}, {10, 20, 30})});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(interpreter, integer_division_floors_and_fails_on_zero) {
  auto a = param(element::i32, {4}), b = param(element::i32, {4});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Divide>(a, b)}, ParameterVector{a, b});
  auto exe = interpreter()->compile(f);
  auto out = run(exe, {make_value<int32_t>({4}, {7, -7, 7, INT32_MIN}), make_value<int32_t>({4}, {2, 2, -2, -1})});
  EXPECT_EQ(to_vector<int32_t>(out[0]), (std::vector<int32_t>{3, -4, -4, INT32_MIN}));
  std::string msg = test::error_of<std::domain_error>(
      [&] { run(exe, {make_value<int32_t>({4}, {1, 2, 3, 4}), make_value<int32_t>({4}, {1, 0, 1, 1})}); });
  EXPECT_TRUE(contains(msg, "[Divide] integer division by zero")) << msg;
}

// Groups, window dilation, data dilation and negative padding in one 1-D convolution,
// against the definition worked by hand.
TEST(interpreter, convolution_window) {
  auto x = param(element::f64, {1, 2, 5}), w = param(element::f64, {2, 1, 2});
  // Data dilation 2: [a0 0 a1 0 a2 0 a3 0 a4]; padding -1 below, +1 above: [0 a1 0 a2 0 a3 0
  // a4 0]; filter dilation 2, stride 3: outputs at 0, 3, 6 = f0*d[i] + f1*d[i+2].
  auto conv = std::make_shared<op::Convolution>(x, w, Strides{3}, Strides{2}, CoordinateDiff{-1},
                                                CoordinateDiff{1}, Strides{2}, 2);
  ASSERT_EQ(conv->get_shape(), (Shape{1, 2, 3}));
  auto f = std::make_shared<Function>(OutputVector{conv}, ParameterVector{x, w});
  auto out = run(f, {make_value<double>({1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50}),
                     make_value<double>({2, 1, 2}, {1, 100, 2, 200})});
  // Channel 0 dilated and padded: [0 2 0 3 0 4 0 5 0]; channel 1: [0 20 0 30 0 40 0 50 0].
  EXPECT_EQ(to_vector<double>(out[0]), (std::vector<double>{0, 3 + 100 * 4, 0, 0, 2 * 30 + 200 * 40, 0}));
}

TEST(interpreter, variables_update_after_the_call_and_not_after_a_failure) {
  auto state = std::make_shared<VariableState>(element::i64, Shape{2}, std::vector<int64_t>{5, 7}.data());
  auto v = std::make_shared<op::Variable>(state);
  auto d = param(element::i64, {2});
  // Result: v before the update; update: v / d (fails on a zero divisor).
  auto assign = std::make_shared<op::Assign>(v, std::make_shared<op::Divide>(v, d));
  auto f = std::make_shared<Function>(OutputVector{v, d}, NodeVector{assign}, ParameterVector{d});
  auto exe = interpreter()->compile(f);
  auto out = run(exe, {make_value<int64_t>({2}, {2, 7})});
  EXPECT_EQ(to_vector<int64_t>(out[0]), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(to_vector<int64_t>(out[1]), (std::vector<int64_t>{2, 7}));  // a result that is a parameter
  std::vector<int64_t> now(2);
  state->get(now.data());
  EXPECT_EQ(now, (std::vector<int64_t>{2, 1}));
  EXPECT_THROW(run(exe, {make_value<int64_t>({2}, {1, 0})}), std::domain_error);
  state->get(now.data());
  EXPECT_EQ(now, (std::vector<int64_t>{2, 1}));
}

TEST(interpreter, swapped_variables_read_the_old_values) {
  auto sa = std::make_shared<VariableState>(element::f32, Shape{1}, std::vector<float>{1}.data());
  auto sb = std::make_shared<VariableState>(element::f32, Shape{1}, std::vector<float>{2}.data());
  auto a = std::make_shared<op::Variable>(sa), b = std::make_shared<op::Variable>(sb);
  auto f = std::make_shared<Function>(OutputVector{}, NodeVector{std::make_shared<op::Assign>(a, b),
                                                                  std::make_shared<op::Assign>(b, a)},
                                      ParameterVector{});
  run(f, {});
  float x = 0, y = 0;
  sa->get(&x);
  sb->get(&y);
  EXPECT_EQ(x, 2);
  EXPECT_EQ(y, 1);
}

TEST(interpreter, multi_output_batch_norm_and_get_output_element) {
  auto x = param(element::f64, {2, 2}), g = param(element::f64, {2}), b = param(element::f64, {2});
  auto bn = std::make_shared<op::BatchNormTraining>(x, g, b, 0.0);
  auto mean = std::make_shared<op::GetOutputElement>(bn, 1);
  auto f = std::make_shared<Function>(OutputVector{bn->output(0), mean, bn->output(2)}, ParameterVector{x, g, b});
  auto out = run(f, {make_value<double>({2, 2}, {1, 10, 3, 30}), make_value<double>({2}, {1, 2}),
                     make_value<double>({2}, {0, 1})});
  EXPECT_EQ(to_vector<double>(out[0]), (std::vector<double>{-1, -1, 1, 3}));
  EXPECT_EQ(to_vector<double>(out[1]), (std::vector<double>{2, 20}));
  EXPECT_EQ(to_vector<double>(out[2]), (std::vector<double>{1, 100}));
}

TEST(interpreter, collectives_on_one_rank) {
  auto x = param(element::f32, {2, 2});
  auto comm = std::make_shared<distributed::LocalCommunicator>();
  auto f = std::make_shared<Function>(
      OutputVector{std::make_shared<op::AllReduce>(x, distributed::ReduceOp::mean, comm),
                   std::make_shared<op::AllGather>(x, 1, comm),
                   std::make_shared<op::ReduceScatter>(x, distributed::ReduceOp::sum, 1, comm),
                   std::make_shared<op::BroadcastDistributed>(x, 0, comm)},
      ParameterVector{x});
  auto in = make_value<float>({2, 2}, {1, 2, 3, 4});
  for (const auto& v : run(f, {in})) EXPECT_EQ(to_vector<float>(v), to_vector<float>(in));
}

TEST(interpreter, wrong_arguments_fail_as_on_cpu) {
  auto a = param(element::f32, {2});
  a->set_friendly_name("a");  // unnamed nodes get a new name in each compiled copy
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Negative>(a)}, ParameterVector{a});
  auto check = [&](const std::shared_ptr<runtime::Backend>& backend) {
    auto exe = backend->compile(f);
    auto out = backend->create_tensor(element::f32, {2});
    return test::error_of<std::invalid_argument>(
        [&] { exe->call({out}, {backend->create_tensor(element::f64, {2})}); });
  };
  std::string on_interpreter = check(interpreter());
  EXPECT_EQ(on_interpreter, check(runtime::Backend::create("CPU")));
  EXPECT_TRUE(contains(on_interpreter, "input 0 (a) expects f32{2}, got f64{2}")) << on_interpreter;
}

TEST(interpreter, schedule_is_topological_and_does_not_touch_the_graph) {
  auto a = param(element::f32, {2});
  auto neg = std::make_shared<op::Negative>(a);
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Exp>(neg)}, ParameterVector{a});
  auto exe = std::static_pointer_cast<runtime::interpreter::INTExecutable>(interpreter()->compile(f));
  auto schedule = exe->get_schedule();
  ASSERT_EQ(schedule.size(), 2u);
  EXPECT_TRUE(test::starts_with(schedule[0], "Negative")) << schedule[0];
  EXPECT_TRUE(test::starts_with(schedule[1], "Exp")) << schedule[1];
  EXPECT_NE(exe->get_function(), f);  // a copy
}
