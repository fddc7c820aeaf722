#include "ngraph/runtime/cpu/fusion.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <set>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"
#include "ngraph/runtime/cpu/constant_evaluator.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/plan.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

MatMulBias::MatMulBias(const Output& a, const Output& b, const Output& bias, bool transpose_a,
                       bool transpose_b, bool relu, int64_t a_split, int64_t b_split)
    : Op<MatMulBias>(bias ? OutputVector{a, b, bias} : OutputVector{a, b}),
      m_transpose_a(transpose_a),
      m_transpose_b(transpose_b),
      m_relu(relu),
      m_a_split(a_split),
      m_b_split(b_split) {
  constructor_validate_and_infer_types();
}

size_t MatMulBias::split(size_t input) const {
  size_t rank = get_input_shape(input).size();
  int64_t s = input == 0 ? m_a_split : m_b_split;
  if (s < 0) return rank - 1;
  if (static_cast<size_t>(s) > rank)
    fail(concat_message("split ", s, " of input ", input, " exceeds its rank ", rank));
  return static_cast<size_t>(s);
}

namespace {
// The matrix of `shape` split at `s`: rows and columns, and the axes of each.
struct MatrixView {
  size_t rows = 1, cols = 1;
  Shape row_axes, col_axes;
};
MatrixView matrix_view(const Shape& shape, size_t s) {
  MatrixView v;
  for (size_t i = 0; i < shape.size(); ++i) {
    (i < s ? v.rows : v.cols) *= shape[i];
    (i < s ? v.row_axes : v.col_axes).push_back(shape[i]);
  }
  return v;
}
}  // namespace

void MatMulBias::get_gemm(size_t& m, size_t& n, size_t& k) const {
  MatrixView a = matrix_view(get_input_shape(0), split(0)), b = matrix_view(get_input_shape(1), split(1));
  m = m_transpose_a ? a.cols : a.rows;
  k = m_transpose_a ? a.rows : a.cols;
  n = m_transpose_b ? b.rows : b.cols;
}

void MatMulBias::validate_and_infer_types() {
  if (get_input_size() != 2 && get_input_size() != 3) fail("expects 2 or 3 inputs");
  const Shape& as = get_input_shape(0);
  const Shape& bs = get_input_shape(1);
  if (as.empty() || bs.empty()) fail(concat_message("needs arguments of rank >= 1, got ", as, " and ", bs));
  MatrixView a = matrix_view(as, split(0)), b = matrix_view(bs, split(1));
  size_t k = m_transpose_a ? a.rows : a.cols;
  size_t k2 = m_transpose_b ? b.cols : b.rows;
  if (k != k2) fail(concat_message("inner dimensions of ", as, " and ", bs, " differ"));
  Shape out = m_transpose_a ? a.col_axes : a.row_axes;
  for (auto d : m_transpose_b ? b.row_axes : b.col_axes) out.push_back(d);
  size_t n = m_transpose_b ? b.rows : b.cols;
  element::Type t = get_input_element_type(0);
  for (size_t i = 1; i < get_input_size(); ++i)
    if (get_input_element_type(i) != t) fail_type("element types differ");
  if (has_bias() && shape_size(get_input_shape(2)) != n)
    fail(concat_message("bias shape ", get_input_shape(2), " does not have ", n, " elements"));
  set_output_type(0, t, out);
}

const std::vector<std::string>& internal_op_names() {
  static const std::vector<std::string> names{MatMulBias::type_name, FusedElementwise::type_name,
                                              FusedAllReduce::type_name, Reorder::type_name,
                                              ConvolutionBias::type_name,
                                              BatchNormRelu::type_name,
                                              BatchNormReluBackprop::type_name,
                                              MaxPoolWithWorkspace::type_name,
                                              MaxPoolBackpropWithWorkspace::type_name,
                                              AttentionSoftmax::type_name,
                                              AttentionSoftmaxBackprop::type_name};
  return names;
}

FusedElementwise::FusedElementwise(const OutputVector& inputs, std::vector<Instr> program,
                                   const Shape& shape, element::Type type, std::string description,
                                   std::vector<int> extra_outputs)
    : Op<FusedElementwise>(inputs),
      m_program(std::move(program)),
      m_extra_outputs(std::move(extra_outputs)),
      m_shape(shape),
      m_type(type),
      m_description(std::move(description)) {
  constructor_validate_and_infer_types();
}

void FusedElementwise::validate_and_infer_types() {
  if (m_program.empty()) fail("has an empty program");
  for (size_t i = 0; i < get_input_size(); ++i) {
    const Shape& s = get_input_shape(i);
    if (!s.empty() && s != m_shape)
      fail(concat_message("input ", i, " has shape ", s, "; expected ", m_shape, " or a scalar"));
    element::Type t = get_input_element_type(i);
    if (t != m_type && t != element::boolean)
      fail_type(concat_message("input ", i, " has element type ", t));
  }
  int first = static_cast<int>(get_input_size());
  int last = first + static_cast<int>(m_program.size()) - 1;
  for (int r : m_extra_outputs)
    if (r < first || r >= last)
      fail(concat_message("extra output register ", r, " is not an instruction's before the last (",
                          first, " to ", last - 1, ")"));
  set_output_size(1 + m_extra_outputs.size());
  for (size_t o = 0; o <= m_extra_outputs.size(); ++o) set_output_type(o, m_type, m_shape);
}

