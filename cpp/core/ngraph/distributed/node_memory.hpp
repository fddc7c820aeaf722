// Memory that the ranks of one node share: the narrow interface through which a backend's
// executable uses it. It is not part of the communicator interface (communicator.hpp:
// collectives and agreement only). The MPI backend implements it (cpp/distributed:
// shared_region.cpp holds the regions, their topology exchange and arrival protocol), and so
// does the oneCCL one, on the MPI backend's regions; a communicator without it (one process,
// anything else) simply has none, and executables then run every collective on the
// communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ngraph/distributed/communicator.hpp"

namespace ngraph {
namespace distributed {

// Memory that the ranks of a communicator share when they run on one node (and, across
// nodes, one such region per node): every rank owns a slot of the same size that the
// other ranks of its node can read and write. Kernels place data in their slot directly
// (gradients are computed into it), so collectives over it copy nothing in or out.
class SharedRegion {
 public:
  virtual ~SharedRegion() = default;
  // This rank's slot (64-byte aligned) and its size in bytes.
  virtual char* local() const = 0;
  virtual size_t size() const = 0;
  // Allreduce of `count` elements found at byte `in_offset` of every rank's slot into byte
  // `out_offset` of every rank's slot (the same range, in place, or two that do not overlap). Blocking and
  // collective; each rank reduces one piece (piece() below) and writes it into every slot, in
  // rank order, so every rank holds bitwise the same result. Fails with DistributedError after
  // the communicator's timeout; the region is unusable after a failure.
  virtual void allreduce(size_t in_offset, size_t out_offset, size_t count, element::Type type,
                         ReduceOp op) = 0;
  // The same with gradient compression: across several nodes, an f32 sum or mean sends the
  // values of its step between nodes as `c.wire` says (the node's own step stays f32: memory
  // is no wire). On one node, and in this default, the plain allreduce.
  virtual void allreduce_compressed(size_t in_offset, size_t out_offset, size_t count, element::Type type,
                                    ReduceOp op, const Compression& c) {
    (void)c;
    allreduce(in_offset, out_offset, count, type, op);
  }
  // The node's ranks: this one's place among them, how many, and local rank l's slot. On one
  // node (single_node()) they are the communicator's ranks.
  virtual bool single_node() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual const char* slot(int local_rank) const = 0;
  // The nodes: how many, and this rank's (its place among the ranks of its local rank on
  // every node, the cross-node communicator). One node: 1 and 0.
  virtual int nodes() const = 0;
  virtual int node() const = 0;
  // Memory held once per node, not per rank (`common` bytes asked for at creation, 64-byte
  // aligned; null when none was): every rank of the node reads and writes the same bytes.
  virtual char* common() const = 0;
  virtual size_t common_size() const = 0;
  // Every rank of the node arrives (blocking, collective over the node; DistributedError after
  // the communicator's timeout, naming `what`, `when` and the missing ranks; the region is
  // unusable after a failure).
  virtual void arrive(const std::string& what, const char* when) = 0;
  // Every rank of the node offers `n` values (n <= kMaxOver) and gets back each one's maximum
  // over the node's ranks: a decision the ranks take together through the region, bounded by
  // the timeout like an arrival (a rank that stopped using the region is named, not waited for
  // inside MPI).
  static constexpr size_t kMaxOver = 7;
  virtual void max_over_node(int64_t* values, size_t n, const std::string& what) = 0;
  // The same over every rank of every node: the node's maximum, then the maximum over the
  // nodes (between them over the communicator, bounded by its timeout). One node: the above.
  virtual void max_over_all(int64_t* values, size_t n, const std::string& what) = 0;

