// Graph passes: DeadNodeElimination, CommonSubexpressionElimination, ConstantFolding, the
// Manager, and that compiling never rewrites the caller's function.
#include <gtest/gtest.h>

#include <map>

#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"
#include "ngraph/runtime/cpu/constant_evaluator.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using test::make_value;
using test::to_vector;

namespace {

std::shared_ptr<op::Parameter> param(element::Type t, const Shape& s) {
  return std::make_shared<op::Parameter>(t, s);
}

std::shared_ptr<op::Constant> constant(const Shape& s, const std::vector<float>& v) {
  return std::make_shared<op::Constant>(element::f32, s, v);
}

size_t count_ops(const Function& f, const std::string& type) {
  size_t n = 0;
  for (const auto& node : f.get_ordered_ops()) n += node->get_type_name() == type;
  return n;
}

template <typename P>
bool run_pass(const std::shared_ptr<Function>& f, P pass) {
  return pass.run_on_function(f);
}

// A snapshot of a graph's structure: every node (in order) with its inputs and attributes.
std::vector<std::string> structure(const Function& f) {
  std::vector<std::string> out;
  for (const auto& node : f.get_ordered_ops()) {
    std::string line = node->get_name() + "#" + std::to_string(node->get_instance_id()) + "(";
    for (const auto& in : node->input_values())
      line += std::to_string(in.get_node()->get_instance_id()) + ":" +
              std::to_string(in.get_index()) + " ";
    out.push_back(line + ") " + node->attributes_string());
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------- DeadNodeElimination

TEST(pass_dead_node_elimination, bypasses_identity_nodes) {
  auto p = param(element::f32, {2, 3});
  std::shared_ptr<Node> x = std::make_shared<op::Reshape>(p, AxisVector{0, 1}, Shape{2, 3});
  x = std::make_shared<op::Broadcast>(x, Shape{2, 3}, AxisSet{});
  x = std::make_shared<op::Convert>(x, element::f32);
  x = std::make_shared<op::Reverse>(x, AxisSet{});
  x = std::make_shared<op::Sum>(x, AxisSet{});
  x = std::make_shared<op::Product>(x, AxisSet{});
  x = std::make_shared<op::Max>(x, AxisSet{});
  x = std::make_shared<op::Min>(x, AxisSet{});
  x = std::make_shared<op::Slice>(x, Coordinate{0, 0}, Coordinate{2, 3});
  x = std::make_shared<op::Pad>(x, constant({}, {0}), CoordinateDiff{0, 0}, CoordinateDiff{0, 0});
  x = std::make_shared<op::Concat>(OutputVector{x}, 1);
  auto neg = std::make_shared<op::Negative>(x);
  auto f = std::make_shared<Function>(OutputVector{neg}, ParameterVector{p});
  auto before =
      test::run_function(f, {make_value(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})}, false);

  size_t ops_before = f->get_ordered_ops().size();
  EXPECT_TRUE(run_pass(f, pass::DeadNodeElimination()));
  auto ops = f->get_ordered_ops();
  EXPECT_LT(ops.size(), ops_before);
  ASSERT_EQ(ops.size(), 3u) << f->to_string();  // Parameter, Negative, Result
  EXPECT_EQ(ops[0], p);
  EXPECT_EQ(ops[1], neg);
  EXPECT_EQ(neg->input_value(0), Output(p));
  EXPECT_EQ(ops[2]->get_type_name(), "Result");

  auto after =
      test::run_function(f, {make_value(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})}, false);
  EXPECT_EQ(to_vector<float>(after.at(0)), to_vector<float>(before.at(0)));
  EXPECT_EQ(to_vector<float>(after.at(0)), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  // Nothing left to remove.
  EXPECT_FALSE(run_pass(f, pass::DeadNodeElimination()));
}

TEST(pass_dead_node_elimination, keeps_nodes_that_compute) {
  auto p = param(element::f32, {2, 2});
  auto q = param(element::f32, {1, 3});
  NodeVector kept = {
      std::make_shared<op::Reshape>(p, AxisVector{1, 0}, Shape{2, 2}),  // a transpose
      std::make_shared<op::Reshape>(p, AxisVector{0, 1}, Shape{4}),     // a new shape
      std::make_shared<op::Reverse>(p, AxisSet{1}),
      std::make_shared<op::Convert>(p, element::i32),
      std::make_shared<op::Broadcast>(p, Shape{2, 2, 2}, AxisSet{0}),
      std::make_shared<op::Slice>(p, Coordinate{0, 1}, Coordinate{2, 2}),
      std::make_shared<op::Pad>(p, constant({}, {0}), CoordinateDiff{1, 0}, CoordinateDiff{-1, 0}),
      std::make_shared<op::Sum>(p, AxisSet{0}),
      std::make_shared<op::Concat>(OutputVector{p, p}, 0),
      std::make_shared<op::Negative>(p),
  };
  OutputVector results(kept.begin(), kept.end());
  // Removable: reversing an axis of size 1.
  auto rev1 = std::make_shared<op::Reverse>(q, AxisSet{0});
  results.push_back(std::make_shared<op::Relu>(rev1));
  auto f = std::make_shared<Function>(results, ParameterVector{p, q});
  EXPECT_TRUE(run_pass(f, pass::DeadNodeElimination()));
  auto ops = f->get_ordered_ops();
  for (const auto& node : kept)
    EXPECT_NE(std::find(ops.begin(), ops.end(), node), ops.end()) << node->description();
  EXPECT_EQ(std::find(ops.begin(), ops.end(), rev1), ops.end());
  // The pad with below 1 / above -1 keeps its shape but moves data: it stays.
  EXPECT_EQ(count_ops(*f, "Pad"), 1u);
}

TEST(pass_dead_node_elimination, result_of_identity_becomes_parameter) {
  auto p = param(element::i32, {3});
  auto r = std::make_shared<op::Reshape>(p, AxisVector{0}, Shape{3});
  auto f = std::make_shared<Function>(OutputVector{r}, ParameterVector{p});
  EXPECT_TRUE(run_pass(f, pass::DeadNodeElimination()));
  EXPECT_EQ(f->get_results()[0]->input_value(0), Output(p));
  auto out = test::run_function(f, {make_value(Shape{3}, std::vector<int32_t>{4, 5, 6})});
  EXPECT_EQ(to_vector<int32_t>(out[0]), (std::vector<int32_t>{4, 5, 6}));
}

// ------------------------------------------------------ CommonSubexpressionElimination

TEST(pass_cse, merges_duplicates) {
  auto a = param(element::f32, {2});
  auto b = param(element::f32, {2});
  auto add1 = std::make_shared<op::Add>(a, b);
  auto add2 = std::make_shared<op::Add>(a, b);
  auto neg1 = std::make_shared<op::Negative>(add1);
  auto neg2 = std::make_shared<op::Negative>(add2);
  auto mul = std::make_shared<op::Multiply>(neg1, neg2);
  auto f = std::make_shared<Function>(OutputVector{mul}, ParameterVector{a, b});
  std::vector<test::Value> in = {make_value(Shape{2}, std::vector<float>{1, 2}),
                                 make_value(Shape{2}, std::vector<float>{3, -5})};
  auto before = to_vector<float>(test::run_function(f, in, false).at(0));
  size_t ops_before = f->get_ordered_ops().size();
  EXPECT_TRUE(run_pass(f, pass::CommonSubexpressionElimination()));
  EXPECT_EQ(f->get_ordered_ops().size(), ops_before - 2);
  EXPECT_EQ(count_ops(*f, "Add"), 1u);
  EXPECT_EQ(count_ops(*f, "Negative"), 1u);
  EXPECT_EQ(mul->input_value(0), mul->input_value(1));
  auto after = to_vector<float>(test::run_function(f, in, false).at(0));
  EXPECT_EQ(after, before);
  EXPECT_EQ(after, (std::vector<float>{16, 9}));  // (-(1+3))^2, (-(2-5))^2
  EXPECT_FALSE(run_pass(f, pass::CommonSubexpressionElimination()));
}

TEST(pass_cse, different_attributes_not_merged) {
  auto a = param(element::f32, {2, 2});
  auto b = param(element::f32, {2, 2});
  auto i = param(element::i32, {2});
  OutputVector results = {
      std::make_shared<op::Add>(a, b, "none"),
      std::make_shared<op::Add>(a, b, "numpy"),
      std::make_shared<op::Sum>(a, AxisSet{0}),
      std::make_shared<op::Sum>(a, AxisSet{1}),
      std::make_shared<op::Divide>(i, i, "none", true),
      std::make_shared<op::Divide>(i, i, "none", false),
      std::make_shared<op::Reshape>(a, AxisVector{0, 1}, Shape{4}),
      std::make_shared<op::Reshape>(a, AxisVector{1, 0}, Shape{4}),
      std::make_shared<op::Subtract>(a, b),
      std::make_shared<op::Subtract>(b, a),  // same op, inputs swapped
  };
  auto f = std::make_shared<Function>(results, ParameterVector{a, b, i});
  size_t before = f->get_ordered_ops().size();
  EXPECT_FALSE(run_pass(f, pass::CommonSubexpressionElimination()));
  EXPECT_EQ(f->get_ordered_ops().size(), before);
  EXPECT_EQ(count_ops(*f, "Add"), 2u);
  EXPECT_EQ(count_ops(*f, "Sum"), 2u);
  EXPECT_EQ(count_ops(*f, "Divide"), 2u);
  EXPECT_EQ(count_ops(*f, "Reshape"), 2u);
  EXPECT_EQ(count_ops(*f, "Subtract"), 2u);
}

TEST(pass_cse, parameters_never_merged) {
  auto p1 = param(element::f32, {3});
  auto p2 = param(element::f32, {3});
  auto n1 = std::make_shared<op::Negative>(p1);
  auto n2 = std::make_shared<op::Negative>(p2);
  auto f = std::make_shared<Function>(OutputVector{n1, n2}, ParameterVector{p1, p2});
  EXPECT_FALSE(run_pass(f, pass::CommonSubexpressionElimination()));
  EXPECT_EQ(count_ops(*f, "Parameter"), 2u);
  EXPECT_EQ(count_ops(*f, "Negative"), 2u);
  EXPECT_EQ(n1->input_value(0), Output(p1));
  EXPECT_EQ(n2->input_value(0), Output(p2));
  auto out = test::run_function(f, {make_value(Shape{3}, std::vector<float>{1, 2, 3}),
                                    make_value(Shape{3}, std::vector<float>{4, 5, 6})});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(to_vector<float>(out[1]), (std::vector<float>{-4, -5, -6}));
}

TEST(pass_cse, equal_constants_merged) {
  auto p = param(element::f32, {2});
  auto c1 = constant({2}, {1, 2});
  auto c2 = constant({2}, {1, 2});
  auto c3 = constant({2}, {1, 3});
  auto a1 = std::make_shared<op::Add>(p, c1);
  auto a2 = std::make_shared<op::Add>(p, c2);
  auto a3 = std::make_shared<op::Add>(p, c3);
  auto f = std::make_shared<Function>(OutputVector{a1, a2, a3}, ParameterVector{p});
  EXPECT_TRUE(run_pass(f, pass::CommonSubexpressionElimination()));
  EXPECT_EQ(count_ops(*f, "Constant"), 2u);
  EXPECT_EQ(count_ops(*f, "Add"), 2u);
  EXPECT_EQ(f->get_results()[0]->input_value(0), f->get_results()[1]->input_value(0));
  EXPECT_NE(f->get_results()[0]->input_value(0), f->get_results()[2]->input_value(0));
  // Two results remain two results, reading one value.
  EXPECT_EQ(f->get_results().size(), 3u);
  auto out = test::run_function(f, {make_value(Shape{2}, std::vector<float>{10, 20})});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{11, 22}));
  EXPECT_EQ(to_vector<float>(out[1]), (std::vector<float>{11, 22}));
  EXPECT_EQ(to_vector<float>(out[2]), (std::vector<float>{11, 23}));
}

