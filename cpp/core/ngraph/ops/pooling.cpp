#include "ngraph/ops/pooling.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace op {

// ------------------------------------------------------------------------ window geometry

void PoolingAttributes::visit_geometry(AttributeVisitor& v, bool with_ceil_mode) {
  v.on("window_shape", m_window_shape);
  v.on("window_movement_strides", m_window_movement_strides);
  v.on("padding_below", m_padding_below);
  v.on("padding_above", m_padding_above);
  if (with_ceil_mode) v.on("ceil_mode", m_ceil_mode);
}

void PoolingAttributes::default_geometry() {
  size_t n = m_window_shape.size();
  if (m_window_movement_strides.empty()) m_window_movement_strides.assign(n, 1);
  if (m_padding_below.empty()) m_padding_below.assign(n, 0);
  if (m_padding_above.empty()) m_padding_above.assign(n, 0);
}

namespace {

// Output cells on one axis of `padded` cells: floor or ceiling of (padded - window) / stride,
// plus one. Needs window <= padded and stride >= 1.
size_t pooled_cells(size_t padded, size_t window, size_t stride, bool ceil_mode) {
  size_t span = padded - window;
  return (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
}

// The attributes have one entry per spatial axis of `data` (rank 3 to 5).
void check_geometry_ranks(const Node& node, const Shape& data, const PoolingAttributes& p) {
  if (data.size() < 3 || data.size() > 5)
    node.fail(concat_message("data shape ", data,
                             " must have rank 3 to 5 (N, C and 1 to 3 spatial axes)"));
  size_t n = data.size() - 2;
  auto check = [&](const char* name, size_t size, const std::string& value) {
    if (size != n)
      node.fail(concat_message(name, " ", value, " must have one value per spatial axis of data shape ",
                               data, " (", n, ")"));
  };
  check("window_shape", p.get_window_shape().size(), to_braces(p.get_window_shape()));
  check("window_movement_strides", p.get_window_movement_strides().size(),
        to_braces(p.get_window_movement_strides()));
  check("padding_below", p.get_padding_below().size(), to_braces(p.get_padding_below()));
  check("padding_above", p.get_padding_above().size(), to_braces(p.get_padding_above()));
}

}  // namespace

Shape infer_pooling_shape(const Node& node, const Shape& data, const PoolingAttributes& p,
                          bool windows_need_data) {
  check_geometry_ranks(node, data, p);
  const Shape& window = p.get_window_shape();
  const Strides& strides = p.get_window_movement_strides();
  const Shape& below = p.get_padding_below();
  const Shape& above = p.get_padding_above();
  Shape out{data[0], data[1]};
  for (size_t i = 0; i < window.size(); ++i) {
    size_t axis = i + 2, in = data[axis], w = window[i], s = strides[i];
    if (w == 0)
      node.fail(concat_message("window_shape ", window, " is 0 at axis ", axis, " of data shape ",
                               data));
    if (s == 0)
      node.fail(concat_message("window_movement_strides ", strides, " is 0 at axis ", axis,
                               " of data shape ", data));
    size_t padded = in + below[i] + above[i];
    if (w > padded)
      node.fail(concat_message("window_shape ", window, " is larger than the padded data at axis ",
                               axis, " (", w, " > ", padded, ": data shape ", data,
                               ", padding_below ", below, ", padding_above ", above, ")"));
    size_t cells = pooled_cells(padded, w, s, p.get_ceil_mode());
    bool last_in_padding = (cells - 1) * s >= in + below[i];  // the last window starts past the data
    if (windows_need_data && (in == 0 || below[i] >= w || last_in_padding))
      node.fail(concat_message(
          "a window at axis ", axis, " lies entirely in the padding (data shape ", data,
          ", window_shape ", window, ", padding_below ", below, ", padding_above ", above,
          p.get_ceil_mode() ? ", ceil_mode" : "",
          "): its average has no data cells unless include_padding_in_avg_computation is set"));
    out.push_back(cells);
  }
  return out;
}

Shape effective_padding_above(const Shape& data, const PoolingAttributes& p) {
  Shape above = p.get_padding_above();
  for (size_t i = 0; i < above.size(); ++i) {
    size_t in = data[i + 2], w = p.get_window_shape()[i], s = p.get_window_movement_strides()[i];
    size_t below = p.get_padding_below()[i];
    size_t cells = pooled_cells(in + below + above[i], w, s, p.get_ceil_mode());
    size_t reach = (cells - 1) * s + w;  // where the last window ends in the padded data
    if (reach > in + below + above[i]) above[i] = reach - in - below;
  }
  return above;
}

// ------------------------------------------------------------------------------- pooling

MaxPool::MaxPool(const Output& arg, const Shape& window_shape,
                 const Strides& window_movement_strides, const Shape& padding_below,
                 const Shape& padding_above, bool ceil_mode)
    : Op<MaxPool>({arg}),
      PoolingAttributes(window_shape, window_movement_strides, padding_below, padding_above,
                        ceil_mode) {
  constructor_validate_and_infer_types();
}

void MaxPool::validate_and_infer_types() {
  default_geometry();
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::real);
  set_output_type(0, get_input_compute_type(0),
                  infer_pooling_shape(*this, get_input_shape(0), *this, false));
}

