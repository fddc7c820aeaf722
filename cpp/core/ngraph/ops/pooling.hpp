// Pooling and local response normalization: nGraph's v0 MaxPool, AvgPool, LRN and their
// backprop ops. Data is N, C, then 1 to 3 spatial axes; the window, strides and padding
// attributes have one entry per spatial axis.
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// The window geometry the pooling ops share. On each spatial axis the data is padded by
// padding_below/padding_above cells (padding is never a maximum and only counts in an
// average with include_padding_in_avg_computation) and the window moves by the stride; the
// result has floor((in + below + above - window) / stride) + 1 cells, or the ceiling with
// ceil_mode, whose last windows then reach into as many extra cells of padding above as
// needed (effective_padding_above).
class PoolingAttributes {
 public:
  virtual ~PoolingAttributes() = default;
  const Shape& get_window_shape() const { return m_window_shape; }
  const Strides& get_window_movement_strides() const { return m_window_movement_strides; }
  const Shape& get_padding_below() const { return m_padding_below; }
  const Shape& get_padding_above() const { return m_padding_above; }
  bool get_ceil_mode() const { return m_ceil_mode; }

 protected:
  PoolingAttributes() = default;
  PoolingAttributes(const Shape& window_shape, const Strides& window_movement_strides,
                    const Shape& padding_below, const Shape& padding_above, bool ceil_mode)
      : m_window_shape(window_shape),
        m_window_movement_strides(window_movement_strides),
        m_padding_below(padding_below),
        m_padding_above(padding_above),
        m_ceil_mode(ceil_mode) {}
  // window_shape, window_movement_strides, padding_below, padding_above (and ceil_mode).
  void visit_geometry(AttributeVisitor& v, bool with_ceil_mode);
  // Empty window_movement_strides become ones and empty paddings zeros, one per axis of the
  // window (nGraph's MaxPool(arg, window_shape) and AvgPool(arg, window_shape, strides)).
  void default_geometry();

  Shape m_window_shape;
  Strides m_window_movement_strides;
  Shape m_padding_below, m_padding_above;
  bool m_ceil_mode = false;
};

// The shape of a pooling result on data of `data_shape`; fails from `node`, naming the
// shapes and attributes, when the geometry is invalid. With `windows_need_data` (AvgPool
// without include_padding_in_avg_computation) no window may lie entirely in the padding.
Shape infer_pooling_shape(const Node& node, const Shape& data_shape, const PoolingAttributes& p,
                          bool windows_need_data);
// padding_above plus the cells ceil_mode adds: with it, floor division gives the output shape
// (the same as padding_above without ceil_mode). Assumes a valid geometry.
Shape effective_padding_above(const Shape& data_shape, const PoolingAttributes& p);

// MaxPool(arg, window_shape, window_movement_strides, padding_below, padding_above,
// ceil_mode): the maximum of each window; padding cells are -inf, so a window entirely in the
// padding gives -inf. Mixed precision (Node::bf16_sets): the data and the result can each be
// stored in bf16 (a maximum of bf16 values is exact).
class MaxPool : public Op<MaxPool>, public PoolingAttributes {
 public:
  static constexpr const char* type_name = "MaxPool";
  MaxPool() = default;
  MaxPool(const Output& arg, const Shape& window_shape, const Strides& window_movement_strides,
          const Shape& padding_below, const Shape& padding_above, bool ceil_mode = false);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}, {{}, {0}}}; }
  void visit_attributes(AttributeVisitor& v) override { visit_geometry(v, true); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
};