// ---------------------------------------------------------------------- ConstantFolding

TEST(pass_constant_folding, folds_constant_subgraph) {
  auto c1 = constant({2, 2}, {1, 2, 3, 4});
  auto c2 = constant({2}, {10, 20});
  auto add = std::make_shared<op::Add>(c1, c2, "numpy");  // [[11,22],[13,24]]
  auto sum = std::make_shared<op::Sum>(add, AxisSet{0});  // [24, 46]
  auto neg = std::make_shared<op::Negative>(sum);         // [-24, -46]
  auto f = std::make_shared<Function>(OutputVector{neg}, ParameterVector{});
  EXPECT_TRUE(run_pass(f, pass::ConstantFolding(runtime::cpu::evaluate_constant)));
  auto ops = f->get_ordered_ops();
  ASSERT_EQ(ops.size(), 2u) << f->to_string();
  auto folded = std::dynamic_pointer_cast<op::Constant>(ops[0]);
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->get_shape(), Shape{2});
  EXPECT_EQ(folded->get_element_type(), element::f32);
  EXPECT_EQ(folded->get_vector<float>(), (std::vector<float>{-24, -46}));
  auto out = test::run_function(f, {});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{-24, -46}));
}

TEST(pass_constant_folding, folds_integer_and_boolean_values) {
  auto a = std::make_shared<op::Constant>(element::i64, Shape{3}, std::vector<int64_t>{-7, 7, 9});
  auto b = std::make_shared<op::Constant>(element::i64, Shape{}, std::vector<int64_t>{2});
  auto div = std::make_shared<op::Divide>(a, b, "numpy");    // floor: -4, 3, 4
  auto gt = std::make_shared<op::Greater>(div, b, "numpy");  // 0, 1, 1
  auto f = std::make_shared<Function>(OutputVector{div, gt}, ParameterVector{});
  EXPECT_TRUE(run_pass(f, pass::ConstantFolding(runtime::cpu::evaluate_constant)));
  EXPECT_EQ(count_ops(*f, "Divide"), 0u);
  EXPECT_EQ(count_ops(*f, "Greater"), 0u);
  auto c0 = std::dynamic_pointer_cast<op::Constant>(
      f->get_results()[0]->input_value(0).get_node_shared_ptr());
  auto c1 = std::dynamic_pointer_cast<op::Constant>(
      f->get_results()[1]->input_value(0).get_node_shared_ptr());
  ASSERT_TRUE(c0 && c1);
  EXPECT_EQ(c0->get_vector<int64_t>(), (std::vector<int64_t>{-4, 3, 4}));
  EXPECT_EQ(c1->get_element_type(), element::boolean);
  EXPECT_EQ(c1->get_vector<int>(), (std::vector<int>{0, 1, 1}));
}