AvgPool::AvgPool(const Output& arg, const Shape& window_shape,
                 const Strides& window_movement_strides, const Shape& padding_below,
                 const Shape& padding_above, bool include_padding_in_avg_computation,
                 bool ceil_mode)
    : Op<AvgPool>({arg}),
      PoolingAttributes(window_shape, window_movement_strides, padding_below, padding_above,
                        ceil_mode),
      m_include_padding(include_padding_in_avg_computation) {
  constructor_validate_and_infer_types();
}

void AvgPool::validate_and_infer_types() {
  default_geometry();
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::real);
  set_output_type(0, get_input_element_type(0),
                  infer_pooling_shape(*this, get_input_shape(0), *this, !m_include_padding));
}

void AvgPool::visit_attributes(AttributeVisitor& v) {
  visit_geometry(v, true);
  v.on("include_padding_in_avg_computation", m_include_padding);
}

MaxPoolBackprop::MaxPoolBackprop(const Output& arg_forward, const Output& delta,
                                 const Shape& window_shape,
                                 const Strides& window_movement_strides,
                                 const Shape& padding_below, const Shape& padding_above)
    : Op<MaxPoolBackprop>({arg_forward, delta}),
      PoolingAttributes(window_shape, window_movement_strides, padding_below, padding_above,
                        false) {
  constructor_validate_and_infer_types();
}

namespace {
// delta (input `i`) has the forward's result shape.
void check_delta(const Node& node, size_t i, const Shape& forward_arg_shape,
                 const Shape& forward_shape) {
  if (node.get_input_shape(i) != forward_shape)
    node.fail(concat_message("delta shape ", node.get_input_shape(i),
                             " does not match the pooling result shape ", forward_shape,
                             " of forward argument shape ", forward_arg_shape));
}

void check_same_types(const Node& node, const char* a, const char* b) {
  check_element_kind(node, 0, ElementKind::real);
  check_element_kind(node, 1, ElementKind::real);
  auto ta = node.get_input_compute_type(0), tb = node.get_input_compute_type(1);  // bf16_sets
  if (ta != tb)
    node.fail_type(concat_message("element types of ", a, " (", ta, ") and ", b, " (", tb,
                                  ") must match"));
}
}  // namespace

void MaxPoolBackprop::validate_and_infer_types() {
  default_geometry();
  check_input_count(2);
  check_same_types(*this, "arg_forward", "delta");
  const Shape& arg = get_input_shape(0);
  check_delta(*this, 1, arg, infer_pooling_shape(*this, arg, *this, false));
  set_output_type(0, get_input_compute_type(0), arg);
}

AvgPoolBackprop::AvgPoolBackprop(const Shape& forward_arg_shape, const Output& delta,
                                 const Shape& window_shape,
                                 const Strides& window_movement_strides,
                                 const Shape& padding_below, const Shape& padding_above,
                                 bool include_padding_in_avg_computation)
    : Op<AvgPoolBackprop>({delta}),
      PoolingAttributes(window_shape, window_movement_strides, padding_below, padding_above,
                        false),
      m_forward_arg_shape(forward_arg_shape),
      m_include_padding(include_padding_in_avg_computation) {
  constructor_validate_and_infer_types();
}

