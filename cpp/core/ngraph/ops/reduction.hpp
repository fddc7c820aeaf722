// Reductions over a set of axes (removed from the result), and index reductions.
#pragma once

#include "ngraph/node.hpp"
#include "ngraph/ops/elementwise.hpp"
#include "ngraph/ops/shape_ops.hpp"

namespace ngraph {
namespace op {

// The axes a reduction removes; shared by Sum, Product, Max and Min.
class ReductionAxes {
 public:
  virtual ~ReductionAxes() = default;
  const AxisSet& get_reduction_axes() const { return m_axes; }

 protected:
  AxisSet m_axes;
};

// Sum/Product of an empty set of elements is 0/1; Max/Min of one is the lowest/highest
// value of the type (-inf/+inf for floats), as in nGraph.
template <typename T>
class ArithmeticReduction : public Op<T>, public ReductionAxes {
 public:
  ArithmeticReduction() = default;
  ArithmeticReduction(const Output& arg, const AxisSet& reduction_axes)
      : Op<T>({arg}) {
    m_axes = reduction_axes;
    this->constructor_validate_and_infer_types();
  }
  void validate_and_infer_types() override {
    this->check_input_count(1);
    check_element_kind(*this, 0, ElementKind::numeric);
    const Shape& in = this->get_input_shape(0);
    check_axes(*this, "reduction_axes", m_axes, in);
    Shape out;
    for (size_t i = 0; i < in.size(); ++i)
      if (!m_axes.count(i)) out.push_back(in[i]);
    // f32 for data stored in bf16 (Sum's bf16_sets)
    this->set_output_type(0, this->get_input_compute_type(0), out);
  }
  void visit_attributes(AttributeVisitor& v) override { v.on("reduction_axes", m_axes); }
};

#define NGRAPH_REDUCTION_OP(Name)                                                    \
  class Name : public ArithmeticReduction<Name> {                                    \
   public:                                                                           \
    static constexpr const char* type_name = #Name;                                  \
    using ArithmeticReduction::ArithmeticReduction;                                  \
    void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) \
        override;                                                                    \
  };

// Sum's data can be stored in bf16 (mixed precision: summed in f32, e.g. a bias gradient);
// the CPU takes it where the leading axes are reduced (its column sum).
class Sum : public ArithmeticReduction<Sum> {
 public:
  static constexpr const char* type_name = "Sum";
  using ArithmeticReduction::ArithmeticReduction;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}}; }
};
NGRAPH_REDUCTION_OP(Product)
NGRAPH_REDUCTION_OP(Max)
NGRAPH_REDUCTION_OP(Min)

// ArgMax/ArgMin(arg, axis, index_element_type): index of the first extreme element along
// `axis` (removed from the result); index type i32 or i64. The axis must not be empty.
template <typename T>
class IndexReduction : public Op<T> {
 public:
  IndexReduction() = default;
  IndexReduction(const Output& arg, size_t axis, element::Type index_element_type = element::i64)
      : Op<T>({arg}), m_axis(axis), m_index_type(index_element_type) {
    this->constructor_validate_and_infer_types();
  }
  void validate_and_infer_types() override {
    this->check_input_count(1);
    check_element_kind(*this, 0, ElementKind::numeric);
    const Shape& in = this->get_input_shape(0);
    if (m_axis >= in.size())
      this->fail(concat_message("axis ", m_axis, " is out of range for arg shape ", in));
    if (in[m_axis] == 0)
      this->fail(concat_message("axis ", m_axis, " of arg shape ", in, " is empty"));
    if (m_index_type != element::i32 && m_index_type != element::i64)
      this->fail_type(concat_message("index_element_type must be i32 or i64, got ", m_index_type));
    Shape out = in;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(m_axis));
    this->set_output_type(0, m_index_type, out);
  }
  void visit_attributes(AttributeVisitor& v) override {
    v.on("axis", m_axis);
    v.on("index_element_type", m_index_type);
  }
  size_t get_reduction_axis() const { return m_axis; }

 private:
  size_t m_axis = 0;
  element::Type m_index_type = element::i64;
};

class ArgMax : public IndexReduction<ArgMax> {
 public:
  static constexpr const char* type_name = "ArgMax";
  using IndexReduction::IndexReduction;
};
class ArgMin : public IndexReduction<ArgMin> {
 public:
  static constexpr const char* type_name = "ArgMin";
  using IndexReduction::IndexReduction;
};

// TopK(arg, k, axis, compute_max, index_element_type): the k largest (compute_max) or smallest
// elements along `axis`, sorted (largest first, or smallest first), ties by the lower index.
// Two outputs: 0 the values (arg's type), 1 their indices along `axis` (i32 or i64); both have
// arg's shape with `axis` of size k. 1 <= k <= the axis' size.
class TopK : public Op<TopK> {
 public:
  static constexpr const char* type_name = "TopK";
  TopK() = default;
  TopK(const Output& arg, size_t k, size_t axis, bool compute_max = true,
       element::Type index_element_type = element::i64);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("k", m_k);
    v.on("axis", m_axis);
    v.on("compute_max", m_compute_max);
    v.on("index_element_type", m_index_type);
  }
  size_t get_k() const { return m_k; }
  size_t get_axis() const { return m_axis; }
  bool get_compute_max() const { return m_compute_max; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  size_t m_k = 1;
  size_t m_axis = 0;
  bool m_compute_max = true;
  element::Type m_index_type = element::i64;
};

// Softmax(arg, axes): exp(x - max) / sum(exp(x - max)) over `axes`, for floats.
class Softmax : public Op<Softmax> {
 public:
  static constexpr const char* type_name = "Softmax";
  Softmax() = default;
  Softmax(const Output& arg, const AxisSet& axes);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("axes", m_axes); }
  const AxisSet& get_axes() const { return m_axes; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  AxisSet m_axes;
};

// OneHot(arg, shape, one_hot_axis): the result has `shape` and arg's type; removing
// one_hot_axis from `shape` gives arg's shape. result[..., j, ...] = (arg[...] == j).
// arg holds integral values (integer types, or floats with integral values); a value outside
// [0, shape[one_hot_axis]) is an error at run time.
class OneHot : public Op<OneHot> {
 public:
  static constexpr const char* type_name = "OneHot";
  OneHot() = default;
  OneHot(const Output& arg, const Shape& shape, size_t one_hot_axis);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("shape", m_shape);
    v.on("one_hot_axis", m_axis);
  }
  size_t get_one_hot_axis() const { return m_axis; }

 private:
  Shape m_shape;
  size_t m_axis = 0;
};

}  // namespace op
}  // namespace ngraph