TEST(pass_constant_folding, leaves_parameter_dependent_nodes) {
  auto p = param(element::f32, {2});
  auto c1 = constant({2}, {1, 2});
  auto c2 = constant({2}, {3, 4});
  auto cc = std::make_shared<op::Multiply>(c1, c2);  // foldable: [3, 8]
  auto pc = std::make_shared<op::Add>(p, cc);        // depends on p
  auto neg = std::make_shared<op::Negative>(pc);
  auto f = std::make_shared<Function>(OutputVector{neg}, ParameterVector{p});
  EXPECT_TRUE(run_pass(f, pass::ConstantFolding(runtime::cpu::evaluate_constant)));
  EXPECT_EQ(count_ops(*f, "Multiply"), 0u);
  EXPECT_EQ(count_ops(*f, "Add"), 1u);
  EXPECT_EQ(count_ops(*f, "Negative"), 1u);
  EXPECT_EQ(pc->input_value(0), Output(p));
  auto folded = std::dynamic_pointer_cast<op::Constant>(pc->input_value(1).get_node_shared_ptr());
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->get_vector<float>(), (std::vector<float>{3, 8}));
  auto out = test::run_function(f, {make_value(Shape{2}, std::vector<float>{1, 1})});
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{-4, -9}));

  // A function with only parameter-dependent nodes is untouched.
  auto q = param(element::f32, {2});
  auto g =
      std::make_shared<Function>(OutputVector{std::make_shared<op::Add>(q, q)}, ParameterVector{q});
  auto before = structure(*g);
  EXPECT_FALSE(run_pass(g, pass::ConstantFolding(runtime::cpu::evaluate_constant)));
  EXPECT_EQ(structure(*g), before);
}

