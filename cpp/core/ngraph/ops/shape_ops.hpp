// Ops that move data without arithmetic: nGraph's v0 semantics.
#pragma once

#include <string>

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// Broadcast(arg, shape, broadcast_axes): the result has `shape`; removing the
// broadcast_axes from `shape` must give arg's shape. Values repeat along those axes.
class Broadcast : public Op<Broadcast> {
 public:
  static constexpr const char* type_name = "Broadcast";
  bool admits_storage_only_types() const override { return true; }
  Broadcast() = default;
  Broadcast(const Output& arg, const Shape& shape, const AxisSet& broadcast_axes);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("shape", m_shape);
    v.on("broadcast_axes", m_broadcast_axes);
  }
  const AxisSet& get_broadcast_axes() const { return m_broadcast_axes; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  Shape m_shape;
  AxisSet m_broadcast_axes;
};

// Reshape(arg, input_order, output_shape): the axes of arg are first permuted by
// input_order, then the row-major elements are laid out in output_shape.
class Reshape : public Op<Reshape> {
 public:
  static constexpr const char* type_name = "Reshape";
  bool admits_storage_only_types() const override { return true; }
  Reshape() = default;
  Reshape(const Output& arg, const AxisVector& input_order, const Shape& output_shape);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("input_order", m_input_order);
    v.on("output_shape", m_output_shape);
  }
  const AxisVector& get_input_order() const { return m_input_order; }
  bool is_transpose() const;  // input_order is not the identity
  // Mixed precision: moves bf16 values as it moves any (the input and output in one type).
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {0}}}; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  AxisVector m_input_order;
  Shape m_output_shape;
};

// Slice(arg, lower_bounds, upper_bounds, strides): elements lower <= i < upper with step
// strides (all >= 1; default 1) on every axis.
class Slice : public Op<Slice> {
 public:
  static constexpr const char* type_name = "Slice";
  bool admits_storage_only_types() const override { return true; }
  Slice() = default;
  Slice(const Output& arg, const Coordinate& lower_bounds, const Coordinate& upper_bounds,
        const Strides& strides = Strides());
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("lower_bounds", m_lower);
    v.on("upper_bounds", m_upper);
    v.on("strides", m_strides);
  }
  const Coordinate& get_lower_bounds() const { return m_lower; }
  const Strides& get_strides() const { return m_strides; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  Coordinate m_lower, m_upper;
  Strides m_strides;
};

// Concat(args, concatenation_axis): all args share rank, type and every other axis.
class Concat : public Op<Concat> {
 public:
  static constexpr const char* type_name = "Concat";
  bool admits_storage_only_types() const override { return true; }
  Concat() = default;
  Concat(const OutputVector& args, size_t concatenation_axis);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("concatenation_axis", m_axis);
  }
  size_t get_concatenation_axis() const { return m_axis; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  // Mixed precision: all inputs and the output in bf16 at once (one element type).
  std::vector<Bf16Set> bf16_sets() const override;

 private:
  size_t m_axis = 0;
};

// Pad(arg, pad_value, padding_below, padding_above, pad_mode): pad_value is a scalar of
// arg's type, used by mode "constant"; modes "edge", "reflect" (mirror without the edge)
// and "symmetric" (mirror with the edge) take values from arg. Negative padding crops.
class Pad : public Op<Pad> {
 public:
  static constexpr const char* type_name = "Pad";
  bool admits_storage_only_types() const override { return true; }
  Pad() = default;
  Pad(const Output& arg, const Output& pad_value, const CoordinateDiff& padding_below,
      const CoordinateDiff& padding_above, const std::string& pad_mode = "constant");
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("padding_below", m_below);
    v.on("padding_above", m_above);
    v.on("pad_mode", m_mode);
  }
  const CoordinateDiff& get_padding_below() const { return m_below; }
  const CoordinateDiff& get_padding_above() const { return m_above; }
  const std::string& get_pad_mode() const { return m_mode; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  CoordinateDiff m_below, m_above;
  std::string m_mode = "constant";
};

// Reverse(arg, reversed_axes).
class Reverse : public Op<Reverse> {
 public:
  static constexpr const char* type_name = "Reverse";
  bool admits_storage_only_types() const override { return true; }
  Reverse() = default;
  Reverse(const Output& arg, const AxisSet& reversed_axes);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("reversed_axes", m_axes); }
  const AxisSet& get_reversed_axes() const { return m_axes; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  AxisSet m_axes;
};

// ReplaceSlice(dest, src, lower_bounds, upper_bounds, strides): dest with the slice
// [lower, upper) step strides replaced by src, whose shape is that slice's (nGraph's op; the
// adjoint of Slice).
class ReplaceSlice : public Op<ReplaceSlice> {
 public:
  static constexpr const char* type_name = "ReplaceSlice";
  bool admits_storage_only_types() const override { return true; }
  ReplaceSlice() = default;
  ReplaceSlice(const Output& dest, const Output& src, const Coordinate& lower_bounds,
               const Coordinate& upper_bounds, const Strides& strides = Strides());
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("lower_bounds", m_lower);
    v.on("upper_bounds", m_upper);
    v.on("strides", m_strides);
  }
  const Coordinate& get_lower_bounds() const { return m_lower; }
  const Coordinate& get_upper_bounds() const { return m_upper; }
  const Strides& get_strides() const { return m_strides; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  Coordinate m_lower, m_upper;
  Strides m_strides;
};

// Split(data, axis, splits): one output per entry of `splits` (lengths along `axis`, summing to
// its size), in order; empty splits means one output, the whole axis. `axis` may be negative.
class Split : public Op<Split> {
 public:
  static constexpr const char* type_name = "Split";
  bool admits_storage_only_types() const override { return true; }
  Split() = default;
  Split(const Output& data, int64_t axis, const std::vector<int64_t>& splits);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("axis", m_axis);
    v.on("splits", m_splits);
  }
  size_t get_axis() const;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  // Mixed precision: the data and all outputs in bf16 at once (one element type).
  std::vector<Bf16Set> bf16_sets() const override;

 private:
  int64_t m_axis = 0;
  std::vector<int64_t> m_splits;
};

// Tile(data, repeats): data repeated repeats[i] times along axis i, as NumPy's tile: with
// fewer repeats than axes they apply to the last axes; with more, data gets leading axes of 1.
class Tile : public Op<Tile> {
 public:
  static constexpr const char* type_name = "Tile";
  bool admits_storage_only_types() const override { return true; }
  Tile() = default;
  Tile(const Output& data, const std::vector<int64_t>& repeats);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("repeats", m_repeats); }
  // data's shape and the repeats, both padded with leading 1s to the result's rank.
  void get_padded(Shape& data, Shape& repeats) const;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  std::vector<int64_t> m_repeats;
};

// Checks that every axis in `axes` is < rank, naming the op and the attribute.
void check_axes(const Node& node, const char* what, const AxisSet& axes, const Shape& shape);

}  // namespace op
}  // namespace ngraph
