#include "bindings.hpp"

#include "ngraph/except.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_ngraph, m) {
  m.doc() = "ngraph's C++ core: graph IR, passes and the CPU backend";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ngraph::ElementTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const ngraph::ngraph_error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  ngraph::python::init_graph(m);
  ngraph::python::init_runtime(m);
  ngraph::python::init_training(m);
  ngraph::python::init_distributed(m);
  ngraph::python::init_serializer(m);
}
