// Nodes, generic op construction by name, constants, functions and passes.
#include <set>

#include "bindings.hpp"
#include "ngraph/except.hpp"
#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/pass/manager.hpp"
#include "ngraph/runtime/cpu/constant_evaluator.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

element::Type element_type_of(const py::dtype& dtype, const char* what) {
  // The NumPy name ("float32", "uint8", "bool"); byte-swapped dtypes have other names.
  auto name = py::str(dtype).cast<std::string>();
#define NGRAPH_FROM_NUMPY(t, ctype, numpy) \
  if (name == numpy) return element::t;
  NGRAPH_ALL_ELEMENT_TYPES(NGRAPH_FROM_NUMPY)
#undef NGRAPH_FROM_NUMPY
  // A byte-swapped form of a supported type is refused by name, not read as raw bytes.
  if (dtype.attr("byteorder").cast<std::string>() == ">" || dtype.attr("byteorder").cast<std::string>() == "<") {
    auto native = py::str(dtype.attr("newbyteorder")("=")).cast<std::string>();
    throw py::type_error(std::string(what) + ": dtype " + name + " has non-native byte order; convert it, e.g. " +
                         "array.astype(\"" + native + "\")");
  }
  throw py::type_error(std::string(what) + ": dtype " + name + " is not supported (" +
                       supported_dtypes() + ")");
}

std::string supported_dtypes() {
  return "use bool, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, "
         "uint32, uint64 or ml_dtypes.bfloat16";
}

py::dtype dtype_of(element::Type type) {
#define NGRAPH_TO_NUMPY(t, ctype, numpy) \
  if (type == element::t) return py::dtype(numpy);
  NGRAPH_ELEMENT_TYPES(NGRAPH_TO_NUMPY)
#undef NGRAPH_TO_NUMPY
  if (type == element::f16) return py::dtype("float16");
  if (type == element::bf16) {
    // NumPy has no bfloat16; ml_dtypes (JAX's) adds it. Without it, bf16 values stay in the
    // graph: PyTorch's .numpy() refuses bfloat16 tensors the same way.
    try {
      return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ImportError)) throw;
    }
    throw py::type_error("element type bf16 has no NumPy dtype: NumPy has no bfloat16, and the "
                         "ml_dtypes package that adds it is not installed (pip install ml_dtypes). "
                         "Without it, convert to f32 in the graph first: ng.convert(x, np.float32)");
  }
  throw py::type_error("element type " + type.get_type_name() + " has no NumPy dtype");
}

namespace {

// Sets attributes from Python keyword values; remembers which were used.
class DictLoader : public AttributeVisitor {
 public:
  DictLoader(const Node& node, const py::dict& attrs) : m_node(node), m_attrs(attrs) {}
  using AttributeVisitor::on;

  void on(const std::string& name, bool& v) override {
    if (auto o = take(name)) v = convert<bool>(name, *o, "a bool");
  }
  void on(const std::string& name, int64_t& v) override {
    if (auto o = take(name)) v = convert<int64_t>(name, *o, "an integer");
  }
  void on(const std::string& name, double& v) override {
    if (auto o = take(name)) v = convert<double>(name, *o, "a number");
  }
  void on(const std::string& name, std::string& v) override {
    if (auto o = take(name)) v = convert<std::string>(name, *o, "a string");
  }
  void on(const std::string& name, element::Type& v) override {
    if (auto o = take(name)) {
      if (py::isinstance<py::str>(*o)) {
        try {
          v = element::Type::from_name(o->cast<std::string>());
        } catch (const std::invalid_argument& e) {
          m_node.fail_type("attribute '" + name + "': " + e.what());
        }
      } else {
        v = element_type_of(py::dtype::from_args(*o), ("[" + m_node.get_type_name() + "] attribute '" + name + "'").c_str());
      }
    }
  }
  void on(const std::string& name, std::vector<int64_t>& v) override {
    if (auto o = take(name)) v = convert<std::vector<int64_t>>(name, *o, "a list of integers");
  }

  void check_all_used() const {
    for (auto item : m_attrs) {
      auto key = item.first.cast<std::string>();
      if (!m_used.count(key)) {
        std::string known;
        for (auto& k : m_seen) known += (known.empty() ? "" : ", ") + k;
        m_node.fail("unknown attribute '" + key + "' (attributes: " +
                    (known.empty() ? "none" : known) + ")");
      }
    }
  }

