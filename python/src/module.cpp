#include "bindings.hpp"

#include "ngraph/except.hpp"
#include "ngraph/runtime/instrument.hpp"

namespace py = pybind11;

namespace {

// Raises ngraph.exceptions.<name> (pure Python, so it prints as
// ngraph.exceptions.UserInputError) with `message`.
void raise_ngraph(const char* name, const char* message) {
  py::object type = py::module_::import("ngraph.exceptions").attr(name);
  PyErr_SetString(type.ptr(), message);
}

}  // namespace

PYBIND11_MODULE(_ngraph, m) {
  m.doc() = "ngraph's C++ core: graph IR, passes and the CPU backend";
  // User mistakes (a node that breaks its op's rule, a bad argument, integer division by
  // zero in the data) become ngraph.exceptions.UserInputError (a ValueError) or NgraphTypeError
  // (a TypeError); backend failures stay RuntimeError.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ngraph::ElementTypeError& e) {
      raise_ngraph("NgraphTypeError", e.what());
    } catch (const ngraph::runtime::NumericsError& e) {
      raise_ngraph("NumericsError", e.what());
    } catch (const ngraph::ngraph_error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const py::type_error& e) {
      raise_ngraph("NgraphTypeError", e.what());
    } catch (const py::value_error& e) {
      raise_ngraph("UserInputError", e.what());
    } catch (const std::invalid_argument& e) {
      raise_ngraph("UserInputError", e.what());
    } catch (const std::domain_error& e) {
      raise_ngraph("UserInputError", e.what());
    }
  });
  ngraph::python::init_graph(m);
  ngraph::python::init_runtime(m);
  ngraph::python::init_training(m);
  ngraph::python::init_distributed(m);
  ngraph::python::init_serializer(m);
  ngraph::python::init_profiling(m);
  ngraph::python::init_settings(m);
  ngraph::python::init_testing(m);
}