TEST(pass_constant_folding, large_broadcast_of_scalar_not_folded) {
  auto s = constant({}, {2});
  auto big = std::make_shared<op::Broadcast>(s, Shape{1000, 1000}, AxisSet{0, 1});
  auto p = param(element::f32, {1000, 1000});
  auto mul = std::make_shared<op::Multiply>(p, big);
  auto f = std::make_shared<Function>(OutputVector{mul}, ParameterVector{p});
  EXPECT_FALSE(run_pass(f, pass::ConstantFolding(runtime::cpu::evaluate_constant)));
  EXPECT_EQ(count_ops(*f, "Broadcast"), 1u);
  EXPECT_EQ(mul->input_value(1), Output(big));

  // With a small limit: an expanding op above it stays, a shrinking one is still folded.
  auto v = constant({20}, std::vector<float>(20, 1.5f));
  auto expand = std::make_shared<op::Broadcast>(s, Shape{20}, AxisSet{0});
  auto shrink = std::make_shared<op::Negative>(v);
  auto g = std::make_shared<Function>(OutputVector{expand, shrink}, ParameterVector{});
  EXPECT_TRUE(run_pass(g, pass::ConstantFolding(runtime::cpu::evaluate_constant, 10)));
  EXPECT_EQ(count_ops(*g, "Broadcast"), 1u);
  EXPECT_EQ(count_ops(*g, "Negative"), 0u);
  auto folded = std::dynamic_pointer_cast<op::Constant>(
      g->get_results()[1]->input_value(0).get_node_shared_ptr());
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->get_vector<float>(), std::vector<float>(20, -1.5f));
}