 private:
  std::optional<py::object> take(const std::string& name) {
    m_seen.push_back(name);
    if (!m_attrs.contains(name)) return std::nullopt;
    m_used.insert(name);
    py::object o = m_attrs[py::str(name)];
    if (o.is_none()) return std::nullopt;
    return o;
  }
  template <typename T>
  T convert(const std::string& name, const py::object& o, const char* expected) {
    try {
      if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
        // Sets, tuples, lists, NumPy arrays of integers.
        std::vector<int64_t> out;
        for (auto item : o) out.push_back(py::int_(py::reinterpret_borrow<py::object>(item)).cast<int64_t>());
        return out;
      } else if constexpr (std::is_same_v<T, int64_t>) {
        if (py::isinstance<py::float_>(o)) throw py::cast_error("float");
        return py::int_(o).cast<int64_t>();
      } else {
        return o.cast<T>();
      }
    } catch (const py::error_already_set&) {
    } catch (const py::cast_error&) {
    }
    m_node.fail_type("attribute '" + name + "' expects " + expected + ", got " +
                     py::repr(o).cast<std::string>());
  }

  const Node& m_node;
  const py::dict& m_attrs;
  std::set<std::string> m_used;
  std::vector<std::string> m_seen;
};

std::shared_ptr<Node> make_node(const std::string& type, const std::vector<std::shared_ptr<Node>>& inputs,
                                const py::dict& attrs, const std::string& name,
                                const std::shared_ptr<distributed::Communicator>& comm) {
  if (type == "Constant")
    throw std::invalid_argument("[Constant] build constants with ngraph.constant(value)");
  auto node = OpRegistry::get().create(type);
  OutputVector args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) node->fail("input " + std::to_string(i) + " is None");
    args.push_back(value_of(inputs[i], "[" + type + "] input " + std::to_string(i)));
  }
  node->set_arguments(args);
  DictLoader loader(*node, attrs);
  try {
    node->visit_attributes(loader);
  } catch (const NodeValidationFailure&) {
    throw;
  } catch (const std::invalid_argument& e) {
    // The core's size-attribute adapters (e.g. a negative bound) do not know the node.
    node->fail(e.what());
  }
  loader.check_all_used();
  if (auto* coll = dynamic_cast<op::Collective*>(node.get())) {
    coll->set_communicator(comm);  // null: the default communicator
  } else if (comm) {
    node->fail("takes no communicator");
  }
  node->validate_and_infer_types();
  if (!name.empty()) node->set_friendly_name(name);
  return node;
}

std::shared_ptr<Node> make_constant(py::array value, const std::string& name) {
  element::Type type = element_type_of(value.dtype(), "[Constant]");
  py::array c = py::array::ensure(value, py::array::c_style);
  Shape shape(c.shape(), c.shape() + c.ndim());
  auto node = std::make_shared<op::Constant>(type, shape, c.data());
  if (!name.empty()) node->set_friendly_name(name);
  return node;
}

py::list shape_list(const Shape& s) {
  py::list l;
  for (auto d : s) l.append(d);
  return l;
}

std::string output_count(size_t n) {
  return std::to_string(n) + (n == 1 ? " output" : " outputs");
}

// "f32{2,3}, f32{3}, f32{3}": the type and shape of every output.
std::string output_types(const Node& n) {
  std::string out;
  for (size_t i = 0; i < n.get_output_size(); ++i)
    out += (i ? ", " : "") + n.get_output_element_type(i).get_type_name() +
           to_braces(n.get_output_shape(i));
  return out;
}

// The node itself for properties of its value (shape, dtype): a node with several outputs has
// no single one, so say which to pick.
const Node& single_valued(const Node& n, const char* what) {
  if (n.get_output_size() > 1)
    throw py::value_error("[" + n.get_type_name() + "] " + n.get_name() + " has " +
                          output_count(n.get_output_size()) + " (" + output_types(n) +
                          "), so no single " + what + "; pick an output with node[i]");
  return n;
}

