// Convolution and its two backprop ops (nGraph's v0 ops). Data is [N, C_in, d_1..d_k] (NCHW
// for k = 2), filters are [C_out, C_in / groups, f_1..f_k] (OIHW), k >= 1 spatial axes. Along
// each spatial axis the data is dilated (data_dilation_strides: d - 1 zeros between
// elements), padded (padding_below/above, which may be negative), and the filter, dilated by
// window_dilation_strides, moves by window_movement_strides:
//   out_i = floor((dilated_in_i + below_i + above_i - dilated_filter_i) / stride_i) + 1.
// groups > 1 splits the channels into independent convolutions (groups == C_in: depthwise).
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// The window of a convolution, shared by the three ops.
struct ConvolutionWindow {
  Strides strides, dilations;
  CoordinateDiff padding_below, padding_above;
  Strides data_dilations;
  int64_t groups = 1;
  void visit(AttributeVisitor& v);
  // Fills in defaults (1s, 0s) for `spatial` axes and checks sizes and values; `node` names
  // the op in errors.
  void validate(const Node& node, size_t spatial);
  // The output spatial shape for data spatial shape `in` and filter spatial shape `filter`.
  Shape output_spatial(const Node& node, const Shape& in, const Shape& filter) const;
};

// Checks data, filters and delta shapes against each other; returns the output shape of the
// forward convolution.
Shape convolution_output_shape(const Node& node, const Shape& data, const Shape& filters,
                               const ConvolutionWindow& w);

class Convolution : public Op<Convolution> {
 public:
  static constexpr const char* type_name = "Convolution";
  Convolution() = default;
  Convolution(const Output& data, const Output& filters, const Strides& strides = {},
              const Strides& dilations = {}, const CoordinateDiff& padding_below = {},
              const CoordinateDiff& padding_above = {}, const Strides& data_dilations = {},
              int64_t groups = 1);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { m_window.visit(v); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  // Its output also in bf16 (mixed precision: oneDNN's bf16 primitives write bf16 dst).
  std::vector<Bf16Set> bf16_sets() const override { return {{{}, {0}}}; }
  const ConvolutionWindow& get_window() const { return m_window; }

 private:
  ConvolutionWindow m_window;
};

// The gradient of a convolution with respect to its data: the data's shape is an attribute;
// inputs are the filters and the output delta. Not differentiable itself.
class ConvolutionBackpropData : public Op<ConvolutionBackpropData> {
 public:
  static constexpr const char* type_name = "ConvolutionBackpropData";
  ConvolutionBackpropData() = default;
  ConvolutionBackpropData(const Shape& data_shape, const Output& filters, const Output& delta,
                          const ConvolutionWindow& forward_window);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("data_batch_shape", m_data_shape);
    m_window.visit(v);
  }
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  // Its output also in bf16 (mixed precision: oneDNN's bf16 primitives write bf16 dst).
  std::vector<Bf16Set> bf16_sets() const override { return {{{}, {0}}}; }
  const ConvolutionWindow& get_window() const { return m_window; }

 private:
  Shape m_data_shape;
  ConvolutionWindow m_window;
};

// The gradient of a convolution with respect to its filters: the filters' shape is an
// attribute; inputs are the data and the output delta. Not differentiable itself.
class ConvolutionBackpropFilters : public Op<ConvolutionBackpropFilters> {
 public:
  static constexpr const char* type_name = "ConvolutionBackpropFilters";
  ConvolutionBackpropFilters() = default;
  ConvolutionBackpropFilters(const Output& data, const Shape& filters_shape, const Output& delta,
                             const ConvolutionWindow& forward_window);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("filters_shape", m_filters_shape);
    m_window.visit(v);
  }
  std::vector<size_t> bf16_inputs() const override { return {0, 1}; }
  const ConvolutionWindow& get_window() const { return m_window; }

 private:
  Shape m_filters_shape;
  ConvolutionWindow m_window;
};

}  // namespace op
}  // namespace ngraph
