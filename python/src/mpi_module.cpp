// ngraph._ngraph_mpi: everything that needs the MPI library (Open MPI's libmpi), in an
// extension of its own so that ngraph._ngraph, and with it `import ngraph` and every
// single-process use, loads without MPI installed. python/ngraph/distributed.py imports it
// when available; loading it also registers the MPI world with the core (the default
// communicator under an MPI launcher). The Communicator type and DistributedError are bound by
// ngraph._ngraph, which must be imported first.
#include <mpi.h>

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"

namespace py = pybind11;
using ngraph::distributed::Communicator;
using ngraph::distributed::DistributedError;
using ngraph::distributed::MPICommunicator;

PYBIND11_MODULE(_ngraph_mpi, m) {
  m.doc() = "ngraph's MPI communicator (loads libmpi; ngraph._ngraph does not)";
  py::module_::import("ngraph._ngraph");  // binds Communicator and DistributedError

  m.def("world_communicator",
        [] { return std::static_pointer_cast<Communicator>(MPICommunicator::world()); });
  m.def("communicator_from_fortran",
        [](int64_t fhandle, const std::string& description) {
          int initialized = 0;
          MPI_Initialized(&initialized);
          if (!initialized)
            throw DistributedError(
                "the communicator comes from an MPI library that ngraph's does not see as "
                "initialised: mpi4py and ngraph load different MPI libraries");
          MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(fhandle));
          py::gil_scoped_release release;  // MPI_Comm_dup waits for the other ranks
          return std::static_pointer_cast<Communicator>(
              std::make_shared<MPICommunicator>(comm, description));
        },
        py::arg("fhandle"), py::arg("description") = "");
  m.def("mpi_library_version", &MPICommunicator::library_version);
  m.def("mpi_initialized", [] {
    int flag = 0;
    MPI_Initialized(&flag);
    return flag != 0;
  });
  m.def("mpi_thread_level", [] {
    int initialized = 0, level = -1;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Query_thread(&level);
    return level;
  }, "MPI_Query_thread (-1 before MPI is initialised).");
  m.def(
      "abort",
      [](int code) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
      },
      py::arg("code") = 1, "Ends every rank of the job (MPI_Abort on the world).");
}
