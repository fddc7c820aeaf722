// Nodes and their outputs: the graph IR. An op is a Node subclass that defines, in one
// place, its inputs, its attributes (visit_attributes) and its shape/type rule
// (validate_and_infer_types). Shape and type are inferred when a node is built; an invalid
// node throws right there with a message that starts with "[OpName] ".
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ngraph/attribute_visitor.hpp"
#include "ngraph/element_type.hpp"
#include "ngraph/except.hpp"
#include "ngraph/shape.hpp"

namespace ngraph {

class Node;

// One output of a node: the value that flows along an edge.
class Output {
 public:
  Output() = default;
  Output(std::shared_ptr<Node> node, size_t index = 0) : m_node(std::move(node)), m_index(index) {}
  template <typename T, typename = std::enable_if_t<std::is_base_of<Node, T>::value>>
  Output(const std::shared_ptr<T>& node)  // NOLINT: implicit, as in nGraph
      : m_node(std::static_pointer_cast<Node>(node)), m_index(0) {}

  Node* get_node() const { return m_node.get(); }
  const std::shared_ptr<Node>& get_node_shared_ptr() const { return m_node; }
  size_t get_index() const { return m_index; }
  const Shape& get_shape() const;
  element::Type get_element_type() const;
  explicit operator bool() const { return static_cast<bool>(m_node); }

  bool operator==(const Output& o) const { return m_node == o.m_node && m_index == o.m_index; }
  bool operator!=(const Output& o) const { return !(*this == o); }
  bool operator<(const Output& o) const {
    return m_node != o.m_node ? m_node < o.m_node : m_index < o.m_index;
  }

 private:
  std::shared_ptr<Node> m_node;
  size_t m_index = 0;
};

using OutputVector = std::vector<Output>;
using NodeVector = std::vector<std::shared_ptr<Node>>;

namespace autodiff {
class Adjoints;
}

class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;

  // The op's name, e.g. "Add"; the same for every node of the op.
  virtual const std::string& get_type_name() const = 0;
  // The shape/type rule: checks inputs and attributes, sets the output types.
  virtual void validate_and_infer_types() = 0;
  // Attributes, by name (see AttributeVisitor). Ops without attributes visit nothing.
  virtual void visit_attributes(AttributeVisitor&) {}
  // A copy of this node (same op and attributes) on new inputs, validated.
  virtual std::shared_ptr<Node> clone_with_new_inputs(const OutputVector& inputs) const = 0;
  // The gradient rule: given the gradients of this node's outputs (deltas), adds the
  // gradient of each differentiable input with adjoints.add_delta. The default throws
  // autodiff::NoGradientRule naming the op.
  virtual void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas);
  // For common-subexpression elimination: equal ops with equal attributes on equal inputs
  // compute the same value. Stateful ops (later: variables, collectives) return false.
  virtual bool is_pure() const { return true; }
  // True for ops whose kernels only move or convert values (Parameter, Reshape, Convert,
  // ...): they take the storage-only element types f16 and bf16. Every other op refuses them
  // when its output type is set, naming the op, the type and the fix (convert to f32).
  virtual bool admits_storage_only_types() const { return false; }
  // Matrix products and convolutions also take their two matrix operands (these inputs) in
  // bf16, both at once: they read bf16, accumulate in f32 and give f32 (mixed precision, see
  // docs/training.md; the CPU compiler's bf16 mode converts to it). Empty for every other op,
  // which refuses bf16 as it refuses f16.
  virtual std::vector<size_t> bf16_inputs() const { return {}; }
  // Mixed precision, beyond the operands of products: sets of this op's f32 values (inputs
  // and outputs) that its kernels can also store in bf16 while computing in f32, each set all
  // bf16 or none (e.g. a batch normalization's data and normalized output: a oneDNN
  // primitive's src and dst in one type). A backend's bf16 pass (pass/mixed_precision.hpp)
  // picks the sets whose every value's readers take bf16 and calls set_bf16_stored; then
  // validation types those outputs bf16 and admits those bf16 inputs. Empty by default.
  struct Bf16Set {
    std::vector<size_t> inputs, outputs;
  };
  virtual std::vector<Bf16Set> bf16_sets() const { return {}; }
  // The sets (indices into bf16_sets()) stored in bf16; validate again afterwards.
  void set_bf16_stored(const std::vector<size_t>& sets);
  bool is_bf16_stored_input(size_t i) const;
  bool is_bf16_stored_output(size_t i) const;
  // The type an op's rule computes input i in: f32 for an input stored in bf16, else its type.
  element::Type get_input_compute_type(size_t i) const {
    return is_bf16_stored_input(i) ? element::f32 : get_input_element_type(i);
  }
  // The output type of such an op for matrix operands of type `t`: f32 for bf16, else `t`.
  static element::Type accumulation_type(element::Type t) {
    return t == element::bf16 ? element::f32 : t;
  }
  // Hash and equality of attributes; the default goes through visit_attributes.
  virtual size_t attributes_hash() const;
  virtual bool attributes_equal(const Node& other) const;

  // Inputs.
  size_t get_input_size() const { return m_inputs.size(); }
  const Output& input_value(size_t i) const;
  const OutputVector& input_values() const { return m_inputs; }
  const Shape& get_input_shape(size_t i) const { return input_value(i).get_shape(); }
  element::Type get_input_element_type(size_t i) const {
    return input_value(i).get_element_type();
  }
  void set_argument(size_t i, const Output& value);
  void set_arguments(const OutputVector& values);

  // Outputs.
  size_t get_output_size() const { return m_outputs.size(); }
  const Shape& get_output_shape(size_t i) const;
  element::Type get_output_element_type(size_t i) const;
  // For single-output nodes.
  const Shape& get_shape() const;
  element::Type get_element_type() const;
  Output output(size_t i);
  OutputVector outputs();

  // Names. The friendly name is the user's (may be empty); get_name() is unique.
  const std::string& get_friendly_name() const { return m_friendly_name; }
  void set_friendly_name(const std::string& name) { m_friendly_name = name; }
  std::string get_name() const;
  size_t get_instance_id() const { return m_instance_id; }

  // "Add_3(Parameter_1, Parameter_2) -> f32{2,3} [auto_broadcast='numpy']"
  std::string description() const;
  std::string attributes_string() const;

  // Throws NodeValidationFailure("[Type] " + message).
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_type(const std::string& message) const;

 protected:
  Node();
  // `type_name` names the op in errors: the op's virtual get_type_name() cannot be called
  // while the base is being constructed ("pure virtual method called").
  Node(const char* type_name, const OutputVector& arguments);
  Node(const Node& other);
  Node& operator=(const Node&) = delete;

  void set_output_size(size_t n);
  void set_output_type(size_t i, element::Type type, const Shape& shape);
  // Used by typed constructors: validates and infers right away.
  void constructor_validate_and_infer_types() { validate_and_infer_types(); }
  // Throws NodeValidationFailure if an input or `output_type` is f16 or bf16 (set_output_type
  // calls it for ops that do not admit them; ops without outputs call it themselves).
  void check_no_storage_only_types(element::Type output_type = element::undefined) const;
  // Checks the number of inputs, with a message naming the op.
  void check_input_count(size_t expected) const;

 private:
  // Throws NodeValidationFailure naming `type_name` for a null input or an input that
  // refers to an output its node does not have.
  static void check_arguments(const std::string& type_name, const OutputVector& values);

  struct OutputDesc {
    element::Type type;
    Shape shape;
  };
  OutputVector m_inputs;
  std::vector<OutputDesc> m_outputs;
  std::string m_friendly_name;
  size_t m_instance_id;
  std::vector<size_t> m_bf16_inputs_stored, m_bf16_outputs_stored;  // see set_bf16_stored
};