namespace {

// x itself, or the argument of a 2-D transpose x = Reshape(y, {1,0}, ...) with the flag flipped.
std::pair<Output, bool> strip_transpose(const Output& x, bool transposed) {
  auto* r = dynamic_cast<const op::Reshape*>(x.get_node());
  if (r && r->get_input_shape(0).size() == 2 && r->get_input_order() == AxisVector{1, 0}) {
    const Shape& in = r->get_input_shape(0);
    if (x.get_shape() == Shape{in[1], in[0]}) return {r->input_value(0), !transposed};
  }
  return {x, transposed};
}

// A Dot operand x = Reshape(y, rotation) whose matrix (x's axes split at `split`) is the
// transpose of y's matrix: the rotation moves y's last axis to the front with split 1 (then
// y's matrix splits before its last axis), or y's first axis to the back with split = rank - 1
// (y's splits after its first). Returns y and its split, or nothing.
std::optional<std::pair<Output, size_t>> rotated_transpose(const Output& x, size_t split) {
  auto* r = dynamic_cast<const op::Reshape*>(x.get_node());
  if (!r) return std::nullopt;
  const AxisVector& order = r->get_input_order();
  const Shape& in = r->get_input_shape(0);
  size_t rank = in.size();
  if (rank < 2 || order.size() != rank) return std::nullopt;
  Shape permuted;
  for (auto a : order) permuted.push_back(in[a]);
  if (permuted != x.get_shape()) return std::nullopt;  // a transpose, not a relayout
  bool last_to_front = order[0] == rank - 1, first_to_back = order[rank - 1] == 0;
  for (size_t i = 1; i < rank; ++i) last_to_front = last_to_front && order[i] == i - 1;
  for (size_t i = 0; i + 1 < rank; ++i) first_to_back = first_to_back && order[i] == i + 1;
  if (last_to_front && split == 1) return std::make_pair(r->input_value(0), rank - 1);
  if (first_to_back && split == rank - 1) return std::make_pair(r->input_value(0), size_t{1});
  return std::nullopt;
}

// The nodes reading each value of a function.
class Users {
 public:
  explicit Users(const NodeVector& ops) {
    for (const auto& node : ops)
      for (const auto& in : node->input_values()) m_users[in].push_back(node.get());
  }
  const std::vector<Node*>* of(const Output& v) const {
    auto it = m_users.find(v);
    return it == m_users.end() ? nullptr : &it->second;
  }
  // The only reader of v, or nullptr.
  Node* single(const Output& v) const {
    auto* u = of(v);
    return u && u->size() == 1 ? (*u)[0] : nullptr;
  }

 private:
  std::map<Output, std::vector<Node*>> m_users;
};

bool is_bias_for(const Output& v, size_t n) {
  const Shape& s = v.get_shape();
  return (s == Shape{n} || s == Shape{1, n});
}

}  // namespace

size_t fuse_matmul_bias_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  auto single_user = [&](const Output& v) { return users.single(v); };

  std::map<Output, Output> replacements;
  size_t fused = 0;
  for (const auto& node : ops) {
    bool ta = false, tb = false;
    const std::string& type = node->get_type_name();
    if (type != "Dot" && type != "MatMul") continue;
    Output a = node->input_value(0), b = node->input_value(1);
    size_t a_split = 1, b_split = 1;
    if (type == "Dot") {
      // Dot(A, B, c) is the GEMM of A's matrix split before its last c axes and B's split
      // after its first c: any rank, no copy. Transposes that rotate an operand's axes are
      // strides of the same GEMM (a Dot's gradient builds them).
      auto& d = static_cast<const op::Dot&>(*node);
      size_t c = d.get_reduction_axes_count(), ra = a.get_shape().size(), rb = b.get_shape().size();
      if (c == 0 || ra < c || rb < c || (ra < 2 && rb < 2)) continue;
      a_split = ra - c;
      b_split = c;
      if (a_split == 0 || b_split == rb) {  // a row or column vector: as the 2-D case below
        if (ra != 2 || rb != 2) continue;
      }
      if (auto y = rotated_transpose(a, a_split)) {
        a = y->first;
        a_split = y->second;
        ta = true;
      }
      if (auto y = rotated_transpose(b, b_split)) {
        b = y->first;
        b_split = y->second;
        tb = true;
      }
    } else if (type == "MatMul") {
      auto& mm = static_cast<const op::MatMul&>(*node);
      if (node->get_input_shape(0).size() != 2 || node->get_input_shape(1).size() != 2) continue;
      std::tie(a, ta) = strip_transpose(a, mm.get_transpose_a());
      std::tie(b, tb) = strip_transpose(b, mm.get_transpose_b());
    } else {
      continue;
    }
    element::Type t = node->get_element_type();
    if (!t.is_numeric()) continue;
    const Shape& out = node->get_shape();
    size_t n = out.empty() ? 1 : out.back();
    Output value = node->output(0), bias;
    bool relu = false;
    if (Node* add = single_user(value); add && add->get_type_name() == "Add" && !out.empty()) {
      size_t other = add->input_value(0) == value ? 1 : 0;
      Output candidate = add->input_value(other);
      // One number per column of the GEMM: the result's last axis must be all its columns,
      // i.e. op(b) contributes that one axis (b's axes after its split, or before when
      // transposed).
      const Shape& bs = b.get_shape();
      size_t columns = 1;
      for (size_t i = tb ? 0 : b_split; i < (tb ? b_split : bs.size()); ++i) columns *= bs[i];
      if (add->get_shape() == out && is_bias_for(candidate, n) && columns == n) {
        bias = candidate;
        value = add->output(0);
      }
    }
    if (Node* r = single_user(value); r && r->get_type_name() == "Relu") {
      relu = true;
      value = r->output(0);
    }
    if (!bias && !relu && a == node->input_value(0) && b == node->input_value(1) &&
        type == "MatMul")
      continue;  // nothing gained
    auto m = std::make_shared<MatMulBias>(a, b, bias, ta, tb, relu, static_cast<int64_t>(a_split),
                                          static_cast<int64_t>(b_split));
    if (m->get_shape() != out) continue;  // not the same product (should not happen)
    m->set_friendly_name(node->get_friendly_name());
    replacements[value] = m->output(0);
    ++fused;
  }
  replace_outputs(f, replacements);
  return fused;
}

