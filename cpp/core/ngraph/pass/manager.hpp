// Graph passes over a function, run in order by a Manager.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ngraph/function.hpp"
#include "ngraph/ops/parameter.hpp"

namespace ngraph {
namespace pass {

class FunctionPass {
 public:
  virtual ~FunctionPass() = default;
  virtual std::string name() const = 0;
  // Returns true when the function changed. Passes rewrite the function in place: run them
  // on a clone when the nodes are shared with user code (Backend::compile does).
  virtual bool run_on_function(const std::shared_ptr<Function>& f) = 0;
};

class Manager {
 public:
  template <typename T, typename... Args>
  T& register_pass(Args&&... args) {
    auto p = std::make_shared<T>(std::forward<Args>(args)...);
    m_passes.push_back(p);
    return *p;
  }
  // Runs every pass once, in order; returns true if any changed the function.
  bool run_passes(const std::shared_ptr<Function>& f);
  // Pass names with how often each changed something, for logging and tests.
  const std::vector<std::pair<std::string, bool>>& get_log() const { return m_log; }

 private:
  std::vector<std::shared_ptr<FunctionPass>> m_passes;
  std::vector<std::pair<std::string, bool>> m_log;
};

// Removes nodes that compute nothing: a node whose output equals its input (Reshape with
// identity order and the same shape, Broadcast/Reverse/Sum/Product/Max/Min/Pad with nothing
// to do, Slice of the whole argument, Convert to the same type, Concat of one argument,
// StopGradient, GetOutputElement) is bypassed; nodes that then reach no result are no longer
// part of the function.
class DeadNodeElimination : public FunctionPass {
 public:
  std::string name() const override { return "DeadNodeElimination"; }
  bool run_on_function(const std::shared_ptr<Function>& f) override;
};

// Merges nodes of the same op, with equal attributes, on the same inputs (pure ops only).
class CommonSubexpressionElimination : public FunctionPass {
 public:
  std::string name() const override { return "CommonSubexpressionElimination"; }
  bool run_on_function(const std::shared_ptr<Function>& f) override;
};

// Rewrites the erf formula of the exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))), into Gelu
// (gelu_fusion.cpp): products in any grouping and order, erf's argument x / c or x * c' for c
// near sqrt(2) and c' near 1/sqrt(2), constants 0.5 and 1 the same way (scalars, or broadcasts
// of one value); near: relatively within 1e-6 in f32 (1.4142135), 1e-12 in f64. The intermediate
// values must be read only inside the formula (else they would be computed anyway), and both x's
// must be the same value. Gelu's gradient rule then gives the formula's gradient.
class GeluFusion : public FunctionPass {
 public:
  std::string name() const override { return "GeluFusion"; }
  bool run_on_function(const std::shared_ptr<Function>& f) override;
};

// Replaces pure nodes whose inputs are all constants by a constant holding their value.
// The value comes from `evaluator`, which a backend provides (the core runs no nodes), e.g.
// runtime::cpu::evaluate_constant (ngraph/runtime/cpu/constant_evaluator.hpp); it is given a
// copy of the node on constant inputs. A null evaluator throws std::invalid_argument. Nodes
// whose result would hold more than max_elements elements and more than their inputs together
// (a Broadcast of a scalar to a large shape) are left alone to keep graphs small.
class ConstantFolding : public FunctionPass {
 public:
  using Evaluator = std::function<std::shared_ptr<op::Constant>(const std::shared_ptr<Node>&)>;
  explicit ConstantFolding(Evaluator evaluator, size_t max_elements = 1 << 16);
  std::string name() const override { return "ConstantFolding"; }
  bool run_on_function(const std::shared_ptr<Function>& f) override;

 private:
  Evaluator m_evaluator;
  size_t m_max_elements;
};

}  // namespace pass
}  // namespace ngraph