TEST(pass_constant_folding, uses_the_given_evaluator) {
  size_t calls = 0;
  auto evaluator = [&calls](const std::shared_ptr<Node>& node) {
    ++calls;
    return std::make_shared<op::Constant>(node->get_element_type(), node->get_shape(),
                                          std::vector<float>{42});
  };
  auto c = constant({2}, {1, 2});
  auto neg = std::make_shared<op::Negative>(c);
  auto abs = std::make_shared<op::Abs>(neg);
  auto f = std::make_shared<Function>(OutputVector{abs}, ParameterVector{});
  EXPECT_TRUE(run_pass(f, pass::ConstantFolding(evaluator)));
  EXPECT_EQ(calls, 2u);
  auto folded = std::dynamic_pointer_cast<op::Constant>(
      f->get_results()[0]->input_value(0).get_node_shared_ptr());
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->get_vector<float>(), (std::vector<float>{42, 42}));
}

TEST(pass_constant_folding, needs_an_evaluator) {
  std::string msg = test::error_of<std::invalid_argument>(
      [] { pass::ConstantFolding folding(pass::ConstantFolding::Evaluator{}); });
  EXPECT_TRUE(test::contains(msg, "ConstantFolding needs an evaluator")) << msg;
  msg = test::error_of<std::invalid_argument>([] { pass::ConstantFolding folding(nullptr, 10); });
  EXPECT_TRUE(test::contains(msg, "ConstantFolding needs an evaluator")) << msg;
}

TEST(pass_constant_folding, cpu_evaluator_runs_one_node) {
  auto c1 = constant({2, 2}, {1, 2, 3, 4});
  auto c2 = constant({2}, {10, 20});
  auto add = std::make_shared<op::Add>(c1, c2, "numpy");
  auto value = runtime::cpu::evaluate_constant(add);
  ASSERT_TRUE(value);
  EXPECT_EQ(value->get_shape(), (Shape{2, 2}));
  EXPECT_EQ(value->get_element_type(), element::f32);
  EXPECT_EQ(value->get_vector<float>(), (std::vector<float>{11, 22, 13, 24}));
  // The node itself is left as it was.
  EXPECT_EQ(add->input_value(0), Output(c1));
  EXPECT_EQ(add->input_value(1), Output(c2));
  auto i = std::make_shared<op::Constant>(element::i32, Shape{3}, std::vector<int32_t>{1, -2, 3});
  auto less = std::make_shared<op::Less>(i, std::make_shared<op::Constant>(
                                                element::i32, Shape{}, std::vector<int32_t>{2}),
                                         op::AutoBroadcast::numpy);
  auto mask = runtime::cpu::evaluate_constant(less);
  EXPECT_EQ(mask->get_element_type(), element::boolean);
  EXPECT_EQ(mask->get_vector<int>(), (std::vector<int>{1, 1, 0}));
}

// ------------------------------------------------------------------------------ Manager

