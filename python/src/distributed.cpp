// Communicators: the interface, the one-process communicator, the default one, settings.
// Nothing here needs MPI: the MPI communicator (the world, wrapping mpi4py's) is bound by
// the separate extension ngraph._ngraph_mpi (mpi_module.cpp).
#include "bindings.hpp"
#include "ngraph/distributed/communicator.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

void init_distributed(py::module_& m) {
  using distributed::Communicator;
  py::register_exception<distributed::DistributedError>(m, "DistributedError", PyExc_RuntimeError);

  py::class_<Communicator, std::shared_ptr<Communicator>>(
      m, "Communicator", "Ranks that run collectives together (MPI, or one local process).")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("name", &Communicator::name)
      .def_property("timeout", &Communicator::get_timeout, &Communicator::set_timeout,
                    "Seconds a collective may wait for the other ranks before it fails.")
      .def_property_readonly("checks_passed",
                             // With the checks of the computations' own communicators.
                             &Communicator::get_all_checks_passed)
      .def("barrier",
           [](Communicator& c) {
             int64_t in = 0, out = 0;
             py::gil_scoped_release release;
             c.allreduce(&in, &out, 1, element::i64, distributed::ReduceOp::sum);
           },
           "Waits (bounded by the timeout) until every rank has reached it.")
      .def("__repr__", [](const Communicator& c) {
        return "<Communicator " + c.name() + ": rank " + std::to_string(c.rank()) + " of " +
               std::to_string(c.size()) + ">";
      });

  m.def("local_communicator", [] { return std::static_pointer_cast<Communicator>(std::make_shared<distributed::LocalCommunicator>()); });
  m.def("launched_with_several_ranks", &distributed::launched_with_several_ranks);
  m.def("get_default_communicator", &distributed::get_default_communicator);
  m.def("set_default_communicator", &distributed::set_default_communicator);
  m.def("set_check_mode", [](const std::string& mode) {
    if (mode == "always") distributed::set_check_mode(distributed::CheckMode::always);
    else if (mode == "first") distributed::set_check_mode(distributed::CheckMode::first);
    else if (mode == "never") distributed::set_check_mode(distributed::CheckMode::never);
    else throw py::value_error("check must be 'always', 'first' or 'never', got '" + mode + "'");
  });
  m.def("get_check_mode", [] {
    switch (distributed::get_check_mode()) {
      case distributed::CheckMode::always: return "always";
      case distributed::CheckMode::first: return "first";
      case distributed::CheckMode::never: return "never";
    }
    return "always";
  });
  m.def("set_abort_on_error", &distributed::set_abort_on_error, py::arg("abort"));
  m.def(
      "set_default_compression",
      [](const std::string& wire, bool error_feedback) {
        distributed::set_default_compression({distributed::wire_from_string(wire), error_feedback});
      },
      py::arg("compression"), py::arg("error_feedback"));
  m.def("get_default_compression", [] {
    auto c = distributed::get_default_compression();
    return py::make_tuple(distributed::to_string(c.wire), c.error_feedback);
  }, "(compression, error_feedback) that ng.allreduce uses for f32 sum and mean when given none.");
  m.def("get_abort_on_error", &distributed::get_abort_on_error);
}

}  // namespace python
}  // namespace ngraph
