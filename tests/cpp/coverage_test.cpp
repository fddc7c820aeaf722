// Every op of the core has a CPU kernel (structural ops excepted), and every kernel belongs
// to an op of the core: adding an op without its kernel fails here.
#include <gtest/gtest.h>

#include <algorithm>

#include "ngraph/node.hpp"
#include "ngraph/runtime/cpu/op/internal_ops.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

using namespace ngraph;

TEST(coverage, every_op_has_a_cpu_kernel) {
  auto ops = OpRegistry::get().names();
  ASSERT_FALSE(ops.empty());
  std::vector<std::string> missing;
  for (const auto& op : ops)
    if (!runtime::cpu::is_structural_op(op) && !runtime::cpu::KernelRegistry::get().contains(op))
      missing.push_back(op);
  EXPECT_TRUE(missing.empty()) << "ops without a CPU kernel: " << join(missing, ", ");
}

TEST(coverage, every_kernel_belongs_to_an_op) {
  const auto& internal = runtime::cpu::internal_op_names();
  for (const auto& name : runtime::cpu::KernelRegistry::get().names()) {
    bool is_internal = std::find(internal.begin(), internal.end(), name) != internal.end();
    EXPECT_TRUE(OpRegistry::get().contains(name) || is_internal) << "kernel for unknown op " << name;
    EXPECT_FALSE(runtime::cpu::is_structural_op(name)) << "kernel for structural op " << name;
  }
}

TEST(coverage, backend_internal_ops_have_kernels_but_are_not_core_ops) {
  for (const auto& name : runtime::cpu::internal_op_names()) {
    EXPECT_TRUE(runtime::cpu::KernelRegistry::get().contains(name)) << name;
    EXPECT_FALSE(OpRegistry::get().contains(name)) << name;
  }
}

TEST(coverage, structural_ops_are_the_graph_leaves_and_roots) {
  for (const char* op : {"Parameter", "Constant", "Result"}) {
    EXPECT_TRUE(runtime::cpu::is_structural_op(op)) << op;
    EXPECT_TRUE(OpRegistry::get().contains(op)) << op;
  }
  EXPECT_FALSE(runtime::cpu::is_structural_op("Add"));
  EXPECT_FALSE(runtime::cpu::is_structural_op("Reshape"));
}
