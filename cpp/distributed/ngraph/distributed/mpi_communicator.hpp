// The MPI implementation of Communicator (Open MPI). It wraps an existing MPI_Comm (always
// duplicated, so ngraph's traffic never mixes with the user's) or the world, initialising
// MPI itself when nobody has (and then finalising it at exit).
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/node_memory.hpp"

namespace ngraph {
namespace distributed {

class CrossNodeExchange;

class MPICommunicator : public Communicator, public NodeMemory {
 public:
  // Duplicates `comm` (collective over its ranks, bounded by the timeout), then checks that
  // the settings that must agree across ranks do (see agree_on_settings). MPI must be
  // initialised.
  explicit MPICommunicator(MPI_Comm comm, const std::string& description = "");
  ~MPICommunicator() override;

  // The world, initialising MPI (MPI_THREAD_MULTIPLE) if it is not yet.
  static std::shared_ptr<MPICommunicator> world();
  // Initialises MPI if nobody has; returns true if this call did.
  static bool ensure_initialized();
  // MPI_Query_thread: the thread level MPI was initialised with.
  static int thread_level();

  // A communicator of its own for one compiled computation (Communicator::duplicate):
  // MPI_Comm_idup of this one (and of its node and cross-node communicators, for shared
  // memory), polled with the deadline; then the settings check on the new one.
  std::shared_ptr<Communicator> duplicate(const std::string& label, uint64_t identity) override;
  std::shared_ptr<void> begin_call(const std::string& where) override;
  // Agreement checks passed on this communicator and on the communicators duplicate() made
  // from it (the computations' own, where their checks run), alive or gone.
  size_t get_all_checks_passed() const override;

  // Every rank's value in effect of every setting that must agree (those of the settings
  // registry marked `agree`: NGRAPH_SHM, the check mode, NGRAPH_CPU_FUSION, ...), gathered
  // with the timeout: DistributedError on every rank naming each setting that differs and
  // which ranks have which value.
  void agree_on_settings(const std::string& where);
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
  // Compressed through a CrossNodeExchange over all the ranks (every piece summed in rank
  // order in f32) unless no network is crossed: the ranks share one node and shared memory is
  // on (then, and for Wire::f32 or what is not an f32 sum or mean, the plain allreduce).
  void allreduce_compressed(const void* in, void* out, size_t count, element::Type type, ReduceOp op,
                            const Compression& c) override;
  // Whether this communicator's ranks are on one node with shared memory on (known once its
  // topology was made: at the first compile, when NGRAPH_SHM is on).
  bool shares_one_node() const;
  // Shared memory for the ranks of each node (POSIX shm, mapped by all of them; see
  // shared_region.cpp). Ranks on several nodes get one region per node, joined by an MPI
  // allreduce between the nodes; this needs the same number of ranks on every node.
  // NGRAPH_SHM=0 turns it off; NGRAPH_SHM_NODE_SIZE=k treats each k consecutive ranks as a
  // node (for testing the multi-node path on one machine).
  std::shared_ptr<SharedRegion> create_shared_region(size_t bytes, size_t common = 0) override;
  // The between-nodes step of a region's allreduce: in place over `count` elements of `data`,
  // with the ranks that hold this rank's place on the other nodes; blocking, throws
  // DistributedError. Another backend passes its own (oneCCL); empty: MPI's.
  using CrossNodeAllreduce = std::function<void(void* data, size_t count, element::Type type,
                                                ReduceOp op, const std::string& what)>;
  std::shared_ptr<SharedRegion> create_shared_region_with(size_t bytes, size_t common, CrossNodeAllreduce cross);
  // Those ranks (made, collectively, on first use) and the number of nodes.
  MPI_Comm cross_node_handle(int* nodes);

