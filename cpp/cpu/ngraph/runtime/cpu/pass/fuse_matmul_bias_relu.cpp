// Matrix products as one oneDNN matmul (MatMulBias): a Dot of any rank or a 2-D MatMul is one
// GEMM of its operands' matrices, transposes of the operands are strides of that GEMM, and a
// bias Add and a ReLU that only the product feeds are the primitive's bias and post-op.
#include <optional>
#include <tuple>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/matmul_bias.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

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

bool is_bias_for(const Output& v, size_t n) {
  const Shape& s = v.get_shape();
  return (s == Shape{n} || s == Shape{1, n});
}

// A matrix product as one GEMM: its operands (transposes absorbed as flags) and where each
// operand's axes split into the matrix's rows and columns.
struct Gemm {
  Output a, b;
  bool ta = false, tb = false;
  size_t a_split = 1, b_split = 1;
};

// Absorbs a transpose that rotates `x`'s axes (see rotated_transpose).
void absorb_rotation(Output& x, size_t& split, bool& transposed) {
  if (auto y = rotated_transpose(x, split)) {
    x = y->first;
    split = y->second;
    transposed = true;
  }
}

// Dot(A, B, c) is the GEMM of A's matrix split before its last c axes and B's split after its
// first c: any rank, no copy. Transposes that rotate an operand's axes are strides of the same
// GEMM (a Dot's gradient builds them).
std::optional<Gemm> dot_gemm(const op::Dot& d) {
  Gemm g;
  g.a = d.input_value(0);
  g.b = d.input_value(1);
  size_t c = d.get_reduction_axes_count(), ra = g.a.get_shape().size(), rb = g.b.get_shape().size();
  if (c == 0 || ra < c || rb < c || (ra < 2 && rb < 2)) return std::nullopt;
  g.a_split = ra - c;
  g.b_split = c;
  // A row or column vector: only as the 2-D case.
  if ((g.a_split == 0 || g.b_split == rb) && (ra != 2 || rb != 2)) return std::nullopt;
  absorb_rotation(g.a, g.a_split, g.ta);
  absorb_rotation(g.b, g.b_split, g.tb);
  return g;
}

// A 2-D MatMul, its transposed Reshapes of the operands absorbed.
std::optional<Gemm> matmul_gemm(const op::MatMul& mm) {
  if (mm.get_input_shape(0).size() != 2 || mm.get_input_shape(1).size() != 2) return std::nullopt;
  Gemm g;
  std::tie(g.a, g.ta) = strip_transpose(mm.input_value(0), mm.get_transpose_a());
  std::tie(g.b, g.tb) = strip_transpose(mm.input_value(1), mm.get_transpose_b());
  return g;
}

// The GEMM of a Dot or MatMul of numbers, or nothing.
std::optional<Gemm> as_gemm(const Node& node) {
  std::optional<Gemm> g;
  const std::string& type = node.get_type_name();
  if (type == "Dot") g = dot_gemm(static_cast<const op::Dot&>(node));
  if (type == "MatMul") g = matmul_gemm(static_cast<const op::MatMul&>(node));
  if (g && !node.get_element_type().is_numeric()) return std::nullopt;
  return g;
}

// The columns of the GEMM: the product of op(b)'s axes after its split (before when
// transposed).
size_t gemm_columns(const Gemm& g) {
  const Shape& bs = g.b.get_shape();
  size_t columns = 1;
  for (size_t i = g.tb ? 0 : g.b_split; i < (g.tb ? g.b_split : bs.size()); ++i) columns *= bs[i];
  return columns;
}

// What the primitive also computes after the product: a bias Add and a ReLU, each the only
// reader of the value before it; `value` is the last value it replaces.
struct Epilogue {
  Output bias;
  bool relu = false;
  Output value;
};

Epilogue epilogue(Node& product, const Gemm& g, const pass::Users& users) {
  const Shape& out = product.get_shape();
  size_t n = out.empty() ? 1 : out.back();
  Epilogue e{{}, false, product.output(0)};
  if (Node* add = users.single(e.value); add && add->get_type_name() == "Add" && !out.empty()) {
    Output candidate = add->input_value(add->input_value(0) == e.value ? 1 : 0);
    // One number per column of the GEMM: the result's last axis must be all its columns,
    // i.e. op(b) contributes that one axis.
    if (add->get_shape() == out && is_bias_for(candidate, n) && gemm_columns(g) == n) {
      e.bias = candidate;
      e.value = add->output(0);
    }
  }
  if (Node* r = users.single(e.value); r && r->get_type_name() == "Relu") {
    e.relu = true;
    e.value = r->output(0);
  }
  return e;
}

}  // namespace

size_t fuse_matmul_bias_relu(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::map<Output, Output> replacements;
  size_t fused = 0;
  for (const auto& node : ops) {
    std::optional<Gemm> g = as_gemm(*node);
    if (!g) continue;
    Epilogue e = epilogue(*node, *g, users);
    bool same_operands = g->a == node->input_value(0) && g->b == node->input_value(1);
    if (!e.bias && !e.relu && same_operands && node->get_type_name() == "MatMul")
      continue;  // nothing gained
    auto m = std::make_shared<MatMulBias>(g->a, g->b, e.bias, g->ta, g->tb, e.relu,
                                          static_cast<int64_t>(g->a_split),
                                          static_cast<int64_t>(g->b_split));
    if (m->get_shape() != node->get_shape()) continue;  // not the same product (should not happen)
    m->set_friendly_name(node->get_friendly_name());
    replacements[e.value] = m->output(0);
    ++fused;
  }
  replace_outputs(f, replacements);
  return fused;
}

namespace pass {

void fuse_matmul_bias_relu(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_matmul_bias_relu(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
