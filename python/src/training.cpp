// Autodiff and training state: gradients as graph nodes, variables that live in the runtime.
#include "bindings.hpp"
#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

namespace {

std::string variable_name(const op::Variable& v) {
  return v.get_friendly_name().empty() ? v.get_name() : v.get_friendly_name();
}

// Checks `value` against the variable and returns a C-contiguous array of its dtype.
py::array checked_value(const op::Variable& v, const py::object& value) {
  const auto& st = *v.get_state();
  py::dtype want = dtype_of(st.get_element_type());
  py::array a = py::array::ensure(value);
  if (!a) throw py::type_error("[Variable] " + variable_name(v) + ": value is not array-like");
  if (!a.dtype().is(want)) {
    auto numpy = py::module_::import("numpy");
    if (!numpy.attr("can_cast")(a.dtype(), want, "same_kind").cast<bool>())
      throw py::type_error("[Variable] " + variable_name(v) + " holds " +
                           st.get_element_type().get_type_name() + to_braces(st.get_shape()) +
                           "; cannot convert a " + py::str(a.dtype()).cast<std::string>() +
                           " value safely");
    a = a.attr("astype")(want);
  }
  Shape s(a.shape(), a.shape() + a.ndim());
  if (s != st.get_shape())
    throw py::value_error("[Variable] " + variable_name(v) + " holds " +
                          st.get_element_type().get_type_name() + to_braces(st.get_shape()) +
                          ", got a value of shape " + to_braces(s));
  return py::array::ensure(a, py::array::c_style);
}

void def_variables(py::module_& m) {
  py::class_<op::Variable, Node, std::shared_ptr<op::Variable>>(
      m, "Variable", "A value that lives in the runtime between calls (weights, optimizer state).")
      .def("get_value",
           [](const op::Variable& v) {
             const auto& st = *v.get_state();
             py::array out(dtype_of(st.get_element_type()),
                           std::vector<py::ssize_t>(st.get_shape().begin(), st.get_shape().end()));
             st.get(out.mutable_data());
             return out;
           },
           "A NumPy copy of the current value.")
      .def("set_value",
           [](op::Variable& v, const py::object& value) {
             py::array a = checked_value(v, value);
             v.get_state()->set(a.data());
           },
           py::arg("value"), "Replaces the value (shape and dtype checked).")
      .def_property_readonly("scattered", [](const op::Variable& v) { return v.get_state()->is_scattered(); },
                             "Whether this rank holds only its share of the value (an optimizer "
                             "state a sharded update across nodes keeps with its owners).")
      .def("gather_shares",
           [](op::Variable& v) {
             py::gil_scoped_release release;
             v.get_state()->gather();
           },
           "Collective over every rank of the computation that scattered it: gathers the "
           "shares of a scattered optimizer state, so every rank holds it whole (nothing "
           "when it is whole). ng.checkpoint.consolidate calls it.");

  m.def("make_variable",
        [](const py::object& initial, const std::string& name) {
          py::array a = py::array::ensure(initial, py::array::c_style);
          if (!a) throw py::type_error("[Variable] initial value is not array-like");
          element::Type t = element_type_of(a.dtype(), "[Variable] initial value");
          Shape s(a.shape(), a.shape() + a.ndim());
          auto state = std::make_shared<VariableState>(t, s, a.data());
          state->set_name(name);
          auto v = std::make_shared<op::Variable>(state);
          if (!name.empty()) v->set_friendly_name(name);
          return v;
        },
        py::arg("initial"), py::arg("name") = "");
}

void def_gradients(py::module_& m) {
  m.def("gradients",
        [](const std::shared_ptr<Node>& y, const std::vector<std::shared_ptr<Node>>& xs,
           const std::shared_ptr<Node>& seed) {
          Output yv = value_of(y, "[gradients] y");
          AxisSet all;
          for (size_t i = 0; i < yv.get_shape().size(); ++i) all.insert(i);
          Output s = seed ? value_of(seed, "[gradients] seed")
                          : std::make_shared<op::Broadcast>(
                                autodiff::scalar(yv.get_element_type(), 1.0), yv.get_shape(), all);
          autodiff::Adjoints adjoints(OutputVector{yv}, OutputVector{s});
          NodeVector out;
          for (size_t i = 0; i < xs.size(); ++i) {
            if (!xs[i]) throw py::type_error("[gradients] a variable is None");
            Output x = value_of(xs[i], "[gradients] xs[" + std::to_string(i) + "]");
            // A gradient may be one output of a multi-output node (BatchNormTrainingBackprop).
            out.push_back(node_of(adjoints.backprop_output(x)));
          }
          return out;
        },
        py::arg("y"), py::arg("xs"), py::arg("seed") = nullptr);
}

void def_make_function(py::module_& m) {
  m.def("make_function",
        [](const std::vector<std::shared_ptr<Node>>& results,
           const std::vector<std::shared_ptr<Node>>& parameters,
           const std::vector<std::pair<std::shared_ptr<Node>, std::shared_ptr<Node>>>& updates,
           const std::vector<std::shared_ptr<Node>>& sinks_in, const std::string& name) {
          ParameterVector params;
          for (size_t i = 0; i < parameters.size(); ++i) {
            auto p = std::dynamic_pointer_cast<op::Parameter>(parameters[i]);
            if (!p) throw py::type_error("[Function] parameter " + std::to_string(i) + " is not a Parameter node");
            params.push_back(p);
          }
          OutputVector outs;
          for (size_t i = 0; i < results.size(); ++i)
            outs.push_back(value_of(results[i], "[Function] result " + std::to_string(i)));
          NodeVector sinks(sinks_in.begin(), sinks_in.end());
          for (size_t i = 0; i < updates.size(); ++i) {
            auto var = std::dynamic_pointer_cast<op::Variable>(updates[i].first);
            if (!var)
              throw py::type_error("[updates] pair " + std::to_string(i) + ": " +
                                   (updates[i].first ? updates[i].first->get_name() : "None") +
                                   " is not a variable (make it with ng.variable)");
            if (!updates[i].second) throw py::type_error("[updates] pair " + std::to_string(i) + ": value is None");
            std::string what = "[updates] pair " + std::to_string(i) + " value";
            sinks.push_back(std::make_shared<op::Assign>(var, value_of(updates[i].second, what)));
          }
          return std::make_shared<Function>(outs, sinks, params, name);
        },
        py::arg("results"), py::arg("parameters"), py::arg("updates"), py::arg("sinks"),
        py::arg("name") = "",
        "A Function with (variable, value) updates and sinks (nodes without outputs: Send).");
}

}  // namespace

void init_training(py::module_& m) {
  py::register_exception<autodiff::NoGradientRule>(m, "NoGradientError", PyExc_ValueError);
  def_variables(m);
  def_gradients(m);
  def_make_function(m);
}

}  // namespace python
}  // namespace ngraph