// AvgPool(arg, window_shape, window_movement_strides, padding_below, padding_above,
// include_padding_in_avg_computation, ceil_mode): the mean of each window: its data cells
// divided by their number, or by the full window size (padding counted as zeros) with
// include_padding_in_avg_computation.
class AvgPool : public Op<AvgPool>, public PoolingAttributes {
 public:
  static constexpr const char* type_name = "AvgPool";
  AvgPool() = default;
  AvgPool(const Output& arg, const Shape& window_shape, const Strides& window_movement_strides,
          const Shape& padding_below, const Shape& padding_above,
          bool include_padding_in_avg_computation, bool ceil_mode = false);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override;
  bool get_include_padding_in_avg_computation() const { return m_include_padding; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  bool m_include_padding = false;
};

// MaxPoolBackprop(arg_forward, delta, window_shape, window_movement_strides, padding_below,
// padding_above): the gradient of MaxPool(arg_forward, ...) (no ceil_mode: its gradient rule
// passes the effective padding): each delta goes to the first maximum of its window (in
// row-major order). No gradient rule of its own. Mixed precision: arg_forward, delta and the
// gradient can each be stored in bf16.
class MaxPoolBackprop : public Op<MaxPoolBackprop>, public PoolingAttributes {
 public:
  static constexpr const char* type_name = "MaxPoolBackprop";
  MaxPoolBackprop() = default;
  MaxPoolBackprop(const Output& arg_forward, const Output& delta, const Shape& window_shape,
                  const Strides& window_movement_strides, const Shape& padding_below,
                  const Shape& padding_above);
  void validate_and_infer_types() override;
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}, {{1}, {}}, {{}, {0}}}; }
  void visit_attributes(AttributeVisitor& v) override { visit_geometry(v, false); }
};

// AvgPoolBackprop(forward_arg_shape, delta, window_shape, window_movement_strides,
// padding_below, padding_above, include_padding_in_avg_computation): the gradient of AvgPool
// on data of forward_arg_shape: each delta spread over the data cells of its window, divided
// as the forward divides. It is linear in delta; its own gradient is that AvgPool.
class AvgPoolBackprop : public Op<AvgPoolBackprop>, public PoolingAttributes {
 public:
  static constexpr const char* type_name = "AvgPoolBackprop";
  AvgPoolBackprop() = default;
  AvgPoolBackprop(const Shape& forward_arg_shape, const Output& delta, const Shape& window_shape,
                  const Strides& window_movement_strides, const Shape& padding_below,
                  const Shape& padding_above, bool include_padding_in_avg_computation);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override;
  const Shape& get_forward_arg_shape() const { return m_forward_arg_shape; }
  bool get_include_padding_in_avg_computation() const { return m_include_padding; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  Shape m_forward_arg_shape;
  bool m_include_padding = false;
};

// The parameters LRN and LRNBackprop share.
class LRNAttributes {
 public:
  virtual ~LRNAttributes() = default;
  double get_alpha() const { return m_alpha; }
  double get_beta() const { return m_beta; }
  double get_bias() const { return m_bias; }
  size_t get_nsize() const { return m_size; }

 protected:
  LRNAttributes() = default;
  LRNAttributes(double alpha, double beta, double bias, size_t size)
      : m_alpha(alpha), m_beta(beta), m_bias(bias), m_size(size) {}
  void visit_lrn(AttributeVisitor& v);
  // Real data of rank >= 3 and size >= 1.
  void check_lrn(const Node& node, size_t input) const;

  double m_alpha = 1, m_beta = 0.5, m_bias = 1;
  size_t m_size = 5;
};

// LRN(arg, alpha, beta, bias, size): local response normalization across channels (axis 1),
// as nGraph's v0 LRN: y = x / (bias + alpha / size * s)^beta, where s sums the squares of
// the channels c - (size - 1) / 2 .. c + (size - 1) / 2 (those that exist) at the same
// position.
class LRN : public Op<LRN>, public LRNAttributes {
 public:
  static constexpr const char* type_name = "LRN";
  LRN() = default;
  LRN(const Output& arg, double alpha, double beta, double bias, size_t size);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { visit_lrn(v); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
};

// LRNBackprop(arg, delta, alpha, beta, bias, size): the gradient of LRN(arg, ...) given the
// gradient `delta` of its result. No gradient rule of its own.
class LRNBackprop : public Op<LRNBackprop>, public LRNAttributes {
 public:
  static constexpr const char* type_name = "LRNBackprop";
  LRNBackprop() = default;
  LRNBackprop(const Output& arg, const Output& delta, double alpha, double beta, double bias,
              size_t size);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { visit_lrn(v); }
};

}  // namespace op
}  // namespace ngraph