// `index` as an output number of `node` (negative counts from the end, as in Python); raises
// IndexError naming the node and its output count.
size_t output_index(const Node& node, const py::object& index) {
  if (!PyIndex_Check(index.ptr()) || py::isinstance<py::bool_>(index))
    throw py::type_error("output indices of " + node.get_name() + " must be integers, got " +
                         py::repr(index).cast<std::string>());
  auto i = py::int_(index).cast<long long>();
  auto n = static_cast<long long>(node.get_output_size());
  if (i < -n || i >= n)
    throw py::index_error("output index " + std::to_string(i) + " is out of range for " +
                          node.get_name() + " (" + node.get_type_name() + "), which has " +
                          output_count(node.get_output_size()));
  return static_cast<size_t>(i < 0 ? i + n : i);
}

// ng.get_output_element: always a GetOutputElement node (as nGraph's), named if `name` is given.
std::shared_ptr<Node> make_get_output_element(const std::shared_ptr<Node>& node,
                                              const py::object& index, const std::string& name) {
  if (!node) throw py::type_error("[GetOutputElement] node is None");
  auto goe = std::make_shared<op::GetOutputElement>(node, output_index(*node, index));
  if (!name.empty()) goe->set_friendly_name(name);
  return goe;
}

// node[i]: output i as a single-output node (the node itself when it has one output).
std::shared_ptr<Node> node_getitem(const std::shared_ptr<Node>& node, const py::object& index) {
  return node_of(node->output(output_index(*node, index)));
}

// Unpacking a multi-output node: y, mean, var = ng.batch_norm(...).
py::iterator node_iter(const std::shared_ptr<Node>& node) {
  if (node->get_output_size() < 2)
    throw py::type_error("[" + node->get_type_name() + "] " + node->get_name() + " has " +
                         output_count(node->get_output_size()) +
                         ": only nodes with several outputs can be unpacked or iterated");
  py::list elements;
  for (const auto& o : node->outputs()) elements.append(node_of(o));
  return py::iter(elements);
}

}  // namespace

Output value_of(const std::shared_ptr<Node>& node, const std::string& what) {
  if (!node) throw py::type_error(what + " is None");
  if (node->get_output_size() != 1)
    throw py::type_error(what + " (" + node->get_name() + ", " + node->get_type_name() +
                         ") has " + output_count(node->get_output_size()) +
                         (node->get_output_size()
                              ? "; pick one with node[i] or ng.get_output_element(node, i)"
                              : " and no value"));
  return node->output(0);
}

std::shared_ptr<Node> node_of(const Output& value) { return op::get_output_element(value); }