void AvgPoolBackprop::validate_and_infer_types() {
  default_geometry();
  check_input_count(1);
  check_element_kind(*this, 0, ElementKind::real);
  Shape forward = infer_pooling_shape(*this, m_forward_arg_shape, *this, !m_include_padding);
  check_delta(*this, 0, m_forward_arg_shape, forward);
  set_output_type(0, get_input_element_type(0), m_forward_arg_shape);
}

void AvgPoolBackprop::visit_attributes(AttributeVisitor& v) {
  v.on("forward_arg_shape", m_forward_arg_shape);
  visit_geometry(v, false);
  v.on("include_padding_in_avg_computation", m_include_padding);
}

// ----------------------------------------------------------------------------------- LRN

void LRNAttributes::visit_lrn(AttributeVisitor& v) {
  v.on("alpha", m_alpha);
  v.on("beta", m_beta);
  v.on("bias", m_bias);
  v.on("size", m_size);
}

void LRNAttributes::check_lrn(const Node& node, size_t input) const {
  check_element_kind(node, input, ElementKind::real);
  const Shape& s = node.get_input_shape(input);
  if (s.size() < 3)
    node.fail(concat_message("arg shape ", s, " must have rank >= 3 (N, C and spatial axes)"));
  if (m_size == 0) node.fail("size must be at least 1, got 0");
}

LRN::LRN(const Output& arg, double alpha, double beta, double bias, size_t size)
    : Op<LRN>({arg}), LRNAttributes(alpha, beta, bias, size) {
  constructor_validate_and_infer_types();
}

void LRN::validate_and_infer_types() {
  check_input_count(1);
  check_lrn(*this, 0);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

LRNBackprop::LRNBackprop(const Output& arg, const Output& delta, double alpha, double beta,
                         double bias, size_t size)
    : Op<LRNBackprop>({arg, delta}), LRNAttributes(alpha, beta, bias, size) {
  constructor_validate_and_infer_types();
}

void LRNBackprop::validate_and_infer_types() {
  check_input_count(2);
  check_same_types(*this, "arg", "delta");
  check_lrn(*this, 0);
  if (get_input_shape(1) != get_input_shape(0))
    fail(concat_message("delta shape ", get_input_shape(1), " does not match arg shape ",
                        get_input_shape(0)));
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

// ------------------------------------------------------------------------ gradient rules

// ceil_mode becomes explicit padding above: the backprop ops have none.
void MaxPool::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(0);
  Shape above = effective_padding_above(x.get_shape(), *this);
  adj.add_delta(x, std::make_shared<MaxPoolBackprop>(x, deltas[0], m_window_shape,
                                                     m_window_movement_strides, m_padding_below,
                                                     above));
}

void AvgPool::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(0);
  Shape above = effective_padding_above(x.get_shape(), *this);
  adj.add_delta(x, std::make_shared<AvgPoolBackprop>(x.get_shape(), deltas[0], m_window_shape,
                                                     m_window_movement_strides, m_padding_below,
                                                     above, m_include_padding));
}

// AvgPoolBackprop computes A^T delta for the linear map A = AvgPool: its adjoint is A itself.
void AvgPoolBackprop::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0),
                std::make_shared<AvgPool>(deltas[0], m_window_shape, m_window_movement_strides,
                                          m_padding_below, m_padding_above, m_include_padding));
}

void LRN::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output x = input_value(0);
  adj.add_delta(x, std::make_shared<LRNBackprop>(x, deltas[0], m_alpha, m_beta, m_bias, m_size));
}

NGRAPH_REGISTER_OP(MaxPool);
NGRAPH_REGISTER_OP(AvgPool);
NGRAPH_REGISTER_OP(MaxPoolBackprop);
NGRAPH_REGISTER_OP(AvgPoolBackprop);
NGRAPH_REGISTER_OP(LRN);
NGRAPH_REGISTER_OP(LRNBackprop);

}  // namespace op
}  // namespace ngraph