ConvolutionBias::ConvolutionBias(const Output& x, const Output& w, const Output& bias,
                                 const op::ConvolutionWindow& window, bool relu,
                                 const Output& summand)
    : Op<ConvolutionBias>(summand ? OutputVector{x, w, bias, summand} : OutputVector{x, w, bias}),
      m_window(window),
      m_relu(relu) {
  constructor_validate_and_infer_types();
}

void ConvolutionBias::validate_and_infer_types() {
  if (get_input_size() != 3 && get_input_size() != 4) fail("expects 3 or 4 inputs");
  const Shape& data = get_input_shape(0);
  m_window.validate(*this, data.size() < 2 ? 0 : data.size() - 2);
  Shape out = op::convolution_output_shape(*this, data, get_input_shape(1), m_window);
  if (shape_size(get_input_shape(2)) != out[1])
    fail(concat_message("bias ", get_input_shape(2), " does not have ", out[1], " elements"));
  if (has_summand() && get_input_shape(INPUT_SUMMAND) != out)
    fail(concat_message("summand ", get_input_shape(INPUT_SUMMAND), " is not the result's shape ", out));
  for (size_t i = 1; i < get_input_size(); ++i)
    if (get_input_element_type(i) != get_input_element_type(0)) fail_type("element types differ");
  set_output_type(0, get_input_element_type(0), out);
}

namespace {
// A value that holds one number per channel of an [N, C, ...] result: [C], or [1, C, 1, ...].
bool is_channel_bias(const Output& v, const Shape& out) {
  const Shape& s = v.get_shape();
  if (s == Shape{out[1]}) return true;
  if (s.size() != out.size() || s[1] != out[1]) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (i != 1 && s[i] != 1) return false;
  return true;
}

}  // namespace

size_t fuse_convolution_bias_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  auto single_user = [&](const Output& v) { return users.single(v); };
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    auto* conv = dynamic_cast<op::Convolution*>(node.get());
    if (!conv || !dnnl_takes_convolution(*conv)) continue;
    Node* add = single_user(conv->output(0));
    if (!add || add->get_type_name() != "Add" || add->get_shape() != conv->get_shape()) continue;
    Output bias = add->input_value(add->input_value(0) == conv->output(0) ? 1 : 0);
    if (!is_channel_bias(bias, conv->get_shape())) continue;
    Output value = add->output(0);
    bool relu = false;
    if (Node* r = single_user(value); r && r->get_type_name() == "Relu") {
      relu = true;
      value = r->output(0);
    }
    auto fused = std::make_shared<ConvolutionBias>(conv->input_value(0), conv->input_value(1), bias,
                                                   conv->get_window(), relu);
    fused->set_friendly_name(conv->get_friendly_name());
    replacements[value] = fused->output(0);
  }
  replace_outputs(f, replacements);
  return replacements.size();
}

size_t fuse_convolution_sum_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    auto* conv = dynamic_cast<ConvolutionBias*>(node.get());
    if (!conv || conv->get_relu() || conv->has_summand()) continue;
    Node* add = users.single(conv->output(0));
    if (!add || add->get_type_name() != "Add" || add->get_shape() != conv->get_shape()) continue;
    Output summand = add->input_value(add->input_value(0) == conv->output(0) ? 1 : 0);
    if (summand.get_shape() != conv->get_shape() || summand == conv->output(0)) continue;
    Output value = add->output(0);
    bool relu = false;
    if (Node* r = users.single(value); r && r->get_type_name() == "Relu") {
      relu = true;
      value = r->output(0);
    }
    auto fused = std::make_shared<ConvolutionBias>(conv->input_value(0), conv->input_value(1),
                                                   conv->input_value(2), conv->get_window(), relu,
                                                   summand);
    fused->set_friendly_name(conv->get_friendly_name());
    replacements[value] = fused->output(0);
  }
  replace_outputs(f, replacements);
  return replacements.size();
}

namespace {
// The output `v` stands for: itself, or what the GetOutputElements it comes from read.
Output through_get_output_element(const Output& v) {
  Output x = v;
  while (auto* goe = dynamic_cast<op::GetOutputElement*>(x.get_node())) x = goe->input_value(0);
  return x;
}

std::shared_ptr<Node> scalar_like(const Output& like, double value) {
  return std::make_shared<op::Constant>(like.get_element_type(), Shape{}, std::vector<double>{value});
}
}  // namespace

size_t fold_batch_norm_into_convolution(Function& f) {
  using BN = op::BatchNormBase;
  constexpr auto np = op::AutoBroadcast::numpy;
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    auto* bn = dynamic_cast<op::BatchNormInference*>(node.get());
    if (!bn) continue;
    Output data = bn->input_value(BN::INPUT_DATA);
    auto* conv = dynamic_cast<op::Convolution*>(data.get_node());
    if (!conv || users.single(data) != bn || !dnnl_takes_convolution(*conv)) continue;
    const Shape& out = conv->get_shape();
    Shape channel(out.size(), 1), filter_channel(conv->get_input_shape(1).size(), 1);
    channel[1] = filter_channel[0] = out[1];
    auto reshape = [](const Output& v, const Shape& s) {
      return std::make_shared<op::Reshape>(v, AxisVector{0}, s);
    };
    Output var = bn->input_value(BN::INPUT_VARIANCE);
    auto root = std::make_shared<op::Sqrt>(
        std::make_shared<op::Add>(var, scalar_like(var, bn->get_eps_value()), np));
    auto scale = std::make_shared<op::Divide>(bn->input_value(BN::INPUT_GAMMA), root, np);
    auto filters =
        std::make_shared<op::Multiply>(conv->input_value(1), reshape(scale, filter_channel), np);
    auto bias = std::make_shared<op::Subtract>(
        bn->input_value(BN::INPUT_BETA),
        std::make_shared<op::Multiply>(bn->input_value(BN::INPUT_MEAN), scale, np), np);
    const op::ConvolutionWindow& w = conv->get_window();
    auto folded = std::make_shared<op::Convolution>(conv->input_value(0), filters, w.strides,
                                                    w.dilations, w.padding_below, w.padding_above,
                                                    w.data_dilations, w.groups);
    folded->set_friendly_name(conv->get_friendly_name());
    auto sum = std::make_shared<op::Add>(folded, reshape(bias, channel), np);
    sum->set_friendly_name(bn->get_friendly_name());
    replacements[bn->output(0)] = sum->output(0);
  }
  replace_outputs(f, replacements);
  return replacements.size();
}

