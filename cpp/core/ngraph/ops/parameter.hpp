// Graph leaves and roots: Parameter (an input of a function), Constant (a value baked into
// the graph) and Result (an output of a function).
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

class Parameter : public Op<Parameter> {
 public:
  static constexpr const char* type_name = "Parameter";
  bool admits_storage_only_types() const override { return true; }
  Parameter() = default;
  Parameter(element::Type element_type, const Shape& shape);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override;
  // Parameters are the function's inputs: two of them are never the same value.
  bool is_pure() const override { return false; }

 private:
  element::Type m_element_type = element::f32;
  Shape m_shape;
};

class Result : public Op<Result> {
 public:
  static constexpr const char* type_name = "Result";
  bool admits_storage_only_types() const override { return true; }
  Result() = default;
  explicit Result(const Output& arg);
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  void validate_and_infer_types() override;
  bool is_pure() const override { return false; }
};

class Constant : public Op<Constant> {
 public:
  static constexpr const char* type_name = "Constant";
  bool admits_storage_only_types() const override { return true; }
  Constant() = default;
  // Copies shape_size(shape) elements of `type` from `data`.
  Constant(element::Type type, const Shape& shape, const void* data);
  // Values are converted to `type`; one value fills the whole shape.
  template <typename T>
  Constant(element::Type type, const Shape& shape, const std::vector<T>& values)
      : Constant(type, shape) {
    size_t n = shape_size(shape);
    if (values.size() != n && values.size() != 1)
      fail(concat_message("got ", values.size(), " values for shape ", shape, " (",
                          n, " elements)"));
    element::dispatch_storage(type, [&](auto tag) {
      using S = decltype(tag);
      S* dst = reinterpret_cast<S*>(m_data.get());
      for (size_t i = 0; i < n; ++i)
        dst[i] = static_cast<S>(values[values.size() == 1 ? 0 : i]);
    });
  }

  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override;
  size_t attributes_hash() const override;
  bool attributes_equal(const Node& other) const override;

  const void* get_data_ptr() const { return m_data.get(); }
  size_t byte_size() const { return shape_size(m_shape) * m_element_type.size(); }
  template <typename T>
  std::vector<T> get_vector() const {
    std::vector<T> out(shape_size(m_shape));
    element::dispatch_storage(m_element_type, [&](auto tag) {
      using S = decltype(tag);
      const S* src = reinterpret_cast<const S*>(m_data.get());
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(src[i]);
    });
    return out;
  }

 private:
  Constant(element::Type type, const Shape& shape);  // allocates, uninitialised
  element::Type m_element_type = element::f32;
  Shape m_shape;
  std::shared_ptr<char> m_data;  // 64-byte aligned; shared between clones (immutable)
};

}  // namespace op
}  // namespace ngraph
