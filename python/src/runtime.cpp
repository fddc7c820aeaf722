// Backends and executables: NumPy arrays in and out, the GIL released while running.
#include "bindings.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

namespace {

std::string describe(element::Type t, const Shape& s) { return t.get_type_name() + to_braces(s); }

// Runs `exe` on `inputs` (one C-contiguous array of the right dtype and shape per parameter,
// used in place) and returns one new array per result.
py::list call(runtime::Executable& exe, const py::sequence& inputs) {
  const auto& params = exe.get_parameters();
  const auto& results = exe.get_results();
  if (static_cast<size_t>(py::len(inputs)) != params.size())
    throw py::type_error("[Executable] expects " + std::to_string(params.size()) +
                         " input arrays, got " + std::to_string(py::len(inputs)));
  std::vector<py::array> keep;
  std::vector<const void*> in_ptrs(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    py::object o = inputs[i];
    if (!py::isinstance<py::array>(o))
      throw py::type_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                           ") must be a NumPy array");
    auto a = o.cast<py::array>();
    element::Type t = element_type_of(a.dtype(), ("[Executable] input " + std::to_string(i) +
                                                  " (" + p->get_name() + ")").c_str());
    Shape s(a.shape(), a.shape() + a.ndim());
    if (t != p->get_element_type())
      throw py::type_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                           ") expects " + describe(p->get_element_type(), p->get_shape()) +
                           ", got " + describe(t, s));
    if (s != p->get_shape())
      throw py::value_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                            ") expects " + describe(p->get_element_type(), p->get_shape()) +
                            ", got " + describe(t, s));
    if (!(a.flags() & py::array::c_style))
      throw py::value_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                            ") must be C-contiguous");
    in_ptrs[i] = a.data();
    keep.push_back(std::move(a));
  }
  py::list outs;
  std::vector<void*> out_ptrs(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const Shape& s = results[i]->get_shape();
    py::array a(dtype_of(results[i]->get_element_type()), std::vector<py::ssize_t>(s.begin(), s.end()));
    out_ptrs[i] = a.mutable_data();
    outs.append(a);
  }
  {
    py::gil_scoped_release release;
    exe.call_raw(out_ptrs.data(), in_ptrs.data());
  }
  return outs;
}

runtime::cpu::CPUExecutable& as_cpu(runtime::Executable& e) {
  auto* c = dynamic_cast<runtime::cpu::CPUExecutable*>(&e);
  if (!c) throw py::type_error("not a CPU executable");
  return *c;
}

}  // namespace

void init_runtime(py::module_& m) {
  py::class_<runtime::Backend, std::shared_ptr<runtime::Backend>>(m, "Backend")
      .def_static("create", &runtime::Backend::create, py::arg("type"))
      .def_static("get_registered_devices", &runtime::Backend::get_registered_devices)
      .def("compile",
           [](runtime::Backend& b, const std::shared_ptr<Function>& f) {
             py::gil_scoped_release release;
             return b.compile(f);
           },
           py::arg("function"));

  py::class_<runtime::Executable, std::shared_ptr<runtime::Executable>>(m, "Executable")
      .def("call", &call, py::arg("inputs"),
           "Runs on one array per parameter; returns one new array per result.")
      .def("get_parameters",
           [](const runtime::Executable& e) {
             return NodeVector(e.get_parameters().begin(), e.get_parameters().end());
           })
      .def("get_results",
           [](const runtime::Executable& e) {
             return NodeVector(e.get_results().begin(), e.get_results().end());
           })
      .def_property_readonly("schedule", [](runtime::Executable& e) { return as_cpu(e).get_schedule(); },
                             "The names of the nodes the executable runs, in order.")
      .def_property_readonly("arena_bytes", [](runtime::Executable& e) { return as_cpu(e).get_arena_bytes(); },
                             "Bytes of the planned buffer for intermediates.")
      .def_property_readonly("unshared_bytes",
                             [](runtime::Executable& e) { return as_cpu(e).get_unshared_bytes(); },
                             "Bytes the intermediates would need without buffer reuse.")
      .def_property_readonly("function", [](runtime::Executable& e) { return as_cpu(e).get_function(); },
                             "The optimised function that was compiled.")
      .def("set_profiling", [](runtime::Executable& e, bool on) { as_cpu(e).set_profiling(on); },
           py::arg("on"), "Time every step of every call (reset when switched).")
      .def_property_readonly("step_seconds", [](runtime::Executable& e) { return as_cpu(e).get_step_seconds(); },
                             "Seconds spent in each step (same order as schedule) while profiling.");
}

}  // namespace python
}  // namespace ngraph
