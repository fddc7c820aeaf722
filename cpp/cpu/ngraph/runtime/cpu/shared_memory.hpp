// An executable's shared-memory regions (one per communicator whose fused allreduce buffers
// the plan placed in shared memory, see pass/shared_memory_placement.cpp), and the protocol
// by which the ranks of a node decide, per call, whether it runs its sharded updates
// (sharded_update.hpp). The kernels see a region only through its RegionBinding.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ngraph/distributed/node_memory.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

class NodeSharing {
 public:
  explicit NodeSharing(const ExecutionPlan& plan);
  ~NodeSharing();
  NodeSharing(const NodeSharing&) = delete;
  NodeSharing& operator=(const NodeSharing&) = delete;

  // In the first call whose collectives were checked (collective over every communicator
  // planned here): makes the regions and binds them for the kernels. Later calls: nothing.
  void set_up();
  // After a failure part-way through a call (a rank out of step with the others' arrivals):
  // gives the regions up for good; the variables keep their values, privately.
  void drop();

  // Per call whose collectives were checked, collective over each node: whether this call
  // runs the sharded updates (every rank's variables are still the node's shared ones, or
  // were compared equal and shared now), never while the numerics check is on.
  bool decide(bool checking, const std::string& where);
  // Every call, after deciding: the variables it writes (`updated`) that a sharded update
  // keeps once per node (this executable's, in a call that does not run it sharded, or
  // another's) get private copies first.
  void keep_private(const std::vector<std::shared_ptr<VariableState>>& updated, bool sharded) const {
    for (const auto& state : updated)
      if (state->is_shared() && !(sharded && node_shared_here(state.get()))) state->unshare();
  }
  // After a sharded call: every rank's pieces are written (across nodes: first gathered from
  // the other nodes into the node's common memory) before any rank reads the variables again
  // (the next call's forward, another executable, get_value) or writes its gradients over
  // what the others still sum.
  void arrive_after_update(const std::string& where);

  // Whether `state` is one of this executable's optimizer state variables and lives in its
  // region now (its shares, when scattered, are this executable's to gather).
  bool holds_shares_of(const VariableState* state) const;

  size_t bytes() const;                 // per rank, planned
  size_t node_shared_variables() const;  // planned
  // Bytes of the node-shared variables (weights and optimizer state) this rank updates in a
  // sharded call: its piece of them on one node, its share across nodes (0 before the regions
  // are made, or with none).
  size_t sharded_update_bytes() const;
  std::vector<std::string> describe() const;  // one line per region in use
  // The bytes of optimizer state (the sharded updates' variables no other step reads) this rank
  // holds in memory, measured: its private copies of them, and the resident bytes of its piece
  // of their planes in the node's common memory (SharedRegion::resident_common). Across nodes,
  // once the shares are scattered, about 1/N of the state; 0 before the regions are made.
  size_t optimizer_state_bytes() const;

 private:
  struct Region {
    std::shared_ptr<distributed::Communicator> comm;
    size_t bytes = 0;
    std::shared_ptr<RegionBinding> binding;  // shared with the kernels
    std::shared_ptr<distributed::SharedRegion> region;
    // A sharded update's variables and their offsets in the region's common memory.
    std::vector<std::pair<VariableState*, size_t>> node_shared;
    size_t common = 0;
    std::vector<ShardedUpdate> updates;  // the sharded updates on this region (their layouts)
    uint64_t compared_versions = ~uint64_t{0};  // the variables' versions when last compared
    // Across nodes: the optimizer state's variables (in the state planes), and whether their
    // shares are scattered (each node's common memory current only in its own shares; the
    // same on every rank: every rank runs the same calls).
    std::vector<std::pair<VariableState*, size_t>> state;
    bool scattered = false;
  };
  bool decide_one(Region& r, bool checking, const std::string& where);
  bool share_values(Region& r, const std::string& where);  // collective: true when every rank's values matched
  static bool shared_in(const Region& r, const VariableState& state, size_t offset);
  static bool across_nodes(const Region& r);  // every sharded update on r can run across nodes
  static void unshare_from(Region& r);
  // After a sharded call across nodes: the optimizer state left in shares (see the .cpp).
  void scatter_state(Region& r, size_t index, const std::string& where);
  // Collective over every rank of every node of region r, only while its optimizer state is
  // scattered: the shares are gathered into every node's common memory, so the values are
  // whole again (for a read, a checkpoint, another computation, or a call that goes
  // unsharded). A variable calls it through VariableState::gather.
  void gather(Region& r, const std::string& where);
  static void lose_state(Region& r, const std::string& why);
  bool node_shared_here(const VariableState* state) const;

  std::vector<Region> m_regions;
  bool m_set_up = false;
  bool m_sharded = false;  // this call runs the sharded updates
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
