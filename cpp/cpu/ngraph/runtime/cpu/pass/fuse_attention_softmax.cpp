// Attention's softmax as row kernels: Softmax over the last axis of a scaled, masked score
// (Select(mask, scores * c, -inf)) becomes AttentionSoftmax, and the gradient autodiff builds
// for it (Softmax's rule, then the Select's and the Multiply's) AttentionSoftmaxBackprop.
#include <cmath>
#include <optional>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/attention_softmax.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

// The one value of a constant (or a broadcast of one) whose elements are all equal.
bool scalar_constant(const Output& v, double& value) {
  const Node* node = v.get_node();
  while (node->get_type_name() == "Broadcast") node = node->input_value(0).get_node();
  auto* c = dynamic_cast<const op::Constant*>(node);
  if (!c || !c->get_element_type().is_real()) return false;
  auto values = c->get_vector<double>();
  if (values.empty()) return false;
  for (double x : values)
    if (!(x == values[0]) && !(std::isnan(x) && std::isnan(values[0]))) return false;
  value = values[0];
  return true;
}

bool is_last_axis(const AxisSet& axes, size_t rank) {
  return rank > 0 && axes.size() == 1 && *axes.begin() == rank - 1;
}

// The other operand of a binary node `n` whose operand `one` is at position 0 or 1.
Output other_input(const Node& n, const Output& one) {
  return n.input_value(0) == one ? n.input_value(1) : n.input_value(0);
}

// ------------------------------------------------------------------------------- forward

// A Softmax over the last axis of f32 or f64 data.
bool is_row_softmax(const Node& node) {
  if (node.get_type_name() != op::Softmax::type_name) return false;
  auto& sm = static_cast<const op::Softmax&>(node);
  element::Type t = sm.get_element_type();
  return (t == element::f32 || t == element::f64) &&
         is_last_axis(sm.get_axes(), sm.get_shape().size());
}

// What the softmax's row kernel reads: the scores, the mask and the scale.
struct SoftmaxArgs {
  Output x, mask;
  double scale = 1.0;
  Node* select = nullptr;  // the Select the mask comes from
};

// x = Select(mask, x', -inf), read only by the softmax: the mask, and x' as the scores.
void take_mask(SoftmaxArgs& a, const Node& softmax, const pass::Users& users) {
  Node* sel = a.x.get_node();
  double fill = 0;
  if (sel->get_type_name() != op::Select::type_name || users.single(a.x) != &softmax ||
      sel->get_input_shape(1) != softmax.get_shape() ||
      !scalar_constant(sel->input_value(2), fill) || !std::isinf(fill) || !(fill < 0))
    return;
  a.mask = sel->input_value(0);
  a.x = sel->input_value(1);
  a.select = sel;
}

// x = x' * c (either way round, c a scalar constant), read only by the softmax or by the
// mask's Select: c as the scale, and x' as the scores.
void take_scale(SoftmaxArgs& a, const Node& softmax, const pass::Users& users) {
  Node* mul = a.x.get_node();
  Node* reader = users.single(a.x);
  if (mul->get_type_name() != op::Multiply::type_name || !reader ||
      !(reader == &softmax || (a.mask && reader == a.select)))
    return;
  for (size_t i = 0; i < 2; ++i) {
    double c = 0;
    if (mul->get_input_shape(1 - i) == softmax.get_shape() &&
        scalar_constant(mul->input_value(i), c)) {
      a.scale = c;
      a.x = mul->input_value(1 - i);
      return;
    }
  }
}

// Forward: Softmax(Select(mask, scores * c, -inf)) over the last axis.
size_t fuse_forward(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::map<Output, Output> replacements;
  size_t fused = 0;
  for (const auto& node : ops) {
    if (!is_row_softmax(*node)) continue;
    SoftmaxArgs a;
    a.x = node->input_value(0);
    take_mask(a, *node, users);
    take_scale(a, *node, users);
    // A softmax with neither a scale nor a mask keeps its own kernel (the same row loop
    // over the last axis).
    if (!a.mask && a.scale == 1.0 && a.x == node->input_value(0)) continue;
    auto softmax = std::make_shared<AttentionSoftmax>(a.x, a.mask, a.scale);
    softmax->set_friendly_name(node->get_friendly_name());
    replacements[node->output(0)] = softmax->output(0);
    ++fused;
  }
  replace_outputs(f, replacements);
  return fused;
}

// ------------------------------------------------------------------------------ backward