TEST(pass_manager, runs_passes_in_order_and_logs) {
  auto p = param(element::f32, {2});
  auto c = constant({2}, {1, 1});
  auto two = std::make_shared<op::Add>(c, c);  // folds to [2, 2]
  auto id = std::make_shared<op::Reshape>(p, AxisVector{0}, Shape{2});
  auto m1 = std::make_shared<op::Multiply>(id, two);
  auto m2 = std::make_shared<op::Multiply>(p, two);  // equals m1 once the reshape is gone
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Add>(m1, m2)},
                                      ParameterVector{p});
  pass::Manager manager;
  manager.register_pass<pass::ConstantFolding>(runtime::cpu::evaluate_constant);
  manager.register_pass<pass::DeadNodeElimination>();
  manager.register_pass<pass::CommonSubexpressionElimination>();
  EXPECT_TRUE(manager.run_passes(f));
  const auto& log = manager.get_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0], std::make_pair(std::string("ConstantFolding"), true));
  EXPECT_EQ(log[1], std::make_pair(std::string("DeadNodeElimination"), true));
  EXPECT_EQ(log[2], std::make_pair(std::string("CommonSubexpressionElimination"), true));
  EXPECT_EQ(count_ops(*f, "Multiply"), 1u);
  EXPECT_EQ(count_ops(*f, "Reshape"), 0u);
  auto out = test::run_function(f, {make_value(Shape{2}, std::vector<float>{3, -1})}, false);
  EXPECT_EQ(to_vector<float>(out[0]), (std::vector<float>{12, -4}));
}

// ------------------------------------------------------------- compile leaves f untouched

TEST(pass_compile, does_not_mutate_the_function) {
  auto p = param(element::f32, {2, 2});
  auto c1 = constant({2, 2}, {1, 2, 3, 4});
  auto c2 = constant({2, 2}, {1, 1, 1, 1});
  auto csum = std::make_shared<op::Add>(c1, c2);
  auto id = std::make_shared<op::Reshape>(p, AxisVector{0, 1}, Shape{2, 2});
  auto a1 = std::make_shared<op::Add>(id, csum);
  auto a2 = std::make_shared<op::Add>(id, csum);
  auto out = std::make_shared<op::Multiply>(a1, a2);
  auto f = std::make_shared<Function>(OutputVector{out, id}, ParameterVector{p});
  auto before = structure(*f);
  auto text = f->to_string();

  auto backend = test::cpu_backend();
  auto exe = backend->compile(f);
  EXPECT_EQ(structure(*f), before);
  EXPECT_EQ(f->to_string(), text);
  EXPECT_EQ(a1->input_value(0), Output(id));
  EXPECT_EQ(a2->input_value(0), Output(id));
  EXPECT_EQ(csum->input_value(0), Output(c1));

  auto cpu = std::dynamic_pointer_cast<runtime::cpu::CPUExecutable>(exe);
  ASSERT_TRUE(cpu);
  EXPECT_NE(cpu->get_function(), f);
  EXPECT_LT(cpu->get_function()->get_ordered_ops().size(), f->get_ordered_ops().size());
  EXPECT_EQ(count_ops(*cpu->get_function(), "Reshape"), 0u);
  // The two equal Adds are one (with fusion on, inside the Multiply's kernel, which reads it
  // twice).
  runtime::cpu::CPUBackend unfusing;
  auto unfused = std::dynamic_pointer_cast<runtime::cpu::CPUExecutable>(
      unfusing.compile(f, runtime::cpu::CompileOptions{true, false}));
  EXPECT_EQ(count_ops(*unfused->get_function(), "Add"), 1u);
  EXPECT_EQ(count_ops(*cpu->get_function(), "CPUFusedElementwise"), 1u);
  // The executable's parameters are its own, and the results are still right.
  EXPECT_NE(exe->get_parameters()[0], p);
  std::vector<float> x{1, 2, 3, 4}, r0(4), r1(4);
  auto tx = backend->create_tensor(element::f32, Shape{2, 2}, x.data());
  auto t0 = backend->create_tensor(element::f32, Shape{2, 2}, r0.data());
  auto t1 = backend->create_tensor(element::f32, Shape{2, 2}, r1.data());
  exe->call({t0, t1}, {tx});
  EXPECT_EQ(r0, (std::vector<float>{9, 25, 49, 81}));
  EXPECT_EQ(r1, x);
  // Compiling twice gives the same results; the user's function still runs unoptimised.
  auto exe2 = backend->compile(f);
  EXPECT_EQ(structure(*f), before);
  auto plain = test::run_function(f, {make_value(Shape{2, 2}, x)}, false);
  EXPECT_EQ(to_vector<float>(plain[0]), r0);
}