  // A sharded update across nodes (f32 sums only). reduce_scatter: the node's ranks arrive,
  // local rank l sums piece l of `count` floats at byte `offset` of every slot into its own
  // slot (in rank order), then the ranks l of all nodes sum those (in node order), leaving in
  // this rank's slot its share (share() below) of the result, scaled by 1/ranks for a mean: the
  // same bits the allreduce writes there. The rest of piece l of the slot is left unspecified.
  // allgather_common: each rank's share of `count` floats at byte `offset` of the common
  // memory is copied to the same place on every other node (among the ranks l), so every
  // node's common memory holds the whole range once its ranks have arrived.
  virtual void reduce_scatter(size_t offset, size_t count, ReduceOp op, const std::string& what) = 0;
  // The same with gradient compression (`c.wire` 16-bit; f32: the above): the step between
  // nodes sends each contribution rounded to the wire (the reduce-scatter of the compressed
  // allreduce), and the owner rounds its share of the sums to the wire and back before the
  // mean's scaling, as the compressed allreduce's allgather would deliver it: the same bits
  // the compressed allreduce writes there. With error feedback `c.residual` is laid out as
  // the compressed allreduce's for the same `count` (its sizes and contents are exchangeable).
  // On one node, and in this default, the plain reduce_scatter.
  virtual void reduce_scatter_compressed(size_t offset, size_t count, ReduceOp op, const Compression& c,
                                         const std::string& what) {
    (void)c;
    reduce_scatter(offset, count, op, what);
  }
  virtual void allgather_common(size_t offset, size_t count, const std::string& what) = 0;
  // Of the common memory: discard_common gives the whole pages inside `bytes` at byte `offset`
  // back to the system (a range this node no longer needs; reading it afterwards reads zeros,
  // writing it allocates pages again); resident_common measures how many bytes of a range the
  // system holds in memory (its resident pages' bytes inside the range). By default nothing is
  // given back and every byte counts.
  virtual void discard_common(size_t offset, size_t bytes) {
    (void)offset;
    (void)bytes;
  }
  virtual size_t resident_common(size_t offset, size_t bytes) const {
    (void)offset;
    return bytes;
  }
  // "2 ranks on 1 node, 3.8 MB per rank" (for logs and tests).
  virtual std::string describe() const = 0;

  // The elements [lo, hi) of `count` that local rank l of `size` reduces or updates: on
  // 64-byte boundaries (for elements of `element_size` bytes), so no two ranks write one
  // cache line. The region's allreduce and a sharded update split buffers alike.
  struct Piece {
    size_t lo, hi;
  };
  static Piece piece(size_t count, size_t element_size, int l, int size) {
    size_t align = element_size >= 64 ? 1 : 64 / element_size;
    auto bound = [&](int q) {
      return q >= size ? count : count * static_cast<size_t>(q) / static_cast<size_t>(size) / align * align;
    };
    return {bound(l), bound(l + 1)};
  }
  // The elements of `count` that the rank at (node, local rank l) owns in a sharded update
  // across nodes: piece l (of the node's ranks), split again among the nodes by the same rule.
  static Piece share(size_t count, size_t element_size, int l, int size, int node, int nodes) {
    Piece p = piece(count, element_size, l, size);
    Piece q = piece(p.hi - p.lo, element_size, node, nodes);
    return {p.lo + q.lo, p.lo + q.hi};
  }
};

// A communicator whose ranks can share memory on their node.
class NodeMemory {
 public:
  virtual ~NodeMemory() = default;
  // Collective over all ranks: a SharedRegion with `bytes` per rank and `common` bytes per
  // node (SharedRegion::common), or nullptr on every rank when shared memory cannot serve
  // this communicator (one rank, nodes with different numbers of ranks, no room in /dev/shm,
  // ranks asking for different sizes, or NGRAPH_SHM=0). Call it only where every rank is
  // known to call it (an executable does so inside a call whose collectives were checked).
  virtual std::shared_ptr<SharedRegion> create_shared_region(size_t bytes, size_t common = 0) = 0;
};

// `comm`'s NodeMemory, or nullptr when it has none.
inline NodeMemory* node_memory(Communicator& comm) { return dynamic_cast<NodeMemory*>(&comm); }

}  // namespace distributed
}  // namespace ngraph
