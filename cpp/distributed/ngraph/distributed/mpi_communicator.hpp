// The MPI implementation of Communicator (Open MPI). It wraps an existing MPI_Comm (always
// duplicated, so ngraph's traffic never mixes with the user's) or the world, initialising
// MPI itself when nobody has (and then finalising it at exit).
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ngraph/distributed/communicator.hpp"

namespace ngraph {
namespace distributed {

class MPICommunicator : public Communicator {
 public:
  // Duplicates `comm` (collective over its ranks). MPI must be initialised.
  explicit MPICommunicator(MPI_Comm comm, const std::string& description = "");
  ~MPICommunicator() override;

  // The world, initialising MPI (MPI_THREAD_SERIALIZED) if it is not yet.
  static std::shared_ptr<MPICommunicator> world();
  // Initialises MPI if nobody has; returns true if this call did.
  static bool ensure_initialized();
  // MPI_Get_library_version of the library this code is linked with.
  static std::string library_version();

  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  std::string name() const override { return m_name; }
  MPI_Comm handle() const { return m_comm; }

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
  void allreduce_guarded(const void* in, void* out, size_t count, element::Type type,
                         ReduceOp op) override;
  // Shared memory for the ranks of each node (POSIX shm, mapped by all of them; see
  // shared_region.cpp). Ranks on several nodes get one region per node, joined by an MPI
  // allreduce between the nodes; this needs the same number of ranks on every node.
  // NGRAPH_SHM=0 turns it off; NGRAPH_SHM_NODE_SIZE=k treats each k consecutive ranks as a
  // node (for testing the multi-node path on one machine).
  std::shared_ptr<SharedRegion> create_shared_region(size_t bytes) override;
  // The between-nodes step of a region's allreduce: in place over `count` elements of `data`,
  // with the ranks that hold this rank's place on the other nodes; blocking, throws
  // DistributedError. Another backend passes its own (oneCCL); empty: MPI's.
  using CrossNodeAllreduce = std::function<void(void* data, size_t count, element::Type type,
                                                ReduceOp op, const std::string& what)>;
  std::shared_ptr<SharedRegion> create_shared_region_with(size_t bytes, CrossNodeAllreduce cross);
  // Those ranks (made, collectively, on first use) and the number of nodes.
  MPI_Comm cross_node_handle(int* nodes);

  // After a failed wait the communicator may hold unfinished operations: every later
  // operation fails at once with the first error.
  bool is_broken() const { return !m_broken.empty(); }
  const std::string& broken_reason() const { return m_broken; }
  void mark_broken(const std::string& why);
  // "<what>: rank R timed out after T s <waiting> (a rank failed, ...)": every timeout says
  // this, with what the rank was waiting for.
  std::string timeout_message(const std::string& what, const std::string& waiting) const;
  // Waits for `req` (an operation on this communicator's ranks) with the timeout; after it,
  // marks the communicator broken and throws DistributedError.
  void wait_request(MPI_Request& req, const std::string& what, MPI_Status* status = MPI_STATUS_IGNORE);

 private:
  void check_usable(const char* op) const;
  MPI_Comm m_comm = MPI_COMM_NULL;
  // The ranks on this rank's node (m_node) and the ranks with this rank's place on the other
  // nodes (m_cross), made at the first create_shared_region.
  struct Topology {
    bool made = false, usable = false;
    MPI_Comm node = MPI_COMM_NULL, cross = MPI_COMM_NULL;
    int local_rank = 0, local_size = 1, nodes = 1;
    std::vector<int> node_ranks;  // ranks (in this communicator) of this node's members
  };
  Topology m_topology;
  void make_topology();
  int m_rank = 0, m_size = 1;
  std::string m_name;
  std::string m_broken;
};

}  // namespace distributed
}  // namespace ngraph
