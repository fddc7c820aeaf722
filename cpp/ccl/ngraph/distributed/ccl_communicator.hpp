// The oneCCL implementation of Communicator (oneCCL 2021.15, the successor of Intel MLSL).
// It is made over an MPICommunicator (an mpi4py communicator, a split of one, or the world):
// the ranks exchange oneCCL's key-value-store address over MPI, so the job is launched with
// the same `mpirun -np N`. What runs where:
//   - oneCCL: allreduce (sum, mean, max, min, prod), broadcast, allgather, reduce_scatter,
//     the blocking allreduce kernels use once ranks agree (allreduce_guarded), the agreement
//     check of executables, and the between-nodes part of the shared-memory allreduce.
//   - MPI (the communicator it was made over): send/recv (oneCCL's have no tags and cannot
//     tell a message of another size) and the node topology and shared memory of
//     create_shared_region (same regions as the MPI backend; only the cross-node step
//     differs).
// Built only with -DNGRAPH_DISTRIBUTED="mpi;ccl" (target ngraph_ccl).
#pragma once

#include <memory>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"

namespace ngraph {
namespace distributed {

class CCLCommunicator : public Communicator, public NodeMemory {
 public:
  // Collective over `mpi`'s ranks. Initialises oneCCL on first use (setting CCL_ATL_TRANSPORT,
  // FI_PROVIDER, CCL_LOCAL_RANK and CCL_LOCAL_SIZE where they are unset; see
  // docs/distributed.md), then makes a oneCCL communicator of the same ranks in the same
  // order. Every wait is bounded by mpi's timeout; a rank where oneCCL fails to start raises
  // DistributedError with oneCCL's message, the others time out naming the step.
  explicit CCLCommunicator(std::shared_ptr<MPICommunicator> mpi);
  ~CCLCommunicator() override;

  // "oneCCL 2021.15.2 (...)": the version of the library loaded.
  static std::string library_version();

  int rank() const override { return m_mpi->rank(); }
  int size() const override { return m_mpi->size(); }
  std::string name() const override { return m_name; }
  const std::shared_ptr<MPICommunicator>& mpi() const { return m_mpi; }

  std::unique_ptr<Request> start_allreduce(const void* in, void* out, size_t count,
                                           element::Type type, ReduceOp op) override;
  std::unique_ptr<Request> start_broadcast(void* buffer, size_t count, element::Type type,
                                           int root) override;
  std::unique_ptr<Request> start_allgather(const void* in, void* out, size_t count,
                                           element::Type type) override;
  std::unique_ptr<Request> start_reduce_scatter(const void* in, void* out, size_t count,
                                                element::Type type, ReduceOp op) override;
  std::unique_ptr<Request> start_send(const void* buffer, size_t count, element::Type type,
                                      int dest, int tag) override;
  std::unique_ptr<Request> start_recv(void* buffer, size_t count, element::Type type, int source,
                                      int tag) override;
  // oneCCL's allreduce on the caller's buffers, polled; past the timeout it ends the job
  // (MPI_Abort, after printing the op and the rank), like the MPI backend's watchdog.
  void allreduce_guarded(const void* in, void* out, size_t count, element::Type type,
                         ReduceOp op) override;
  // The MPI communicator's shared memory, with the between-nodes step on oneCCL.
  std::shared_ptr<SharedRegion> create_shared_region(size_t bytes, size_t common = 0) override;

  // Throws DistributedError naming `op` once the communicator is broken.
  void check_usable(const char* op) const;
  bool is_broken() const { return !m_broken.empty(); }
  void mark_broken(const std::string& why);
  // As MPICommunicator::timeout_message, naming the backend.
  std::string timeout_message(const std::string& what, const std::string& waiting) const;

  struct Impl;  // the oneCCL objects (ccl_communicator.cpp)

 private:
  std::shared_ptr<MPICommunicator> m_mpi;
  std::unique_ptr<Impl> m_impl;
  std::shared_ptr<CCLCommunicator> m_cross;  // between nodes, made with the first region
  std::string m_name;
  std::string m_broken;
};

}  // namespace distributed
}  // namespace ngraph