  // After a failed wait the communicator may hold unfinished operations: every later
  // operation fails at once with the first error.
  bool is_broken() const;
  std::string broken_reason() const;
  void mark_broken(const std::string& why);
  // "<what>: rank R timed out after T s <waiting>; rank 1 did not answer (stopped, ...);
  // rank 2 is waiting in ... (a rank failed, ...)": every timeout says this, with what the
  // rank was waiting for and what the other ranks answer about themselves within a second
  // (see survey in mpi_communicator.cpp).
  std::string timeout_message(const std::string& what, const std::string& waiting) const;
  // Waits for `req` (an operation on this communicator's ranks) with the timeout; after it,
  // marks the communicator broken and throws DistributedError.
  void wait_request(MPI_Request& req, const std::string& what, MPI_Status* status = MPI_STATUS_IGNORE);

 protected:
  // Polls the check's allreduce with the timeout; once it lasts, asks the other ranks on the
  // side channel which agreement checks they wait in, and throws DistributedError on every
  // rank when they wait in those of different computations (see MismatchWatch in
  // mpi_communicator.cpp). Below MPI_THREAD_MULTIPLE: Communicator's.
  void agreement_allreduce(const int64_t* in, int64_t* out, size_t count, uint64_t call,
                           const std::string& what) override;

 private:
  struct Adopt {};
  // Marks this communicator and those of the computations made beside it (by the same
  // duplicate() parent) with these identities broken.
  void break_computations(const std::set<uint64_t>& identities, const std::string& why);
  // Buffers of agreement checks given up, which MPI may still use.
  std::vector<std::shared_ptr<std::vector<int64_t>>> m_abandoned_checks;
  // Takes `comm` (already duplicated) and the parent's shared state.
  MPICommunicator(Adopt, MPI_Comm comm, const MPICommunicator& parent, const std::string& name);
  void check_usable(const char* op) const;
  // Waits for a request made during set-up; on timeout marks this communicator broken.
  void wait_setup(MPI_Request& req, const std::string& what);
  MPI_Comm m_comm = MPI_COMM_NULL;
  // A duplicate of the communicator this one was made from, shared by its duplicates: the
  // side channel on which ranks ask each other what they are waiting for after a timeout.
  std::shared_ptr<MPI_Comm> m_control;
  std::mutex m_setup_mutex;   // duplicate() and the topology, from several threads
  uint64_t m_duplicates = 0;  // made so far: "computation #n" in names
  uint64_t m_uid = 0;         // unique in this process: part of shared-memory names
  uint64_t m_regions = 0;     // shared regions made on this communicator so far
  // The duplicates made from this one, and the checks passed by those that are gone.
  struct Family {
    std::mutex mutex;
    std::vector<std::weak_ptr<MPICommunicator>> children;
    size_t gone_checks = 0;
  };
  std::shared_ptr<Family> m_family = std::make_shared<Family>();
  std::shared_ptr<Family> m_parent_family;  // a duplicate's parent's
  // The ranks on this rank's node (m_node) and the ranks with this rank's place on the other
  // nodes (m_cross), made at the first create_shared_region.
  struct Topology {
    bool made = false, usable = false;
    MPI_Comm node = MPI_COMM_NULL, cross = MPI_COMM_NULL;
    int local_rank = 0, local_size = 1, nodes = 1;
    std::vector<int> node_ranks;  // ranks (in this communicator) of this node's members
    long creator_pid = 0;         // local rank 0's pid and communicator uid: shared-memory
    uint64_t creator_uid = 0;     // names every rank of the node can compute
  };
  Topology m_topology;
  void make_topology();
  // Gathers local rank 0's pid and uid over the node (for shared-memory names).
  void gather_creator(const std::string& what);
  // The exchange of compressed allreduces over all ranks (made at the first one).
  std::unique_ptr<CrossNodeExchange> m_exchange;
  int m_rank = 0, m_size = 1;
  std::string m_name;
  std::string m_broken;
  mutable std::mutex m_broken_mutex;
};

}  // namespace distributed
}  // namespace ngraph