BatchNormRelu::BatchNormRelu(const Node& bn, bool mask)
    : Op<BatchNormRelu>(bn.input_values()),
      BatchNormBase(dynamic_cast<const BatchNormBase&>(bn).get_eps_value()),
      m_training(bn.get_type_name() == op::BatchNormTraining::type_name),
      m_mask(mask) {
  constructor_validate_and_infer_types();
}

void BatchNormRelu::validate_and_infer_types() {
  check_inputs(*this, m_training ? 3 : 5);
  if (m_mask && !m_training) fail("a ReLU mask output needs the training form");
  const Shape& data = get_input_shape(INPUT_DATA);
  element::Type t = get_input_element_type(INPUT_DATA);
  set_output_size(m_training ? (m_mask ? 4 : 3) : 1);
  set_output_type(0, t, data);
  if (m_training) {
    set_output_type(1, t, Shape{data[1]});
    set_output_type(2, t, Shape{data[1]});
  }
  if (m_mask) set_output_type(OUTPUT_MASK, element::u8, data);
}

BatchNormReluBackprop::BatchNormReluBackprop(const Node& backprop, const Output& delta,
                                             const Output& mask)
    : Op<BatchNormReluBackprop>({backprop.input_value(INPUT_GAMMA), backprop.input_value(INPUT_BETA),
                                 backprop.input_value(INPUT_DATA), backprop.input_value(INPUT_MEAN),
                                 backprop.input_value(INPUT_VARIANCE), delta, mask}),
      BatchNormBase(dynamic_cast<const BatchNormBase&>(backprop).get_eps_value()) {
  constructor_validate_and_infer_types();
}

void BatchNormReluBackprop::validate_and_infer_types() {
  check_input_count(7);
  check_inputs(*this, 6);
  const Shape& in = get_input_shape(INPUT_DATA);
  if (get_input_element_type(INPUT_MASK) != element::u8 || get_input_shape(INPUT_MASK) != in)
    fail(concat_message("mask must be u8 of the input's shape ", in, ", got ",
                        get_input_element_type(INPUT_MASK), get_input_shape(INPUT_MASK)));
  element::Type t = get_input_element_type(INPUT_DATA);
  set_output_size(3);
  set_output_type(0, t, in);
  set_output_type(1, t, Shape{in[1]});
  set_output_type(2, t, Shape{in[1]});
}

namespace {
// The BatchNormTrainingBackprops whose delta is ReLU's gradient read from `relu`'s output,
// Select(Greater(relu, 0), d, 0) (as Relu's gradient rule builds it), read only there, on the
// same data as `bn`, with its epsilon; with each, d.
std::vector<std::pair<Node*, Output>> relu_gradient_backprops(const Node& bn, Node& relu,
                                                             const Users& users) {
  std::vector<std::pair<Node*, Output>> found;
  const auto* greaters = users.of(relu.output(0));
  if (!greaters) return found;
  for (Node* g : *greaters) {
    if (g->get_type_name() != op::Greater::type_name || g->input_value(0) != relu.output(0) ||
        !autodiff::is_zeros(g->input_value(1)) || !users.of(g->output(0)))
      continue;
    for (Node* sel : *users.of(g->output(0))) {
      if (sel->get_type_name() != op::Select::type_name || sel->input_value(0) != g->output(0) ||
          !autodiff::is_zeros(sel->input_value(2)) ||
          sel->input_value(1).get_shape() != relu.get_output_shape(0))
        continue;
      Node* b = users.single(sel->output(0));
      if (!b || b->get_type_name() != op::BatchNormTrainingBackprop::type_name) continue;
      const auto& base = dynamic_cast<const op::BatchNormBase&>(*b);
      if (b->input_value(op::BatchNormBase::INPUT_DELTA) != sel->output(0) ||
          b->input_value(op::BatchNormBase::INPUT_DATA) != bn.input_value(op::BatchNormBase::INPUT_DATA) ||
          base.get_eps_value() != dynamic_cast<const op::BatchNormBase&>(bn).get_eps_value())
        continue;
      found.emplace_back(b, sel->input_value(1));
    }
  }
  return found;
}
}  // namespace

