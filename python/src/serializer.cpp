// Serialization: functions as JSON in nGraph's format (ngraph/serializer.hpp).
#include "bindings.hpp"
#include "ngraph/distributed/communicator.hpp"
#include "ngraph/function.hpp"
#include "ngraph/serializer.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

void init_serializer(py::module_& m) {
  py::register_exception<SerializationError>(m, "SerializationError", PyExc_ValueError);

  m.def(
      "serialize",
      [](const std::shared_ptr<Function>& f, size_t indent) {
        if (!f) throw py::type_error("serialize: the function is None");
        py::gil_scoped_release release;
        return serialize(f, indent);
      },
      py::arg("function"), py::arg("indent") = 0,
      "JSON text of `function` in nGraph's format (one line when indent is 0).");
  m.def(
      "deserialize",
      [](const std::string& text, const std::shared_ptr<distributed::Communicator>& comm) {
        DeserializeOptions options;
        options.communicator = comm;
        py::gil_scoped_release release;
        return deserialize(text, options);
      },
      py::arg("text"), py::arg("communicator") = nullptr,
      "The Function a JSON document describes; SerializationError (a ValueError) naming the "
      "field otherwise. Collectives run on `communicator` (None: the default one).");
}

}  // namespace python
}  // namespace ngraph