// bc = Broadcast(Sum(d * y)) over the last axis, back along the rows, of `shape`: the row sums
// of Softmax's gradient rule, each part read only by the next and the broadcast only by `sub`.
bool is_broadcast_row_sum(Node* bc, const Node* sub, const Output& d, const Output& y,
                          const Shape& shape, const pass::Users& users) {
  if (bc->get_type_name() != op::Broadcast::type_name || users.single(bc->output(0)) != sub ||
      bc->get_shape() != shape ||
      static_cast<const op::Broadcast&>(*bc).get_broadcast_axes() != AxisSet{shape.size() - 1})
    return false;
  Node* sum = bc->input_value(0).get_node();
  if (sum->get_type_name() != op::Sum::type_name || users.single(sum->output(0)) != bc ||
      !is_last_axis(static_cast<const op::Sum&>(*sum).get_reduction_axes(), shape.size()))
    return false;
  Node* dy = sum->input_value(0).get_node();
  return dy->get_type_name() == op::Multiply::type_name && users.single(dy->output(0)) == sum &&
         dy->get_shape() == shape &&
         ((dy->input_value(0) == d && dy->input_value(1) == y) ||
          (dy->input_value(1) == d && dy->input_value(0) == y));
}

// The incoming gradient d where `node` (a Multiply) is Softmax's gradient rule
// y * (d - Broadcast(Sum(d * y))) with its input yi an AttentionSoftmax's output y; or nothing.
std::optional<Output> softmax_gradient_delta(Node& node, size_t yi, const pass::Users& users) {
  const Shape& shape = node.get_shape();
  Output y = node.input_value(yi);
  if (!dynamic_cast<AttentionSoftmax*>(y.get_node()) || y.get_shape() != shape) return std::nullopt;
  Node* sub = node.input_value(1 - yi).get_node();
  if (sub->get_type_name() != op::Subtract::type_name || users.single(sub->output(0)) != &node)
    return std::nullopt;
  Output d = sub->input_value(0);
  if (d.get_shape() != shape ||
      !is_broadcast_row_sum(sub->input_value(1).get_node(), sub, d, y, shape, users))
    return std::nullopt;
  return d;
}

// The forward's mask, where autodiff put it after the softmax's gradient (Select's rule):
// root = Select(mask, root, 0), read only there. True when found or not needed.
bool follow_mask(const AttentionSoftmax& fwd, Output& root, Output& mask, const Shape& shape,
                 const pass::Users& users) {
  if (!fwd.has_mask()) return true;
  Node* sel = users.single(root);
  double zero = 1;
  if (!sel || sel->get_type_name() != op::Select::type_name || sel->input_value(1) != root ||
      sel->input_value(0) != fwd.input_value(1) || !scalar_constant(sel->input_value(2), zero) ||
      zero != 0 || sel->get_shape() != shape)
    return false;
  mask = sel->input_value(0);
  root = sel->output(0);
  return true;
}

// The forward's scale, where autodiff put it next (Multiply's rule): root = root * c, read
// only there. True when found or not needed.
bool follow_scale(const AttentionSoftmax& fwd, Output& root, double& scale, const Shape& shape,
                  const pass::Users& users) {
  if (fwd.get_scale() == 1.0) return true;
  Node* mul = users.single(root);
  double c = 0;
  if (!mul || mul->get_type_name() != op::Multiply::type_name || mul->get_shape() != shape ||
      !scalar_constant(other_input(*mul, root), c) || c != fwd.get_scale())
    return false;
  root = mul->output(0);
  scale = c;
  return true;
}

// The AttentionSoftmaxBackprop of Multiply `node` read with the forward's output as input yi,
// replacing the last node of the gradient; false where the pattern is not complete.
bool form_backward(Node& node, size_t yi, const pass::Users& users,
                   std::map<Output, Output>& replacements) {
  std::optional<Output> d = softmax_gradient_delta(node, yi, users);
  if (!d) return false;
  Output y = node.input_value(yi);
  auto& fwd = static_cast<const AttentionSoftmax&>(*y.get_node());
  Output root = node.output(0), mask;
  double scale = 1.0;
  if (!follow_mask(fwd, root, mask, node.get_shape(), users) ||
      !follow_scale(fwd, root, scale, node.get_shape(), users))
    return false;
  auto b = std::make_shared<AttentionSoftmaxBackprop>(*d, y, mask, scale);
  b->set_friendly_name(node.get_friendly_name());
  replacements[root] = b->output(0);
  return true;
}

// Backward: y * (d - Broadcast(Sum(d * y))) [then Select(mask, ., 0)] [then * c], for y an
// AttentionSoftmax's output, with its mask and scale.
size_t fuse_backward(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::map<Output, Output> replacements;
  size_t fused = 0;
  for (const auto& node : ops) {
    if (node->get_type_name() != op::Multiply::type_name) continue;
    for (size_t yi = 0; yi < 2; ++yi)
      if (form_backward(*node, yi, users, replacements)) {
        ++fused;
        break;
      }
  }
  replace_outputs(f, replacements);
  return fused;
}

}  // namespace

size_t fuse_attention_softmax(Function& f) {
  size_t forward = fuse_forward(f);
  return forward + fuse_backward(f);
}

namespace pass {

void fuse_attention_softmax(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_attention_softmax(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