size_t fuse_batch_norm_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  std::map<Output, Output> replacements;
  size_t fused_count = 0;
  for (const auto& node : ops) {
    if (node->get_type_name() != "Relu") continue;
    Output v = node->input_value(0);
    Output normalized = through_get_output_element(v);
    Node* bn = normalized.get_node();
    const std::string& t = bn->get_type_name();
    if (normalized.get_index() != 0 ||
        (t != op::BatchNormTraining::type_name && t != op::BatchNormInference::type_name))
      continue;
    // The ReLU (through its GetOutputElement, if any) is the normalized value's only reader.
    bool only = users.single(v) == node.get();
    if (v != normalized) only = only && users.single(normalized) == v.get_node();
    if (!only) continue;
    auto backprops = t == op::BatchNormTraining::type_name
                         ? relu_gradient_backprops(*bn, *node, users)
                         : std::vector<std::pair<Node*, Output>>{};
    auto fused = std::make_shared<BatchNormRelu>(*bn, !backprops.empty());
    fused->set_friendly_name(bn->get_friendly_name());
    replacements[node->output(0)] = fused->output(0);
    for (size_t i = 1; i < bn->get_output_size(); ++i) replacements[bn->output(i)] = fused->output(i);
    ++fused_count;
    for (auto& [backprop, delta] : backprops) {
      auto grad = std::make_shared<BatchNormReluBackprop>(*backprop, delta,
                                                          fused->output(BatchNormRelu::OUTPUT_MASK));
      grad->set_friendly_name(backprop->get_friendly_name());
      for (size_t i = 0; i < backprop->get_output_size(); ++i)
        replacements[backprop->output(i)] = grad->output(i);
      ++fused_count;
    }
  }
  replace_outputs(f, replacements);
  return fused_count;
}

FusedAllReduce::FusedAllReduce(const OutputVector& inputs, distributed::ReduceOp reduce_op,
                               std::shared_ptr<distributed::Communicator> comm)
    : Op<FusedAllReduce>(inputs), m_reduce_op(reduce_op) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

FusedAllReduce::FusedAllReduce(const OutputVector& inputs, const std::string& reduce_op,
                               std::shared_ptr<distributed::Communicator> comm)
    : FusedAllReduce(inputs, distributed::reduce_op_from_string(reduce_op), std::move(comm)) {}

void FusedAllReduce::validate_and_infer_types() {
  if (get_input_size() == 0) fail("needs at least one input");
  communicator();
  element::Type t = get_input_element_type(0);
  set_output_size(get_input_size());
  for (size_t i = 0; i < get_input_size(); ++i) {
    if (get_input_element_type(i) != t) fail_type("inputs must share one element type");
    set_output_type(i, t, get_input_shape(i));
  }
}

// Written like the AllReduce ops it stands for, so a disagreement between ranks is reported
// in the user's terms.
std::string FusedAllReduce::collective_signature() const {
  std::string t = get_input_element_type(0).get_type_name();
  std::string op = distributed::to_string(m_reduce_op);
  if (get_input_size() == 1) return "AllReduce " + t + to_braces(get_input_shape(0)) + " " + op;
  std::string s = "AllReduce " + t + " " + op + " of";
  for (size_t i = 0; i < get_input_size(); ++i) s += " " + to_braces(get_input_shape(i));
  return s + " (fused)";
}

size_t default_fusion_threshold() { return static_cast<size_t>(settings::integer("NGRAPH_FUSION_THRESHOLD")); }

size_t fuse_allreduce(Function& f, size_t threshold_bytes) {
  struct Bucket {
    std::shared_ptr<distributed::Communicator> comm;
    element::Type type;
    std::string op;
    std::vector<Node*> members;
    size_t bytes = 0;
  };
  std::vector<Bucket> done;
  std::vector<Bucket> open;  // at most one open bucket per (comm, type, op)
  // The AllReduces each node depends on: an AllReduce whose input needs another one's
  // result cannot share its collective (that would be a cycle).
  std::map<const Node*, std::set<const Node*>> upstream;
  for (const auto& node : f.get_ordered_ops()) {
    std::set<const Node*> up;
    for (const auto& in : node->input_values()) {
      const auto& u = upstream[in.get_node()];
      up.insert(u.begin(), u.end());
      if (dynamic_cast<const op::AllReduce*>(in.get_node())) up.insert(in.get_node());
    }
    upstream[node.get()] = std::move(up);
  }
  for (const auto& node : f.get_ordered_ops()) {
    auto* ar = dynamic_cast<op::AllReduce*>(node.get());
    if (!ar) continue;
    auto r = ar->get_reduce_op();
    if (r != distributed::ReduceOp::sum && r != distributed::ReduceOp::mean) continue;
    std::string op = distributed::to_string(r);
    size_t bytes = shape_size(ar->get_shape()) * ar->get_element_type().size();
    auto it = std::find_if(open.begin(), open.end(), [&](const Bucket& b) {
      return b.comm == ar->get_communicator() && b.type == ar->get_element_type() && b.op == op;
    });
    bool depends = false;
    if (it != open.end())
      for (Node* m : it->members) depends = depends || upstream[ar].count(m);
    if (it != open.end() && (depends || it->bytes + bytes > threshold_bytes || threshold_bytes == 0)) {
      done.push_back(std::move(*it));
      open.erase(it);
      it = open.end();
    }
    if (it == open.end()) {
      open.push_back(Bucket{ar->get_communicator(), ar->get_element_type(), op, {}, 0});
      it = std::prev(open.end());
    }
    it->members.push_back(ar);
    it->bytes += bytes;
  }
  for (auto& b : open) done.push_back(std::move(b));
  std::map<Output, Output> replacements;
  for (const auto& b : done) {
    OutputVector inputs;
    for (Node* m : b.members) inputs.push_back(m->input_value(0));
    auto fused = std::make_shared<FusedAllReduce>(inputs, b.op, b.comm);
    std::string names;
    for (Node* m : b.members) names += (names.empty() ? "" : "+") + m->get_name();
    fused->set_friendly_name(names);
    for (size_t i = 0; i < b.members.size(); ++i)
      replacements[b.members[i]->output(0)] = fused->output(i);
  }
  replace_outputs(f, replacements);
  return done.size();
}

