// Communicators: wrapping mpi4py's, the world, the one-process communicator, settings.
#include <mpi.h>

#include "bindings.hpp"
#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"

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
                             [](const Communicator& c) {
                               // With the checks of the computations' own communicators.
                               if (auto* m = dynamic_cast<const distributed::MPICommunicator*>(&c))
                                 return m->get_all_checks_passed();
                               return c.get_checks_passed();
                             })
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
  m.def("world_communicator", [] {
    return std::static_pointer_cast<Communicator>(distributed::MPICommunicator::world());
  });
  m.def("communicator_from_fortran",
        [](int64_t fhandle, const std::string& description) {
          int initialized = 0;
          MPI_Initialized(&initialized);
          if (!initialized)
            throw distributed::DistributedError(
                "the communicator comes from an MPI library that ngraph's does not see as "
                "initialised: mpi4py and ngraph load different MPI libraries");
          MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(fhandle));
          py::gil_scoped_release release;  // MPI_Comm_dup waits for the other ranks
          return std::static_pointer_cast<Communicator>(
              std::make_shared<distributed::MPICommunicator>(comm, description));
        },
        py::arg("fhandle"), py::arg("description") = "");
  m.def("mpi_library_version", &distributed::MPICommunicator::library_version);
  m.def("mpi_initialized", [] {
    int flag = 0;
    MPI_Initialized(&flag);
    return flag != 0;
  });
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
  m.def("get_abort_on_error", &distributed::get_abort_on_error);
  m.def("mpi_thread_level", [] {
    int initialized = 0, level = -1;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Query_thread(&level);
    return level;
  }, "MPI_Query_thread (-1 before MPI is initialised).");
  m.def("abort", [](int code) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  }, py::arg("code") = 1, "Ends every rank of the job (MPI_Abort on the world).");
}

}  // namespace python
}  // namespace ngraph
