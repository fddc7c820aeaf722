#include "ngraph/ops/indexing.hpp"

#include <stdexcept>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace op {

namespace {

void check_indices(const Node& node, size_t i) {
  element::Type t = node.get_input_element_type(i);
  if (t != element::i32 && t != element::i64)
    node.fail_type(concat_message("indices must be i32 or i64, got element type ", t));
}

size_t resolve_axis(const Node& node, int64_t axis, size_t rank) {
  auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    node.fail(concat_message("axis ", axis, " is out of range for data of rank ", rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

// data.shape[:axis] + indices.shape + data.shape[axis + 1:]
Shape gathered_shape(const Shape& data, const Shape& indices, size_t axis) {
  Shape out(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.end());
  return out;
}

// The gradient of a gather of `data` (shape, type) from `delta`: scattered back, summed where
// indices repeat. f16/bf16 are summed in f32 and rounded once.
Output scatter_back(const Output& data, const Output& indices, const Output& delta, int64_t axis) {
  element::Type t = data.get_element_type();
  if (!t.is_storage_only())
    return std::make_shared<ScatterAdd>(autodiff::zeros(t, data.get_shape()), indices, delta, axis);
  auto sum = std::make_shared<ScatterAdd>(autodiff::zeros(element::f32, data.get_shape()), indices,
                                          std::make_shared<Convert>(delta, element::f32), axis);
  return std::make_shared<Convert>(sum, t);
}

}  // namespace

Gather::Gather(const Output& data, const Output& indices, int64_t axis)
    : Op<Gather>({data, indices}), m_axis(axis) {
  constructor_validate_and_infer_types();
}

size_t Gather::get_axis() const { return resolve_axis(*this, m_axis, get_input_shape(0).size()); }

void Gather::validate_and_infer_types() {
  check_input_count(2);
  check_indices(*this, 1);
  const Shape& data = get_input_shape(0);
  if (data.empty()) fail("data must have rank >= 1, got a scalar");
  set_output_type(0, get_input_element_type(0), gathered_shape(data, get_input_shape(1), get_axis()));
}

void Gather::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0),
                scatter_back(input_value(0), input_value(1), deltas[0], static_cast<int64_t>(get_axis())));
}

EmbeddingLookup::EmbeddingLookup(const Output& indices, const Output& weights)
    : Op<EmbeddingLookup>({indices, weights}) {
  constructor_validate_and_infer_types();
}

void EmbeddingLookup::validate_and_infer_types() {
  check_input_count(2);
  check_indices(*this, 0);
  const Shape& w = get_input_shape(1);
  if (w.empty()) fail("weights must have rank >= 1, got a scalar");
  set_output_type(0, get_input_element_type(1), gathered_shape(w, get_input_shape(0), 0));
}

void EmbeddingLookup::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(1), scatter_back(input_value(1), input_value(0), deltas[0], 0));
}

ScatterAdd::ScatterAdd(const Output& inputs, const Output& indices, const Output& updates,
                       int64_t axis)
    : Op<ScatterAdd>({inputs, indices, updates}), m_axis(axis) {
  constructor_validate_and_infer_types();
}

size_t ScatterAdd::get_axis() const {
  return resolve_axis(*this, m_axis, get_input_shape(0).size());
}

void ScatterAdd::validate_and_infer_types() {
  check_input_count(3);
  check_indices(*this, 1);
  check_element_kind(*this, 0, ElementKind::numeric);
  const Shape& in = get_input_shape(0);
  if (in.empty()) fail("inputs must have rank >= 1, got a scalar");
  if (get_input_element_type(2) != get_input_element_type(0))
    fail_type(concat_message("updates have element type ", get_input_element_type(2),
                             ", inputs have ", get_input_element_type(0)));
  Shape expected = gathered_shape(in, get_input_shape(1), get_axis());
  if (get_input_shape(2) != expected)
    fail(concat_message("updates shape ", get_input_shape(2), " must be ", expected,
                        " (inputs shape ", in, " with axis ", get_axis(),
                        " replaced by indices shape ", get_input_shape(1), ")"));
  set_output_type(0, get_input_element_type(0), in);
}

void ScatterAdd::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), deltas[0]);
  adj.add_delta(input_value(2), std::make_shared<Gather>(deltas[0], input_value(1),
                                                         static_cast<int64_t>(get_axis())));
}

IndexedAxis IndexedAxis::of(const Node& node) {
  IndexedAxis g;
  Shape data;
  size_t axis = 0, indices_input = 1;
  const std::string& type = node.get_type_name();
  if (type == Gather::type_name) {
    data = node.get_input_shape(0);
    axis = static_cast<const Gather&>(node).get_axis();
  } else if (type == EmbeddingLookup::type_name) {
    data = node.get_input_shape(1);
    indices_input = 0;
    g.allow_negative = false;
  } else if (type == ScatterAdd::type_name) {
    data = node.get_input_shape(0);
    axis = static_cast<const ScatterAdd&>(node).get_axis();
  } else {
    node.fail("is not an indexing op");
  }
  for (size_t d = 0; d < axis; ++d) g.outer *= data[d];
  for (size_t d = axis + 1; d < data.size(); ++d) g.inner *= data[d];
  g.n = data[axis];
  g.count = shape_size(node.get_input_shape(indices_input));
  return g;
}

size_t checked_index(const Node& node, const IndexedAxis& g, element::Type type,
                     const void* indices, size_t position) {
  int64_t v = type == element::i32 ? static_cast<const int32_t*>(indices)[position]
                                   : static_cast<const int64_t*>(indices)[position];
  auto n = static_cast<int64_t>(g.n);
  int64_t k = v < 0 && g.allow_negative ? v + n : v;
  if (k < 0 || k >= n)
    throw std::out_of_range(concat_message(
        "[", node.get_type_name(), "] index ", v, " at position ", position, " of ",
        node.get_name(), " is out of range for an axis of size ", n, " (valid: ",
        g.allow_negative ? concat_message("-", n, " to ", n - 1) : concat_message("0 to ", n - 1),
        ")"));
  return static_cast<size_t>(k);
}

NGRAPH_REGISTER_OP(Gather);
NGRAPH_REGISTER_OP(EmbeddingLookup);
NGRAPH_REGISTER_OP(ScatterAdd);

}  // namespace op
}  // namespace ngraph