namespace {

using Code = FusedElementwise::Code;

// The fusible ops (generated from scalar_ops.hpp): their code, and whether they produce a
// mask (a boolean used by Select).
bool fusible_code(const std::string& t, Code& code, bool& mask) {
  static const std::map<std::string, std::pair<Code, bool>> table = [] {
    std::map<std::string, std::pair<Code, bool>> m;
#define NGRAPH_CPU_VALUE_OP(Name) \
  if (scalar::Name::fusible) m[#Name] = {Code::Name, false};
#define NGRAPH_CPU_MASK_OP(Name) \
  if (scalar::Name::fusible) m[#Name] = {Code::Name, true};
    NGRAPH_CPU_FUSED_OPS(NGRAPH_CPU_VALUE_OP, NGRAPH_CPU_VALUE_OP, NGRAPH_CPU_MASK_OP,
                         NGRAPH_CPU_VALUE_OP)
#undef NGRAPH_CPU_VALUE_OP
#undef NGRAPH_CPU_MASK_OP
    return m;
  }();
  auto it = table.find(t);
  if (it == table.end()) return false;
  code = it->second.first;
  mask = it->second.second;
  return true;
}

// A node the group can evaluate: floating-point data of `shape` (masks: boolean of `shape`
// from floating-point operands), every input of `shape` or a scalar.
bool fusible(const Node& node, const Shape& shape, element::Type type) {
  Code code;
  bool mask;
  if (node.get_output_size() != 1 || !fusible_code(node.get_type_name(), code, mask)) return false;
  if (node.get_shape() != shape) return false;
  if (node.get_element_type() != (mask ? element::boolean : type)) return false;
  for (size_t i = 0; i < node.get_input_size(); ++i) {
    const Output& in = node.input_value(i);
    bool cond = code == Code::Select && i == 0;
    if (in.get_element_type() != (cond ? element::boolean : type)) return false;
    if (!in.get_shape().empty() && in.get_shape() != shape) return false;
  }
  return true;
}

}  // namespace

size_t fuse_elementwise(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  std::set<const Node*> taken;
  std::map<Output, Output> replacements;
  size_t groups = 0;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const auto& root = *it;
    if (taken.count(root.get())) continue;
    element::Type type = root->get_output_size() == 1 ? root->get_element_type() : element::undefined;
    if (!type.is_real() || type.is_storage_only() || !fusible(*root, root->get_shape(), type))
      continue;
    const Shape shape = root->get_shape();
    // Grow the group through inputs that only the group uses, or that variable updates and
    // results take besides: they read the value once the group has written it as an extra
    // output. Only sinks qualify (an Assign, or a Result nothing reads: no cycle can form),
    // and only where the group's own value goes to sinks too (an optimizer's update), so the
    // scheduler, which runs updates late, delays nothing another rank waits for.
    auto is_sink = [&](Node* u) {
      if (u->get_type_name() == op::Assign::type_name) return true;
      return u->get_type_name() == op::Result::type_name && !users.of(u->output(0));
    };
    bool to_sinks = true;
    if (const auto* readers = users.of(root->output(0)))
      for (Node* u : *readers) to_sinks = to_sinks && is_sink(u);
    std::set<const Node*> members{root.get()};
    std::vector<Node*> stack{root.get()};
    std::vector<Output> extra;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const auto& in : n->input_values()) {
        Node* p = in.get_node();
        if (members.count(p) || taken.count(p) || !fusible(*p, shape, type)) continue;
        bool outside = false, elsewhere = false;
        for (Node* u : *users.of(in)) {
          if (members.count(u)) continue;
          (to_sinks && is_sink(u) && in.get_element_type() == type ? outside : elsewhere) = true;
        }
        if (elsewhere) continue;
        members.insert(p);
        stack.push_back(p);
        if (outside) extra.push_back(in);
      }
    }
    if (members.size() < 2) continue;
    // Program in topological order (the order of `ops`); inputs deduplicated.
    OutputVector inputs;
    std::map<Output, int> reg;
    std::vector<FusedElementwise::Instr> program;
    std::string description;
    auto operand = [&](const Output& v) {
      auto r = reg.find(v);
      if (r != reg.end()) return r->second;
      int k = static_cast<int>(inputs.size());
      inputs.push_back(v);
      reg[v] = k;
      return k;
    };
    std::vector<const Node*> order;
    for (const auto& n : ops)
      if (members.count(n.get())) order.push_back(n.get());
    // Inputs first: registers 0..k-1; then one register per instruction.
    for (const Node* n : order)
      for (const auto& in : n->input_values())
        if (!members.count(in.get_node())) operand(in);
    int next = static_cast<int>(inputs.size());
    for (const Node* n : order) {
      Code code;
      bool mask;
      fusible_code(n->get_type_name(), code, mask);
      FusedElementwise::Instr ins{code, next, -1, -1, -1};
      int* slots[] = {&ins.a, &ins.b, &ins.c};
      for (size_t i = 0; i < n->get_input_size(); ++i) *slots[i] = reg.at(n->input_value(i));
      reg[const_cast<Node*>(n)->output(0)] = next++;
      program.push_back(ins);
      description += (description.empty() ? "" : ",") + n->get_type_name();
      taken.insert(n);
    }
    std::vector<int> extra_regs;
    for (const auto& v : extra) extra_regs.push_back(reg.at(v));
    auto fused =
        std::make_shared<FusedElementwise>(inputs, program, shape, type, description, extra_regs);
    replacements[root->output(0)] = fused->output(0);
    for (size_t e = 0; e < extra.size(); ++e) replacements[extra[e]] = fused->output(e + 1);
    ++groups;
  }
  replace_outputs(f, replacements);
  return groups;
}

MaxPoolWithWorkspace::MaxPoolWithWorkspace(const op::MaxPool& pool)
    : Op<MaxPoolWithWorkspace>({pool.input_value(0)}), op::PoolingAttributes(pool) {
  constructor_validate_and_infer_types();
}

