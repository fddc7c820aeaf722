#include "ngraph/ops/convolution.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace op {

void ConvolutionWindow::visit(AttributeVisitor& v) {
  v.on("strides", strides);
  v.on("dilations", dilations);
  v.on("padding_below", padding_below);
  v.on("padding_above", padding_above);
  v.on("data_dilations", data_dilations);
  v.on("groups", groups);
}

namespace {
template <typename V>
void default_or_check(const Node& node, V& v, size_t spatial, const char* name,
                      typename V::value_type fill, bool positive) {
  if (v.empty()) v.assign(spatial, fill);
  if (v.size() != spatial)
    node.fail(concat_message(name, " ", v, " has ", v.size(), " values; the data has ", spatial,
                             " spatial axes"));
  if (positive)
    for (auto x : v)
      if (x == 0) node.fail(concat_message(name, " ", v, " must be positive"));
}
}  // namespace

void ConvolutionWindow::validate(const Node& node, size_t spatial) {
  default_or_check(node, strides, spatial, "strides", 1, true);
  default_or_check(node, dilations, spatial, "dilations", 1, true);
  default_or_check(node, padding_below, spatial, "padding_below", 0, false);
  default_or_check(node, padding_above, spatial, "padding_above", 0, false);
  default_or_check(node, data_dilations, spatial, "data_dilations", 1, true);
  if (groups < 1) node.fail(concat_message("groups must be >= 1, got ", groups));
}

Shape ConvolutionWindow::output_spatial(const Node& node, const Shape& in, const Shape& filter) const {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    auto dilated_in = static_cast<std::ptrdiff_t>(in[i] == 0 ? 0 : (in[i] - 1) * data_dilations[i] + 1);
    auto padded = dilated_in + padding_below[i] + padding_above[i];
    auto window = static_cast<std::ptrdiff_t>(filter[i] == 0 ? 0 : (filter[i] - 1) * dilations[i] + 1);
    if (filter[i] == 0) node.fail(concat_message("filter spatial shape ", filter, " has a zero axis"));
    if (padded < window)
      node.fail(concat_message("along spatial axis ", i, " the padded data (", padded,
                               " = dilated size ", dilated_in, " + padding ", padding_below[i], " + ",
                               padding_above[i], ") is smaller than the dilated filter (", window, ")"));
    out.push_back(static_cast<size_t>((padded - window) / static_cast<std::ptrdiff_t>(strides[i]) + 1));
  }
  return out;
}

Shape convolution_output_shape(const Node& node, const Shape& data, const Shape& filters,
                               const ConvolutionWindow& w) {
  if (data.size() < 3)
    node.fail(concat_message("data batch must be [N, C, spatial...] with at least one spatial axis, got ", data));
  if (filters.size() != data.size())
    node.fail(concat_message("filters ", filters, " must have the rank of the data ", data,
                             " ([C_out, C_in / groups, spatial...])"));
  auto groups = static_cast<size_t>(w.groups);
  if (data[1] % groups != 0 || filters[0] % groups != 0)
    node.fail(concat_message("groups (", groups, ") must divide the data's channels (", data[1],
                             ") and the filters' output channels (", filters[0], ")"));
  if (filters[1] * groups != data[1])
    node.fail(concat_message("filters ", filters, " take ", filters[1], " input channels per group; data ",
                             data, " has ", data[1], " channels in ", groups, " group(s)"));
  Shape out{data[0], filters[0]};
  Shape sd(data.begin() + 2, data.end()), sf(filters.begin() + 2, filters.end());
  for (auto d : w.output_spatial(node, sd, sf)) out.push_back(d);
  return out;
}

namespace {
void check_types(const Node& node) {
  check_element_kind(node, 0, ElementKind::real);
  if (node.get_input_element_type(0) != node.get_input_element_type(1))
    node.fail_type(concat_message("element types of the inputs (", node.get_input_element_type(0), ", ",
                                  node.get_input_element_type(1), ") must match"));
}
}  // namespace

Convolution::Convolution(const Output& data, const Output& filters, const Strides& strides,
                         const Strides& dilations, const CoordinateDiff& padding_below,
                         const CoordinateDiff& padding_above, const Strides& data_dilations,
                         int64_t groups)
    : Op<Convolution>({data, filters}),
      m_window{strides, dilations, padding_below, padding_above, data_dilations, groups} {
  constructor_validate_and_infer_types();
}

void Convolution::validate_and_infer_types() {
  check_input_count(2);
  check_types(*this);
  const Shape& data = get_input_shape(0);
  m_window.validate(*this, data.size() < 2 ? 0 : data.size() - 2);
  set_output_type(0, accumulation_type(get_input_element_type(0)),
                  convolution_output_shape(*this, data, get_input_shape(1), m_window));
}

void Convolution::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Output data = input_value(0), filters = input_value(1);
  adj.add_delta(data, std::make_shared<ConvolutionBackpropData>(data.get_shape(), filters, deltas[0], m_window));
  adj.add_delta(filters,
                std::make_shared<ConvolutionBackpropFilters>(data, filters.get_shape(), deltas[0], m_window));
}

ConvolutionBackpropData::ConvolutionBackpropData(const Shape& data_shape, const Output& filters,
                                                 const Output& delta, const ConvolutionWindow& w)
    : Op<ConvolutionBackpropData>({filters, delta}), m_data_shape(data_shape), m_window(w) {
  constructor_validate_and_infer_types();
}

void ConvolutionBackpropData::validate_and_infer_types() {
  check_input_count(2);
  check_types(*this);
  m_window.validate(*this, m_data_shape.size() < 2 ? 0 : m_data_shape.size() - 2);
  Shape expected = convolution_output_shape(*this, m_data_shape, get_input_shape(0), m_window);
  if (get_input_shape(1) != expected)
    fail(concat_message("delta ", get_input_shape(1), " is not the forward output shape ", expected,
                        " of data ", m_data_shape, " and filters ", get_input_shape(0)));
  set_output_type(0, accumulation_type(get_input_element_type(0)), m_data_shape);
}

ConvolutionBackpropFilters::ConvolutionBackpropFilters(const Output& data, const Shape& filters_shape,
                                                       const Output& delta, const ConvolutionWindow& w)
    : Op<ConvolutionBackpropFilters>({data, delta}), m_filters_shape(filters_shape), m_window(w) {
  constructor_validate_and_infer_types();
}

void ConvolutionBackpropFilters::validate_and_infer_types() {
  check_input_count(2);
  check_types(*this);
  const Shape& data = get_input_shape(0);
  m_window.validate(*this, data.size() < 2 ? 0 : data.size() - 2);
  Shape expected = convolution_output_shape(*this, data, m_filters_shape, m_window);
  if (get_input_shape(1) != expected)
    fail(concat_message("delta ", get_input_shape(1), " is not the forward output shape ", expected,
                        " of data ", data, " and filters ", m_filters_shape));
  set_output_type(0, accumulation_type(get_input_element_type(0)), m_filters_shape);
}

NGRAPH_REGISTER_OP(Convolution);
NGRAPH_REGISTER_OP(ConvolutionBackpropData);
NGRAPH_REGISTER_OP(ConvolutionBackpropFilters);

}  // namespace op
}  // namespace ngraph
