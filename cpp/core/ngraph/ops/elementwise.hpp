// Elementwise ops. Binary ops take an auto_broadcast attribute: "none" (shapes must be
// equal, nGraph's default) or "numpy" (NumPy broadcasting of the two shapes).
#pragma once

#include <string>

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// How an op matches its inputs' shapes: none (they must be equal) or numpy (NumPy
// broadcasting). Ops store it as this enum and visit it as the attribute
// auto_broadcast="none"|"numpy" (AttributeVisitor::on_enum).
enum class AutoBroadcast { none, numpy };
// "none" or "numpy".
const char* to_string(AutoBroadcast auto_broadcast);
// The inverse of to_string; throws std::invalid_argument naming auto_broadcast and the value
// otherwise.
AutoBroadcast auto_broadcast_from_string(const std::string& name);
// auto_broadcast_from_string for a constructor's argument: an unknown name fails from `node`.
AutoBroadcast auto_broadcast_of(const Node& node, const std::string& name);

// The shape of an op's result on inputs of shapes a and b: a (equal to b) for none, NumPy
// broadcasting for numpy; on mismatch, throws from `node` naming both shapes.
Shape broadcast_shapes(const Node& node, const Shape& a, const Shape& b,
                       AutoBroadcast auto_broadcast);

enum class ElementKind { numeric, real, boolean, any };

// Checks input `i` against `kind`, naming the op and the type on failure.
void check_element_kind(const Node& node, size_t i, ElementKind kind);

template <typename T, ElementKind Kind>
class UnaryElementwise : public Op<T> {
 public:
  UnaryElementwise() = default;
  explicit UnaryElementwise(const Output& arg) : Op<T>({arg}) {
    this->constructor_validate_and_infer_types();
  }
  void validate_and_infer_types() override {
    this->check_input_count(1);
    check_element_kind(*this, 0, Kind);
    this->set_output_type(0, this->get_input_compute_type(0), this->get_input_shape(0));
  }
};

// Kind: element kind of the inputs; both inputs share one type. Boolean output if
// `BoolOut`, else the input type.
template <typename T, ElementKind Kind, bool BoolOut>
class BinaryElementwise : public Op<T> {
 public:
  BinaryElementwise() = default;
  BinaryElementwise(const Output& a, const Output& b,
                    AutoBroadcast auto_broadcast = AutoBroadcast::none)
      : Op<T>({a, b}), m_auto_broadcast(auto_broadcast) {
    this->constructor_validate_and_infer_types();
  }
  // auto_broadcast by name: "none" or "numpy".
  BinaryElementwise(const Output& a, const Output& b, const std::string& auto_broadcast)
      : Op<T>({a, b}) {
    m_auto_broadcast = auto_broadcast_of(*this, auto_broadcast);
    this->constructor_validate_and_infer_types();
  }
  void validate_and_infer_types() override {
    this->check_input_count(2);
    check_element_kind(*this, 0, Kind);
    check_element_kind(*this, 1, Kind);
    auto ta = this->get_input_element_type(0), tb = this->get_input_element_type(1);
    if (ta != tb)
      this->fail_type(concat_message("element types of arg0 (", ta, ") and arg1 (", tb,
                                     ") must match"));
    Shape s = broadcast_shapes(*this, this->get_input_shape(0), this->get_input_shape(1),
                               m_auto_broadcast);
    this->set_output_type(0, BoolOut ? element::boolean : ta, s);
  }
  void visit_attributes(AttributeVisitor& v) override {
    v.on_enum("auto_broadcast", m_auto_broadcast, auto_broadcast_from_string);
  }
  AutoBroadcast get_auto_broadcast() const { return m_auto_broadcast; }

 private:
  AutoBroadcast m_auto_broadcast = AutoBroadcast::none;
};

// `GRAD` declares the op's gradient rule (defined in elementwise.cpp); ops with
// boolean results or inputs have none (NOGRAD).
#define NGRAPH_GRAD_DECL \
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
#define NGRAPH_NOGRAD_DECL

#define NGRAPH_UNARY_OP(Name, Kind, Grad)                            \
  class Name : public UnaryElementwise<Name, ElementKind::Kind> {   \
   public:                                                           \
    static constexpr const char* type_name = #Name;                  \
    using UnaryElementwise::UnaryElementwise;                        \
    NGRAPH_##Grad##_DECL                                             \
  };

#define NGRAPH_BINARY_OP(Name, Kind, BoolOut, Grad)                         \
  class Name : public BinaryElementwise<Name, ElementKind::Kind, BoolOut> { \
   public:                                                                  \
    static constexpr const char* type_name = #Name;                         \
    using BinaryElementwise::BinaryElementwise;                             \
    NGRAPH_##Grad##_DECL                                                    \
  };