void MaxPoolWithWorkspace::validate_and_infer_types() {
  check_input_count(1);
  Shape out = op::infer_pooling_shape(*this, get_input_shape(0), *this, false);
  set_output_size(2);
  set_output_type(0, get_input_element_type(0), out);
  set_output_type(1, element::i32, out);
}

MaxPoolBackpropWithWorkspace::MaxPoolBackpropWithWorkspace(const op::MaxPoolBackprop& backprop,
                                                           const Output& workspace)
    : Op<MaxPoolBackpropWithWorkspace>(
          {backprop.input_value(0), backprop.input_value(1), workspace}),
      op::PoolingAttributes(backprop) {
  constructor_validate_and_infer_types();
}

void MaxPoolBackpropWithWorkspace::validate_and_infer_types() {
  check_input_count(3);
  const Shape& arg = get_input_shape(0);
  Shape out = op::infer_pooling_shape(*this, arg, *this, false);
  if (get_input_shape(1) != out || get_input_shape(2) != out)
    fail(concat_message("delta shape ", get_input_shape(1), " and workspace shape ",
                        get_input_shape(2), " must be the pooling result shape ", out));
  set_output_type(0, get_input_element_type(0), arg);
}

namespace {
// The same windows over the same data: MaxPoolBackprop has no ceil_mode, its padding above is
// the forward's effective one.
bool same_geometry(const op::MaxPool& f, const op::MaxPoolBackprop& b) {
  const Shape& data = f.get_input_shape(0);
  return f.get_window_shape() == b.get_window_shape() &&
         f.get_window_movement_strides() == b.get_window_movement_strides() &&
         f.get_padding_below() == b.get_padding_below() &&
         op::effective_padding_above(data, f) == b.get_padding_above();
}
}  // namespace

