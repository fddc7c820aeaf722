// Reverse-mode autodiff as graph construction (nGraph's Adjoints). Each op's gradient rule
// is its generate_adjoints, defined with the op; an op without one blocks the gradient, and
// asking for a gradient through it throws naming the op (never a silent zero).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ngraph/node.hpp"

namespace ngraph {
namespace autodiff {

// Thrown by Node::generate_adjoints for ops that have no gradient rule.
class NoGradientRule : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class Adjoints {
 public:
  // Computes (dy/dx)(c) for every x upstream of ys: seeds[i] is the incoming gradient of
  // ys[i] and has its shape and type.
  Adjoints(const OutputVector& ys, const OutputVector& seeds);

  // The gradient of x: a node of x's shape and type. Zeros when no y depends on x. Throws
  // NoGradientRule when the path from x to a y crosses an op without a gradient rule, or when
  // x is not a floating-point value.
  Output backprop_output(const Output& x);
  // The gradient of x's (first) output as a single-output node: a GetOutputElement when the
  // gradient is one output of a multi-output node (BatchNormTrainingBackprop).
  std::shared_ptr<Node> backprop_node(const std::shared_ptr<Node>& x);

  // For gradient rules: adds `delta` to the gradient of `x` (same shape and type as x).
  void add_delta(const Output& x, const Output& delta);

 private:
  std::map<Output, Output> m_deltas;
  // Nodes a delta reached that could not pass it on, with the reason.
  std::vector<std::pair<std::shared_ptr<Node>, std::string>> m_blocked;
  const Node* m_current = nullptr;  // the node whose rule is running (for messages)
};

// Helpers for gradient rules.
// Sums `delta` down to `shape` (undoing NumPy broadcasting: leading axes and stretched 1s).
Output reduce_to_shape(const Output& delta, const Shape& shape);
// A scalar constant of `type` holding `value`.
Output scalar(element::Type type, double value);
// Zeros of a shape and type (a broadcast scalar, not a buffer of zeros).
Output zeros(element::Type type, const Shape& shape);
// True when `v` is known to be zero: a Constant of zeros, or a Broadcast of one (what zeros()
// builds, and what Adjoints passes for an output that received no gradient). Gradient rules of
// multi-output ops use it to skip the outputs nothing downstream uses.
bool is_zeros(const Output& v);

}  // namespace autodiff
}  // namespace ngraph
