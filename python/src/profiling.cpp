// The timeline, the numerics check, and what ng.visualize reads of a node (its outputs'
// shapes and types, which output of which node each input reads).
#include "bindings.hpp"
#include "ngraph/ops/collective.hpp"
#include "ngraph/runtime/instrument.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

void init_profiling(py::module_& m) {
  m.def("set_check_numerics", &runtime::set_check_numerics, py::arg("on"),
        "Check every kernel output, argument and variable of floating type for NaN and Inf.");
  m.def("get_check_numerics", &runtime::get_check_numerics);
  m.def("timeline_start", &runtime::timeline_start,
        "Starts collecting one event per kernel and call; false if already started.");
  m.def("timeline_active", &runtime::timeline_active);
  m.def("timeline_now_ns", &runtime::now_ns, "The clock of timeline events, in nanoseconds.");
  m.def("timeline_stop", [] {
    std::vector<runtime::TraceEvent> events = runtime::timeline_stop();
    py::list out;
    for (auto& e : events)
      out.append(py::make_tuple(e.name(), e.type(), e.category(), e.args(), e.start_ns, e.dur_ns, e.tid));
    return out;
  }, "Stops collecting; returns (name, type, category, args_json, start_ns, dur_ns, thread) per event.");
  m.def("node_outputs", [](const Node& n) {
    py::list out;
    for (size_t o = 0; o < n.get_output_size(); ++o)
      out.append(py::make_tuple(std::vector<size_t>(n.get_output_shape(o).begin(), n.get_output_shape(o).end()),
                                n.get_output_element_type(o).get_type_name()));
    return out;
  }, py::arg("node"), "(shape, element type name) per output.");
  m.def("node_is_collective", [](const Node& n) { return dynamic_cast<const op::Collective*>(&n) != nullptr; },
        py::arg("node"), "Whether the node is a collective (also a backend's fused one).");
  m.def("node_input_values", [](const Node& n) {
    py::list out;
    for (const auto& in : n.input_values()) out.append(py::make_tuple(in.get_node_shared_ptr(), in.get_index()));
    return out;
  }, py::arg("node"), "(node, output index) per input, in order.");
}

}  // namespace python
}  // namespace ngraph