size_t fuse_max_pool_workspace(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  std::map<Output, std::vector<op::MaxPool*>> pools;  // by argument
  for (const auto& node : ops)
    if (auto* m = dynamic_cast<op::MaxPool*>(node.get()); m && max_pool_workspace_supported(*m))
      pools[m->input_value(0)].push_back(m);
  std::map<const Node*, std::shared_ptr<MaxPoolWithWorkspace>> paired;
  std::map<Output, Output> replacements;
  size_t fused = 0;
  for (const auto& node : ops) {
    auto* b = dynamic_cast<op::MaxPoolBackprop*>(node.get());
    if (!b) continue;
    auto it = pools.find(b->input_value(0));
    if (it == pools.end()) continue;
    for (op::MaxPool* m : it->second) {
      if (!same_geometry(*m, *b)) continue;
      auto& forward = paired[m];
      if (!forward) {
        forward = std::make_shared<MaxPoolWithWorkspace>(*m);
        forward->set_friendly_name(m->get_friendly_name());
        replacements[m->output(0)] = forward->output(0);
      }
      auto backward = std::make_shared<MaxPoolBackpropWithWorkspace>(*b, forward->output(1));
      replacements[b->output(0)] = backward->output(0);
      ++fused;
      break;
    }
  }
  replace_outputs(f, replacements);
  return fused;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph

namespace ngraph {
namespace runtime {
namespace cpu {

// ------------------------------------------------------------------ attention softmax

namespace {

void check_row_op(const Node& node, size_t data, const std::vector<size_t>& same, size_t mask) {
  element::Type t = node.get_input_element_type(data);
  const Shape& shape = node.get_input_shape(data);
  if (t != element::f32 && t != element::f64)
    node.fail_type(concat_message("data must be f32 or f64, got element type ", t));
  if (shape.empty()) node.fail("data must have rank >= 1");
  for (size_t i : same)
    if (node.get_input_shape(i) != shape || node.get_input_element_type(i) != t)
      node.fail(concat_message("input ", i, " must be ", t, shape));
  if (mask < node.get_input_size()) {
    if (node.get_input_element_type(mask) != element::boolean)
      node.fail_type("mask must be boolean");
    if (broadcast_shapes(node, node.get_input_shape(mask), shape, op::AutoBroadcast::numpy) != shape)
      node.fail(concat_message("mask shape ", node.get_input_shape(mask),
                               " does not broadcast to ", shape));
  }
}

OutputVector with_mask(OutputVector args, const Output& mask) {
  if (mask) args.push_back(mask);
  return args;
}

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

}  // namespace

AttentionSoftmax::AttentionSoftmax(const Output& scores, const Output& mask, double scale)
    : Op<AttentionSoftmax>(with_mask({scores}, mask)), m_scale(scale) {
  constructor_validate_and_infer_types();
}

void AttentionSoftmax::validate_and_infer_types() {
  check_row_op(*this, 0, {}, 1);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

AttentionSoftmaxBackprop::AttentionSoftmaxBackprop(const Output& delta, const Output& y,
                                                   const Output& mask, double scale)
    : Op<AttentionSoftmaxBackprop>(with_mask({delta, y}, mask)), m_scale(scale) {
  constructor_validate_and_infer_types();
}

void AttentionSoftmaxBackprop::validate_and_infer_types() {
  check_row_op(*this, 0, {1}, 2);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

size_t fuse_attention_softmax(Function& f) {
  size_t fused = 0;
  // Forward: Softmax(Select(mask, scores * c, -inf)) over the last axis.
  {
    NodeVector ops = f.get_ordered_ops();
    Users users(ops);
    std::map<Output, Output> replacements;
    for (const auto& node : ops) {
      if (node->get_type_name() != op::Softmax::type_name) continue;
      auto& sm = static_cast<const op::Softmax&>(*node);
      element::Type t = sm.get_element_type();
      if ((t != element::f32 && t != element::f64) || !is_last_axis(sm.get_axes(), sm.get_shape().size()))
        continue;
      const Shape& shape = sm.get_shape();
      Output x = node->input_value(0), mask;
      double scale = 1.0, fill = 0;
      Node* sel = x.get_node();
      if (sel->get_type_name() == op::Select::type_name && users.single(x) == node.get() &&
          sel->get_input_shape(1) == shape && scalar_constant(sel->input_value(2), fill) &&
          std::isinf(fill) && fill < 0) {
        mask = sel->input_value(0);
        x = sel->input_value(1);
      }
      Node* mul = x.get_node();
      if (mul->get_type_name() == op::Multiply::type_name && users.single(x) &&
          (users.single(x) == node.get() || (mask && users.single(x) == sel))) {
        for (size_t i = 0; i < 2; ++i) {
          double c = 0;
          if (mul->get_input_shape(1 - i) == shape && scalar_constant(mul->input_value(i), c)) {
            scale = c;
            x = mul->input_value(1 - i);
            break;
          }
        }
      }
      // A softmax with neither a scale nor a mask keeps its own kernel (the same row loop
      // over the last axis).
      if (!mask && scale == 1.0 && x == node->input_value(0)) continue;
      auto a = std::make_shared<AttentionSoftmax>(x, mask, scale);
      a->set_friendly_name(node->get_friendly_name());
      replacements[node->output(0)] = a->output(0);
      ++fused;
    }
    replace_outputs(f, replacements);
  }
  // Backward: y * (d - Broadcast(Sum(d * y))) [then Select(mask, ., 0)] [then * c], for y an
  // AttentionSoftmax's output, with its mask and scale.
  NodeVector ops = f.get_ordered_ops();
  Users users(ops);
  std::map<Output, Output> replacements;
  for (const auto& node : ops) {
    if (node->get_type_name() != op::Multiply::type_name) continue;
    const Shape& shape = node->get_shape();
    for (size_t yi = 0; yi < 2; ++yi) {
      Output y = node->input_value(yi);
      auto* fwd = dynamic_cast<AttentionSoftmax*>(y.get_node());
      if (!fwd || y.get_shape() != shape) continue;
      Node* sub = node->input_value(1 - yi).get_node();
      if (sub->get_type_name() != op::Subtract::type_name || users.single(sub->output(0)) != node.get())
        continue;
      Output d = sub->input_value(0);
      Node* bc = sub->input_value(1).get_node();
      if (d.get_shape() != shape || bc->get_type_name() != op::Broadcast::type_name ||
          users.single(bc->output(0)) != sub || bc->get_shape() != shape ||
          static_cast<const op::Broadcast&>(*bc).get_broadcast_axes() != AxisSet{shape.size() - 1})
        continue;  // the row sums, broadcast back along the rows
      Node* sum = bc->input_value(0).get_node();
      if (sum->get_type_name() != op::Sum::type_name || users.single(sum->output(0)) != bc ||
          !is_last_axis(static_cast<const op::Sum&>(*sum).get_reduction_axes(), shape.size()))
        continue;
      Node* dy = sum->input_value(0).get_node();
      if (dy->get_type_name() != op::Multiply::type_name || users.single(dy->output(0)) != sum ||
          dy->get_shape() != shape ||
          !((dy->input_value(0) == d && dy->input_value(1) == y) ||
            (dy->input_value(1) == d && dy->input_value(0) == y)))
        continue;
      // The softmax's gradient; the mask and scale of the forward follow where autodiff put
      // them (the Select's and the Multiply's rules).
      Output root = node->output(0), mask;
      double scale = 1.0;
      if (fwd->has_mask()) {
        Node* sel = users.single(root);
        double zero = 1;
        if (!sel || sel->get_type_name() != op::Select::type_name || sel->input_value(1) != root ||
            sel->input_value(0) != fwd->input_value(1) || !scalar_constant(sel->input_value(2), zero) ||
            zero != 0 || sel->get_shape() != shape)
          continue;
        mask = sel->input_value(0);
        root = sel->output(0);
      }
      if (fwd->get_scale() != 1.0) {
        Node* mul = users.single(root);
        double c = 0;
        if (!mul || mul->get_type_name() != op::Multiply::type_name || mul->get_shape() != shape ||
            !scalar_constant(other_input(*mul, root), c) || c != fwd->get_scale())
          continue;
        root = mul->output(0);
        scale = c;
      }
      auto b = std::make_shared<AttentionSoftmaxBackprop>(d, y, mask, scale);
      b->set_friendly_name(node->get_friendly_name());
      replacements[root] = b->output(0);
      ++fused;
      break;
    }
  }
  replace_outputs(f, replacements);
  return fused;
}

namespace pass {

// The fusion pass: matmul + bias + ReLU; batch-norm inference folded into the convolution
// before it; convolution + bias (+ residual sum) + ReLU; batch norm + ReLU; max pooling with
// its backprop; elementwise chains; then allreduce buckets.
void fuse_cpu_ops(ExecutionPlan& plan) {
  if (!plan.options.optimize || !plan.options.fuse) return;
  fuse_matmul_bias_relu(*plan.function);
  if (fold_batch_norm_into_convolution(*plan.function)) {
    ngraph::pass::Manager manager;  // evaluate the folded filters and bias of constant inputs
    manager.register_pass<ngraph::pass::ConstantFolding>(evaluate_constant);
    manager.run_passes(plan.function);
  }
  fuse_convolution_bias_relu(*plan.function);
  fuse_convolution_sum_relu(*plan.function);
  fuse_batch_norm_relu(*plan.function);
  fuse_max_pool_workspace(*plan.function);
  fuse_attention_softmax(*plan.function);
  fuse_elementwise(*plan.function);
  fuse_allreduce(*plan.function, default_fusion_threshold());
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