std::ostream& operator<<(std::ostream& out, const Node& node);

// Builds the message helpers use: ostringstream << ... in one expression.
template <typename... Args>
std::string concat_message(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// CRTP base for ops: supplies the type name and clone from the class `T`, which declares
// `static constexpr const char* type_name = "Name";`, a default constructor and a copy
// constructor that keeps its attributes.
template <typename T>
class Op : public Node {
 public:
  const std::string& get_type_name() const override {
    static const std::string name(T::type_name);
    return name;
  }
  std::shared_ptr<Node> clone_with_new_inputs(const OutputVector& inputs) const override {
    auto node = std::make_shared<T>(static_cast<const T&>(*this));
    node->set_arguments(inputs);
    node->validate_and_infer_types();
    return node;
  }

 protected:
  Op() = default;
  explicit Op(const OutputVector& arguments) : Node(T::type_name, arguments) {}
};

// The list of ops, filled by NGRAPH_REGISTER_OP at load time: lets the bindings build any
// op by name, and lets tests check every op has a kernel (and later a gradient rule).
class OpRegistry {
 public:
  using Factory = std::function<std::shared_ptr<Node>()>;
  static OpRegistry& get();
  void add(const std::string& name, Factory factory);
  bool contains(const std::string& name) const;
  // A default-constructed node of the op, with no inputs; throws for an unknown name.
  std::shared_ptr<Node> create(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, Factory>> m_ops;
};

#define NGRAPH_CONCAT_INNER(a, b) a##b
#define NGRAPH_CONCAT(a, b) NGRAPH_CONCAT_INNER(a, b)
#define NGRAPH_REGISTER_OP(Class)                                                     \
  static const bool NGRAPH_CONCAT(ngraph_op_registered_, __COUNTER__) = [] {          \
    ::ngraph::OpRegistry::get().add(Class::type_name,                                 \
                                    [] { return std::make_shared<Class>(); });        \
    return true;                                                                      \
  }()

}  // namespace ngraph
