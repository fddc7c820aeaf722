#include "ngraph/ops/layer_norm.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"
#include "ngraph/ops/shape_ops.hpp"

namespace ngraph {
namespace op {

size_t LayerNormBase::get_begin_norm_axis(const Node& node) const {
  auto rank = static_cast<int64_t>(node.get_input_shape(0).size());
  if (m_begin_norm_axis < -rank || m_begin_norm_axis >= rank)
    node.fail(concat_message("begin_norm_axis ", m_begin_norm_axis,
                             " is out of range for data of rank ", rank));
  return static_cast<size_t>(m_begin_norm_axis < 0 ? m_begin_norm_axis + rank : m_begin_norm_axis);
}

void LayerNormBase::get_rows_columns(const Node& node, size_t& rows, size_t& columns) const {
  const Shape& s = node.get_input_shape(0);
  size_t begin = get_begin_norm_axis(node);
  rows = columns = 1;
  for (size_t d = 0; d < s.size(); ++d) (d < begin ? rows : columns) *= s[d];
}

void LayerNormBase::check(const Node& node, size_t data_input,
                          const std::vector<size_t>& affine_inputs) const {
  const Shape& data = node.get_input_shape(data_input);
  element::Type t = node.get_input_element_type(data_input);
  if (!t.is_real() || t.is_storage_only())
    node.fail_type(concat_message("data must be f32 or f64, got element type ", t));
  if (data.empty()) node.fail("data must have rank >= 1, got a scalar");
  if (!(m_epsilon >= 0)) node.fail(concat_message("epsilon must be >= 0, got ", m_epsilon));
  size_t begin = get_begin_norm_axis(node);
  Shape normalized(data.begin() + static_cast<std::ptrdiff_t>(begin), data.end());
  for (size_t i : affine_inputs) {
    const Shape& s = node.get_input_shape(i);
    if (s != normalized && s != Shape{shape_size(normalized)})
      node.fail(concat_message(i == affine_inputs.front() ? "scale" : "bias", " shape ", s,
                               " must be the normalized shape ", normalized, " (data shape ", data,
                               " from begin_norm_axis ", begin, ") or [", shape_size(normalized),
                               "]"));
    if (node.get_input_element_type(i) != t)
      node.fail_type(concat_message("input ", i, " has element type ",
                                    node.get_input_element_type(i), ", data has ", t));
  }
}

LayerNorm::LayerNorm(const Output& data, int64_t begin_norm_axis, double epsilon)
    : Op<LayerNorm>({data}), LayerNormBase(begin_norm_axis, epsilon) {
  constructor_validate_and_infer_types();
}

LayerNorm::LayerNorm(const Output& data, const Output& scale, const Output& bias,
                     int64_t begin_norm_axis, double epsilon)
    : Op<LayerNorm>({data, scale, bias}), LayerNormBase(begin_norm_axis, epsilon) {
  constructor_validate_and_infer_types();
}

void LayerNorm::validate_and_infer_types() {
  if (get_input_size() != 1 && get_input_size() != 3)
    fail(concat_message("takes data, or data, scale and bias (got ", get_input_size(), " inputs)"));
  check(*this, 0, has_affine() ? std::vector<size_t>{1, 2} : std::vector<size_t>{});
  const Shape& data = get_input_shape(0);
  Shape stats(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(get_begin_norm_axis(*this)));
  element::Type t = get_input_element_type(0);
  set_output_size(3);
  set_output_type(0, t, data);
  set_output_type(1, t, stats);
  set_output_type(2, t, stats);
}

// dx from the normalized output goes through LayerNormBackprop. The statistics' own gradients,
// when used: with N normalized elements per row, d mean / dx = 1 / N and d variance / dx =
// 2 (x - mean) / N.
void LayerNorm::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(0);
  size_t begin = get_begin_norm_axis(*this);
  if (!autodiff::is_zeros(deltas[0])) {
    OutputVector args{x, deltas[0], output(1), output(2)};
    if (has_affine()) args.push_back(input_value(1));
    auto bprop = std::make_shared<LayerNormBackprop>(args, m_begin_norm_axis, m_epsilon);
    adj.add_delta(x, bprop->output(0));
    if (has_affine()) {
      adj.add_delta(input_value(1), bprop->output(1));
      adj.add_delta(input_value(2), bprop->output(2));
    }
  }
  const Shape& shape = x.get_shape();
  size_t rows = 1, n = 1;
  get_rows_columns(*this, rows, n);
  if (n == 0 || rows == 0) return;
  AxisSet normalized;
  for (size_t d = begin; d < shape.size(); ++d) normalized.insert(d);
  auto per_row = [&](const Output& v) { return std::make_shared<Broadcast>(v, shape, normalized); };
  element::Type t = x.get_element_type();
  double inv_n = 1.0 / static_cast<double>(n);
  if (!autodiff::is_zeros(deltas[1]))
    adj.add_delta(x, per_row(std::make_shared<Multiply>(deltas[1], autodiff::scalar(t, inv_n), "numpy")));
  if (!autodiff::is_zeros(deltas[2])) {
    auto centered = std::make_shared<Subtract>(x, per_row(output(1)));
    auto scale = per_row(std::make_shared<Multiply>(deltas[2], autodiff::scalar(t, 2 * inv_n), "numpy"));
    adj.add_delta(x, std::make_shared<Multiply>(scale, centered));
  }
}

LayerNormBackprop::LayerNormBackprop(const OutputVector& args, int64_t begin_norm_axis,
                                     double epsilon)
    : Op<LayerNormBackprop>(args), LayerNormBase(begin_norm_axis, epsilon) {
  constructor_validate_and_infer_types();
}

void LayerNormBackprop::validate_and_infer_types() {
  if (get_input_size() != 4 && get_input_size() != 5)
    fail(concat_message("takes data, delta, mean, variance and an optional scale (got ",
                        get_input_size(), " inputs)"));
  check(*this, INPUT_DATA, has_affine() ? std::vector<size_t>{INPUT_SCALE} : std::vector<size_t>{});
  const Shape& data = get_input_shape(0);
  element::Type t = get_input_element_type(0);
  Shape stats(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(get_begin_norm_axis(*this)));
  if (get_input_shape(INPUT_DELTA) != data || get_input_element_type(INPUT_DELTA) != t)
    fail(concat_message("delta ", get_input_element_type(INPUT_DELTA), get_input_shape(INPUT_DELTA),
                        " must have data's type and shape ", t, data));
  for (size_t i : {INPUT_MEAN, INPUT_VARIANCE})
    if (get_input_shape(i) != stats || get_input_element_type(i) != t)
      fail(concat_message(i == INPUT_MEAN ? "mean " : "variance ", get_input_element_type(i),
                          get_input_shape(i), " must be ", t, stats));
  set_output_size(has_affine() ? 3 : 1);
  set_output_type(0, t, data);
  if (has_affine()) {
    set_output_type(1, t, get_input_shape(INPUT_SCALE));
    set_output_type(2, t, get_input_shape(INPUT_SCALE));
  }
}

NGRAPH_REGISTER_OP(LayerNorm);
NGRAPH_REGISTER_OP(LayerNormBackprop);

}  // namespace op
}  // namespace ngraph
