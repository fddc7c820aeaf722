// ngraph._ngraph_mpi: everything that needs the MPI library (Open MPI's libmpi), in an
// extension of its own so that ngraph._ngraph, and with it `import ngraph` and every
// single-process use, loads without MPI installed. python/ngraph/distributed.py imports it
// when available; loading it also registers the MPI world with the core (the default
// communicator under an MPI launcher). The Communicator type and DistributedError are bound by
// ngraph._ngraph, which must be imported first.
#include <mpi.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <memory>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/cross_node.hpp"
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
  m.def("traffic", [] {
    py::dict bytes;
    for (auto w : {ngraph::distributed::Wire::f32, ngraph::distributed::Wire::bf16, ngraph::distributed::Wire::fp16})
      bytes[ngraph::distributed::to_string(w)] = ngraph::distributed::process_bytes_sent(w);
    return bytes;
  }, "Payload bytes this process sent through the cross-node exchange, by wire ('none' is f32).");
  m.def(
      "agree_on_settings",
      [](const std::shared_ptr<Communicator>& comm, const std::string& where) {
        auto mpi = std::dynamic_pointer_cast<MPICommunicator>(comm);
        if (!mpi) return false;
        py::gil_scoped_release release;  // an allgather over the ranks
        mpi->agree_on_settings(where);
        return true;
      },
      py::arg("comm"), py::arg("where"),
      "Compares the settings that must agree (DistributedError on every rank naming those that differ); "
      "False when `comm` is not an MPI communicator.");
  // A test interface: the exchange itself on `comm`'s ranks, outside any graph.
  m.def(
      "exchange_allreduce_for_tests",
      [](const std::shared_ptr<Communicator>& comm, py::array_t<float, py::array::c_style> values,
         const std::string& wire) {
        auto mpi = std::dynamic_pointer_cast<MPICommunicator>(comm);
        if (!mpi) throw std::invalid_argument("[exchange] needs an MPI communicator");
        ngraph::distributed::Wire w = ngraph::distributed::wire_from_string(wire);
        py::array_t<float> out(values.request().shape);
        std::memcpy(out.mutable_data(), values.data(), static_cast<size_t>(values.size()) * sizeof(float));
        ngraph::distributed::CrossNodeExchange exchange(*mpi, mpi->handle());
        {
          py::gil_scoped_release release;
          exchange.allreduce_sum(out.mutable_data(), static_cast<size_t>(out.size()), w, "[exchange] test");
        }
        return py::make_tuple(out, exchange.bytes_sent());
      },
      py::arg("comm"), py::arg("values"), py::arg("wire"));
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
