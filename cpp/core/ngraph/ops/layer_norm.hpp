// Layer normalization, nGraph's fused LayerNorm: statistics are taken over the axes from
// begin_norm_axis to the end, per position of the axes before it, with the biased variance:
// y = (x - mean) / sqrt(variance + epsilon) * scale + bias. Floats only (f32, f64).
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// What LayerNorm and LayerNormBackprop share: the attributes and the geometry.
class LayerNormBase {
 public:
  virtual ~LayerNormBase() = default;
  double get_epsilon() const { return m_epsilon; }
  // begin_norm_axis resolved against the data's rank (negative counts from the end).
  size_t get_begin_norm_axis(const Node& node) const;
  // The data viewed as [rows, columns]: rows = prod(shape[:begin]), columns = prod(shape[begin:]).
  void get_rows_columns(const Node& node, size_t& rows, size_t& columns) const;

 protected:
  LayerNormBase() = default;
  LayerNormBase(int64_t begin_norm_axis, double epsilon)
      : m_begin_norm_axis(begin_norm_axis), m_epsilon(epsilon) {}
  // Checks data (a float tensor of rank >= 1), epsilon, and scale/bias: each of the normalized
  // shape (data.shape[begin:]) or its element count as one axis.
  void check(const Node& node, size_t data_input, const std::vector<size_t>& affine_inputs) const;
  int64_t m_begin_norm_axis = -1;
  double m_epsilon = 1e-5;
};

// LayerNorm(data, [scale, bias], begin_norm_axis = -1, epsilon = 1e-5): three outputs, the
// normalized data, the mean and the variance (shape data.shape[:begin_norm_axis]). scale and
// bias are both given or both left out.
class LayerNorm : public Op<LayerNorm>, public LayerNormBase {
 public:
  static constexpr const char* type_name = "LayerNorm";
  LayerNorm() = default;
  LayerNorm(const Output& data, int64_t begin_norm_axis = -1, double epsilon = 1e-5);
  LayerNorm(const Output& data, const Output& scale, const Output& bias,
            int64_t begin_norm_axis = -1, double epsilon = 1e-5);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("begin_norm_axis", m_begin_norm_axis);
    v.on("epsilon", m_epsilon);
  }
  bool has_affine() const { return get_input_size() == 3; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
};

// LayerNormBackprop(data, delta, mean, variance, [scale]): the gradient of LayerNorm's
// normalized output given its incoming gradient `delta` and the forward's statistics. Outputs:
// d_data, then with a scale d_scale and d_bias (the scale's shape). No gradient rule.
class LayerNormBackprop : public Op<LayerNormBackprop>, public LayerNormBase {
 public:
  static constexpr const char* type_name = "LayerNormBackprop";
  static constexpr size_t INPUT_DATA = 0, INPUT_DELTA = 1, INPUT_MEAN = 2, INPUT_VARIANCE = 3,
                          INPUT_SCALE = 4;
  LayerNormBackprop() = default;
  LayerNormBackprop(const OutputVector& args, int64_t begin_norm_axis, double epsilon);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("begin_norm_axis", m_begin_norm_axis);
    v.on("epsilon", m_epsilon);
  }
  bool has_affine() const { return get_input_size() == 5; }
};

}  // namespace op
}  // namespace ngraph