namespace {

void def_node(py::module_& m) {
  py::class_<Node, std::shared_ptr<Node>>(m, "Node", "A node of an ngraph graph (one op).")
      .def_property_readonly(
          "shape", [](const Node& n) { return shape_list(single_valued(n, "shape").get_shape()); },
          "The output shape, as a list of ints.")
      .def_property_readonly(
          "element_type",
          [](const Node& n) {
            return single_valued(n, "element type").get_element_type().get_type_name();
          },
          "The output element type's short name: 'f32', 'i8', 'u64', 'boolean', ...")
      .def_property_readonly(
          "dtype",
          [](const Node& n) { return dtype_of(single_valued(n, "dtype").get_element_type()); },
          "The output element type as a NumPy dtype.")
      .def_property("name", &Node::get_name, &Node::set_friendly_name,
                    "The node's name: the one given by the user, else a unique one (Add_3).")
      .def_property_readonly("friendly_name", &Node::get_friendly_name)
      .def("get_type_name", &Node::get_type_name, "The op's name, e.g. 'Add'.")
      .def("get_output_size", &Node::get_output_size, "The number of outputs (values) of the node.")
      .def("__getitem__", &node_getitem, py::arg("index"),
           "Output `index` as a node: the node itself when it has one output, else a "
           "GetOutputElement. IndexError when the node has no such output.")
      .def("__iter__", &node_iter,
           "The outputs of a node with several outputs, as nodes (for unpacking).")
      .def("get_instance_id", &Node::get_instance_id)
      .def("inputs",
           [](const Node& n) {
             std::vector<std::shared_ptr<Node>> out;
             for (auto& in : n.input_values()) out.push_back(in.get_node_shared_ptr());
             return out;
           },
           "The nodes this node reads, in order.")
      .def("attributes", &Node::attributes_string, "The op's attributes, as text.")
      .def("same_node", [](const Node& a, const Node& b) { return &a == &b; })
      .def("__repr__", [](const Node& n) {
        std::string value = n.get_output_size() == 1
                                ? output_types(n)
                                : output_count(n.get_output_size()) +
                                      (n.get_output_size() ? ": " + output_types(n) : "");
        return "<" + n.get_type_name() + ": '" + n.get_name() + "' " + value + ">";
      });
}

// Nodes built by op name, constants and their values, the op names.
void def_node_builders(py::module_& m) {
  m.def("make_node", &make_node, py::arg("type"), py::arg("inputs"), py::arg("attributes"),
        py::arg("name") = "", py::arg("communicator") = nullptr,
        "Builds a node of the op `type` on `inputs` with keyword `attributes`; validates it.");
  m.def("make_constant", &make_constant, py::arg("value"), py::arg("name") = "");
  m.def("get_output_element", &make_get_output_element, py::arg("node"), py::arg("index"),
        py::arg("name") = "",
        "A GetOutputElement node for output `index` of `node` (IndexError if it has none).");
  m.def("constant_value", [](const std::shared_ptr<Node>& n) {
    auto c = std::dynamic_pointer_cast<op::Constant>(n);
    if (!c) throw py::type_error("constant_value: " + n->get_name() + " is not a Constant");
    py::array out(dtype_of(c->get_element_type()),
                  std::vector<py::ssize_t>(c->get_shape().begin(), c->get_shape().end()));
    if (c->byte_size()) std::memcpy(out.mutable_data(), c->get_data_ptr(), c->byte_size());
    return out;
  });
  m.def("op_names", [] { return OpRegistry::get().names(); }, "The names of all ops of the core.");
}

void def_function(py::module_& m) {
  py::class_<Function, std::shared_ptr<Function>>(m, "Function",
                                                  "A graph with parameters and results.")
      .def(py::init([](const std::vector<std::shared_ptr<Node>>& results,
                       const std::vector<std::shared_ptr<Node>>& parameters, const std::string& name) {
             ParameterVector params;
             for (size_t i = 0; i < parameters.size(); ++i) {
               auto p = std::dynamic_pointer_cast<op::Parameter>(parameters[i]);
               if (!p)
                 throw py::type_error("[Function] parameter " + std::to_string(i) + " (" +
                                      (parameters[i] ? parameters[i]->get_name() : "None") +
                                      ") is not a Parameter node");
               params.push_back(p);
             }
             OutputVector outs;
             for (size_t i = 0; i < results.size(); ++i) {
               outs.push_back(value_of(results[i], "[Function] result " + std::to_string(i)));
             }
             return std::make_shared<Function>(outs, params, name);
           }),
           py::arg("results"), py::arg("parameters"), py::arg("name") = "")
      .def_property_readonly("name", &Function::get_name)
      .def("get_parameters",
           [](const Function& f) { return NodeVector(f.get_parameters().begin(), f.get_parameters().end()); })
      .def("get_results",
           [](const Function& f) { return NodeVector(f.get_results().begin(), f.get_results().end()); })
      .def("get_ordered_ops", &Function::get_ordered_ops)
      .def("clone", &Function::clone)
      .def("__str__", &Function::to_string)
      .def("__repr__", [](const Function& f) {
        return "<Function '" + f.get_name() + "': " + std::to_string(f.get_parameters().size()) +
               " parameters, " + std::to_string(f.get_results().size()) + " results>";
      });
}

void def_passes(py::module_& m) {
  m.def("run_passes",
        [](const std::shared_ptr<Function>& f, const std::vector<std::string>& names) {
          pass::Manager manager;
          for (const auto& n : names) {
            if (n == "DeadNodeElimination") manager.register_pass<pass::DeadNodeElimination>();
            else if (n == "CommonSubexpressionElimination") manager.register_pass<pass::CommonSubexpressionElimination>();
            else if (n == "GeluFusion")
              manager.register_pass<pass::GeluFusion>();
            else if (n == "ConstantFolding")
              manager.register_pass<pass::ConstantFolding>(runtime::cpu::evaluate_constant);
            else
              throw py::value_error("unknown pass '" + n +
                                    "' (DeadNodeElimination, "
                                    "CommonSubexpressionElimination, ConstantFolding, GeluFusion)");
          }
          return manager.run_passes(f);
        },
        py::arg("function"), py::arg("passes"),
        "Runs the named passes on `function` in place; returns whether it changed.");
}

}  // namespace

void init_graph(py::module_& m) {
  def_node(m);
  def_node_builders(m);
  def_function(m);
  def_passes(m);
}

}  // namespace python
}  // namespace ngraph