NGRAPH_UNARY_OP(Negative, numeric, GRAD)
NGRAPH_UNARY_OP(Abs, numeric, GRAD)
NGRAPH_UNARY_OP(Sign, numeric, GRAD)
NGRAPH_UNARY_OP(Floor, numeric, GRAD)
NGRAPH_UNARY_OP(Ceiling, numeric, GRAD)
NGRAPH_UNARY_OP(Relu, numeric, GRAD)
NGRAPH_UNARY_OP(Exp, real, GRAD)
NGRAPH_UNARY_OP(Log, real, GRAD)
NGRAPH_UNARY_OP(Sqrt, real, GRAD)
NGRAPH_UNARY_OP(Sin, real, GRAD)
NGRAPH_UNARY_OP(Cos, real, GRAD)
NGRAPH_UNARY_OP(Tan, real, GRAD)
NGRAPH_UNARY_OP(Asin, real, GRAD)
NGRAPH_UNARY_OP(Acos, real, GRAD)
NGRAPH_UNARY_OP(Atan, real, GRAD)
NGRAPH_UNARY_OP(Sinh, real, GRAD)
NGRAPH_UNARY_OP(Cosh, real, GRAD)
NGRAPH_UNARY_OP(Tanh, real, GRAD)
NGRAPH_UNARY_OP(Sigmoid, real, GRAD)
// Erf(x): the error function, 2/sqrt(pi) * integral of exp(-t^2) from 0 to x.
NGRAPH_UNARY_OP(Erf, real, GRAD)
// Gelu(x) = x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))): the exact GELU (nGraph's Gelu).
// Mixed precision: its input and output stored in bf16 together (oneDNN's bf16 eltwise, one
// type for src and dst), e.g. between a product and the next one's operand.
class Gelu : public UnaryElementwise<Gelu, ElementKind::real> {
 public:
  static constexpr const char* type_name = "Gelu";
  using UnaryElementwise::UnaryElementwise;
  NGRAPH_GRAD_DECL
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {0}}}; }
};
NGRAPH_UNARY_OP(LogicalNot, boolean, NOGRAD)
// StopGradient(x) = x, whose gradient is defined as 0: it marks a value that autodiff must
// treat as a constant (e.g. the maximum subtracted in a stable log-softmax). Compiling removes
// it.
NGRAPH_UNARY_OP(StopGradient, any, GRAD)

NGRAPH_BINARY_OP(Add, numeric, false, GRAD)
NGRAPH_BINARY_OP(Subtract, numeric, false, GRAD)
NGRAPH_BINARY_OP(Multiply, numeric, false, GRAD)
NGRAPH_BINARY_OP(Power, numeric, false, GRAD)
NGRAPH_BINARY_OP(Maximum, numeric, false, GRAD)
NGRAPH_BINARY_OP(Minimum, numeric, false, GRAD)
NGRAPH_BINARY_OP(Equal, any, true, NOGRAD)
NGRAPH_BINARY_OP(NotEqual, any, true, NOGRAD)
NGRAPH_BINARY_OP(Greater, numeric, true, NOGRAD)
NGRAPH_BINARY_OP(GreaterEq, numeric, true, NOGRAD)
NGRAPH_BINARY_OP(Less, numeric, true, NOGRAD)
NGRAPH_BINARY_OP(LessEq, numeric, true, NOGRAD)
NGRAPH_BINARY_OP(LogicalAnd, boolean, true, NOGRAD)
NGRAPH_BINARY_OP(LogicalOr, boolean, true, NOGRAD)

// Integer division rounds toward negative infinity when pythondiv is true (Python's //),
// toward zero otherwise (C's /). Integer division by zero is an error at run time.
class Divide : public BinaryElementwise<Divide, ElementKind::numeric, false> {
 public:
  static constexpr const char* type_name = "Divide";
  Divide() = default;
  Divide(const Output& a, const Output& b, AutoBroadcast auto_broadcast = AutoBroadcast::none,
         bool pythondiv = true)
      : BinaryElementwise(a, b, auto_broadcast), m_pythondiv(pythondiv) {}
  Divide(const Output& a, const Output& b, const std::string& auto_broadcast,
         bool pythondiv = true)
      : BinaryElementwise(a, b, auto_broadcast), m_pythondiv(pythondiv) {}
  void visit_attributes(AttributeVisitor& v) override {
    BinaryElementwise::visit_attributes(v);
    v.on("pythondiv", m_pythondiv);
  }
  bool is_pythondiv() const { return m_pythondiv; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  bool m_pythondiv = true;
};

// Select(cond, then, else): cond is boolean; then/else share a type; all three broadcast.
class Select : public Op<Select> {
 public:
  static constexpr const char* type_name = "Select";
  bool admits_storage_only_types() const override { return true; }
  Select() = default;
  Select(const Output& cond, const Output& then_value, const Output& else_value,
         AutoBroadcast auto_broadcast = AutoBroadcast::none);
  // auto_broadcast by name: "none" or "numpy".
  Select(const Output& cond, const Output& then_value, const Output& else_value,
         const std::string& auto_broadcast);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on_enum("auto_broadcast", m_auto_broadcast, auto_broadcast_from_string);
  }
  AutoBroadcast get_auto_broadcast() const { return m_auto_broadcast; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  AutoBroadcast m_auto_broadcast = AutoBroadcast::none;
};

// Convert(arg, destination_type): elementwise cast (C++ static_cast semantics; to boolean
// means != 0).
class Convert : public Op<Convert> {
 public:
  static constexpr const char* type_name = "Convert";
  bool admits_storage_only_types() const override { return true; }
  Convert() = default;
  Convert(const Output& arg, element::Type destination_type);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("destination_type", m_type); }
  element::Type get_destination_type() const { return m_type; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  element::Type m_type = element::f32;
};

}  // namespace op
}  // namespace ngraph
