// ngraph._ngraph_ccl: the oneCCL backend's hook, a module of its own so that ngraph imports
// (and runs on MPI) without oneCCL; ngraph.distributed loads it for backend="ccl". Built only
// with -DNGRAPH_DISTRIBUTED="mpi;ccl".
#include <pybind11/pybind11.h>

#include "ngraph/distributed/ccl_communicator.hpp"

namespace py = pybind11;
using ngraph::distributed::CCLCommunicator;
using ngraph::distributed::Communicator;
using ngraph::distributed::MPICommunicator;

PYBIND11_MODULE(_ngraph_ccl, m) {
  py::module_::import("ngraph._ngraph");  // Communicator and DistributedError
  m.def(
      "ccl_communicator",
      [](const std::shared_ptr<Communicator>& comm) -> std::shared_ptr<Communicator> {
        if (!comm) throw py::type_error("ccl_communicator: comm is None");
        if (std::dynamic_pointer_cast<CCLCommunicator>(comm) || comm->size() == 1) return comm;
        auto mpi = std::dynamic_pointer_cast<MPICommunicator>(comm);
        if (!mpi)
          throw py::type_error("ccl_communicator: " + comm->name() +
                               " is not an MPI communicator (oneCCL's is made over one)");
        py::gil_scoped_release release;  // collective: waits for the other ranks
        return std::make_shared<CCLCommunicator>(mpi);
      },
      py::arg("comm"),
      "A oneCCL communicator of the ranks of an MPI communicator (collective over them); "
      "one rank or an existing oneCCL communicator is returned as it is.");
  m.def("library_version", &CCLCommunicator::library_version);
}
