// Zero-copy allreduce in shared memory for the ranks of one node.
//
// Every rank of a node maps one POSIX shared-memory object: a header of arrival counters (and
// mailboxes for decisions the ranks take together), then one slot per rank, then memory held
// once per node (common, for a sharded update's variables). An executable plans its fused
// gradient buffers into its rank's slot, so backward writes the gradients there directly.
// The allreduce is then two arrivals and one pass over memory: after every rank has arrived,
// local rank l reduces piece l of the buffer over all slots (in rank order) and writes the result into piece l of every slot's output;
// after the second arrival every rank holds the whole result in its own slot. With 2 ranks
// that is 1.5x the buffer read and 1x written per rank, against a copy in, a copy out and a
// reduction for MPI's shared-memory transport. In place (output range = input range; the
// executable plans it so when nothing reads the inputs afterwards) every line written was
// just read, so no line is fetched only to be overwritten: 1x read and 1x written per rank,
// and half the region. Piece l of every slot is touched by local rank l alone between the
// arrivals, so in place is as safe as apart.
//
// Why two arrivals suffice between calls: a rank writes its inputs for call k+1 only after
// passing the second arrival of call k, when nobody reads call k's inputs any more; and
// others write a rank's outputs for call k+1 only after the first arrival of call k+1, when
// that rank has finished reading call k's outputs.
//
// A sharded update (see the CPU executable) uses the same slots without the allreduce's pass:
// after the first arrival each rank sums its piece of every slot inside the update kernels,
// and an arrival after the update replaces the second.
//
// Several nodes: local rank l's reduced piece is then allreduced with local rank l of every
// other node before it is written into the node's slots: a two-level allreduce with the same
// bytes across the network as one flat ring would carry per rank, divided by the ranks per
// node. Float sums go through the deterministic CrossNodeExchange (cross_node.hpp: each
// element added in node order), so a sharded update across nodes, which reduce-scatters the
// same pieces with it, sums the same bits; compressed, it sends the same 16-bit values and
// rounds its share as the compressed allreduce's allgather would (reduce_scatter_compressed).
// One rank per node is a node of one slot (no arrivals); the region then serves only to give
// the two paths the same sums.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <type_traits>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "ngraph/distributed/cross_node.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/distributed/mpi_detail.hpp"
#include "ngraph/distributed/testing.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace distributed {

namespace {

constexpr size_t kLine = 64;    // a counter per cache line
constexpr size_t kPage = 4096;  // slots start on pages
constexpr size_t kBlock = 4096;  // elements reduced and then copied out while in cache

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

template <typename T>
struct Sum {
  T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct Prod {
  T operator()(T a, T b) const { return a * b; }
};
template <typename T>
struct Max {
  T operator()(T a, T b) const { return b > a ? b : a; }
};
template <typename T>
struct Min {
  T operator()(T a, T b) const { return b < a ? b : a; }
};

// dst[i] = f(a[i], b[i]); dst may be a.
template <typename T, typename F>
void combine(T* dst, const T* a, const T* __restrict b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T>
void scale_by(T* p, size_t n, double factor) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] * factor);
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// The whole pages inside [p, p + bytes).
std::pair<char*, char*> whole_pages(char* p, size_t bytes) {
  const uintptr_t page = page_size(), lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
  return {p + (a - lo), a < b ? p + (b - lo) : p + (a - lo)};
}

class MPISharedRegion : public SharedRegion {
 public:
  MPISharedRegion(MPICommunicator& comm, char* base, size_t mapped, size_t header, size_t slot,
                  size_t bytes, size_t common, int local_rank, int local_size, int nodes, MPI_Comm cross,
                  std::vector<int> node_ranks, MPICommunicator::CrossNodeAllreduce cross_allreduce)
      : m_comm(comm), m_base(base), m_mapped(mapped), m_header(header), m_slot(slot),
        m_bytes(bytes), m_common(common), m_local_rank(local_rank), m_local_size(local_size), m_nodes(nodes),
        m_cross(cross), m_node_ranks(std::move(node_ranks)),
        m_cross_allreduce(std::move(cross_allreduce)) {
    if (m_nodes > 1) {
      m_exchange = std::make_unique<CrossNodeExchange>(m_comm, m_cross);
      m_node = m_exchange->rank();
    }
  }
  ~MPISharedRegion() override {
    munmap(m_base, m_mapped);
    if (!m_broken.empty()) (void)m_exchange.release();  // MPI may still write into its buffers
  }

  char* local() const override { return slot_at(m_local_rank); }
  size_t size() const override { return m_bytes; }
  bool single_node() const override { return m_nodes == 1; }
  int nodes() const override { return m_nodes; }
  int node() const override { return m_node; }
  int local_rank() const override { return m_local_rank; }
  int local_size() const override { return m_local_size; }
  const char* slot(int l) const override {
    if (l < 0 || l >= m_local_size)
      throw std::out_of_range("[SharedRegion] local rank " + std::to_string(l) + " of " +
                              std::to_string(m_local_size));
    return slot_at(l);
  }
  char* common() const override { return m_common ? slot_at(m_local_size) : nullptr; }
  size_t common_size() const override { return m_common; }
  void arrive(const std::string& what, const char* when) override {
    usable(what);
    arrive_all(what, when);
  }
  void max_over_node(int64_t* values, size_t n, const std::string& what) override {
    usable(what);
    if (n > kMaxOver) throw std::invalid_argument(what + ": at most " + std::to_string(kMaxOver) + " values");
    // Two mailboxes per rank, used in turn: a rank writes one only after every rank passed the
    // arrival of the exchange before, by which time all have read it.
    size_t box = static_cast<size_t>(m_exchanges++ % 2);
    std::memcpy(mailbox(m_local_rank, box), values, n * sizeof(int64_t));
    arrive_all(what, "exchanging decisions");
    for (int l = 0; l < m_local_size; ++l) {
      if (l == m_local_rank) continue;
      const int64_t* theirs = mailbox(l, box);
      for (size_t i = 0; i < n; ++i) values[i] = std::max(values[i], theirs[i]);
    }
  }

  void max_over_all(int64_t* values, size_t n, const std::string& what) override {
    max_over_node(values, n, what);
    if (m_nodes == 1) return;
    MPI_Request req;
    detail::check(
        MPI_Iallreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_INT64_T, MPI_MAX, m_cross, &req),
        what);
    guarded([&] { m_comm.wait_request(req, what + " between nodes"); });
  }

  void reduce_scatter(size_t offset, size_t count, ReduceOp op, const std::string& what) override {
    run_reduce_scatter(offset, count, op, Compression{}, what);
  }
  void reduce_scatter_compressed(size_t offset, size_t count, ReduceOp op, const Compression& c,
                                 const std::string& what) override {
    run_reduce_scatter(offset, count, op, c,
                       c.wire == Wire::f32 || m_nodes == 1
                           ? what
                           : what + ", sent as " + std::string(to_string(c.wire)));
  }

  // Compressed (a 16-bit c.wire, several nodes): the piece's step between nodes is the
  // compressed allreduce's reduce-scatter (cross_compressed), and the owner's share is rounded
  // as its allgather would deliver it, with the residuals in the same layout.
  void run_reduce_scatter(size_t offset, size_t count, ReduceOp op, const Compression& c, const std::string& what) {
    usable(what);
    check_range(offset, count * sizeof(float), m_bytes, what);
    arrive_all(what, "before reducing");  // every rank's inputs are written
    auto [lo, hi] = piece(count, sizeof(float), m_local_rank, m_local_size);
    float* mine = reinterpret_cast<float*>(slot_at(m_local_rank) + offset);
    for (size_t b = lo; b < hi; b += kBlock)
      reduce_block<float>(offset, offset, b, std::min(kBlock, hi - b), Sum<float>());
    if (m_nodes > 1) {
      testing::at(testing::Point::sharded_update_reduce_scatter);  // a test: this rank lost here
      guarded([&] {
        float* residual = residual_for(hi - lo, c);
        m_exchange->reduce_scatter_sum(mine + lo, hi - lo, c.wire, what + " between nodes", residual);
        m_exchange->round_own_piece(mine + lo, hi - lo, c.wire, residual ? residual + (hi - lo) : nullptr);
      });
    }
    if (op == ReduceOp::mean) {
      Piece mine_share = share(count, sizeof(float), m_local_rank, m_local_size, m_node, m_nodes);
      scale_by(mine + mine_share.lo, mine_share.hi - mine_share.lo, 1.0 / (m_local_size * m_nodes));
    }
  }

  void allgather_common(size_t offset, size_t count, const std::string& what) override {
    usable(what);
    check_range(offset, count * sizeof(float), m_common, what);
    if (m_nodes == 1) return;  // one node: every share is in the common memory already
    auto [lo, hi] = piece(count, sizeof(float), m_local_rank, m_local_size);
    float* data = reinterpret_cast<float*>(common() + offset);
    guarded([&] { m_exchange->allgather(data + lo, hi - lo, Wire::f32, what + " between nodes"); });
  }

  void discard_common(size_t offset, size_t bytes) override {
    check_range(offset, bytes, m_common, "[SharedRegion] discard");
    auto [lo, hi] = whole_pages(common() + offset, bytes);
    if (lo < hi) (void)madvise(lo, static_cast<size_t>(hi - lo), MADV_REMOVE);  // best effort
  }
  size_t resident_common(size_t offset, size_t bytes) const override {
    check_range(offset, bytes, m_common, "[SharedRegion] resident");
    if (!bytes) return 0;
    const size_t page = page_size();
    char* begin = common() + offset;
    char* first = begin - reinterpret_cast<uintptr_t>(begin) % page;
    size_t pages = (static_cast<size_t>(begin + bytes - first) + page - 1) / page;
    std::vector<unsigned char> in(pages);
    if (mincore(first, pages * page, in.data()) != 0) return bytes;
    size_t n = 0;
    for (size_t i = 0; i < pages; ++i)
      if (in[i] & 1) {
        char* lo = std::max(first + i * page, begin);
        char* hi = std::min(first + (i + 1) * page, begin + bytes);
        n += static_cast<size_t>(hi - lo);
      }
    return n;
  }

  std::string describe() const override {
    std::ostringstream os;
    os << m_local_size * m_nodes << " ranks on " << m_nodes << (m_nodes == 1 ? " node" : " nodes")
       << " (" << m_local_size << " per node), " << m_bytes << " bytes per rank";
    if (m_common) os << " and " << m_common << " per node";
    return os.str();
  }

  void allreduce(size_t in_offset, size_t out_offset, size_t count, element::Type type,
                 ReduceOp op) override {
    run_allreduce(in_offset, out_offset, count, type, op, nullptr);
  }
  void allreduce_compressed(size_t in_offset, size_t out_offset, size_t count, element::Type type, ReduceOp op,
                            const Compression& c) override {
    run_allreduce(in_offset, out_offset, count, type, op, m_nodes > 1 && c.wire != Wire::f32 ? &c : nullptr);
  }

 private:
  // `compression` (null: none) applies to the step between nodes of an f32 sum or mean.
  void run_allreduce(size_t in_offset, size_t out_offset, size_t count, element::Type type, ReduceOp op,
                     const Compression* compression) {
    size_t es = type.size();
    std::string what = std::string("[AllReduce] ") + std::to_string(count) + " x " + type.get_type_name() +
                       " " + to_string(op) + " in shared memory";
    usable(what);
    if (in_offset + count * es > m_bytes || out_offset + count * es > m_bytes ||
        (in_offset != out_offset && in_offset < out_offset + count * es &&
         out_offset < in_offset + count * es))
      throw std::invalid_argument(what + ": ranges [" + std::to_string(in_offset) + ", +" +
                                  std::to_string(count * es) + ") and [" + std::to_string(out_offset) +
                                  ", +...) must be the same or lie apart inside the " +
                                  std::to_string(m_bytes) + "-byte slot");
    if (op == ReduceOp::mean && !type.is_real())
      throw std::invalid_argument(what + ": mean needs a floating-point type");
    arrive_all(what, "before reducing");  // every rank's inputs are written
    // This rank's piece, on 64-byte boundaries so no two ranks write one cache line.
    auto [lo, hi] = piece(count, es, m_local_rank, m_local_size);
    if (compression) what += ", sent as " + std::string(to_string(compression->wire));
    switch (type.get_type_enum()) {
      case element::Type_t::f32: reduce<float>(in_offset, out_offset, lo, hi, op, what, compression); break;
      case element::Type_t::f64: reduce<double>(in_offset, out_offset, lo, hi, op, what); break;
      case element::Type_t::i32: reduce<int32_t>(in_offset, out_offset, lo, hi, op, what); break;
      case element::Type_t::i64: reduce<int64_t>(in_offset, out_offset, lo, hi, op, what); break;
      default:
        throw std::invalid_argument(what + ": element type " + type.get_type_name() +
                                    " is not supported by collectives (f32, f64, i32, i64)");
    }
    arrive_all(what, "after reducing");  // every piece is in every slot
  }

  // Local rank l's slot; l == m_local_size: the common memory after the slots.
  char* slot_at(int l) const { return m_base + m_header + m_slot * static_cast<size_t>(l); }
  void usable(const std::string& what) const {
    if (!m_broken.empty())
      throw DistributedError(what + ": rank " + std::to_string(m_comm.rank()) +
                             ": the shared-memory region is unusable after an earlier failure: " + m_broken);
  }
  // Local rank l's mailbox `box` (0 or 1) for max_over_node: a cache line after the counters.
  int64_t* mailbox(int l, size_t box) const {
    return reinterpret_cast<int64_t*>(m_base + kLine * (static_cast<size_t>(m_local_size) * (1 + box) +
                                                        static_cast<size_t>(l)));
  }
  std::atomic<uint64_t>& counter(int l) const {
    return *reinterpret_cast<std::atomic<uint64_t>*>(m_base + kLine * static_cast<size_t>(l));
  }

  void arrive_all(const std::string& what, const char* when) {
    ++m_epoch;
    counter(m_local_rank).store(m_epoch, std::memory_order_release);
    for (int l = 0; l < m_local_size; ++l) {
      if (l == m_local_rank) continue;
      if (detail::poll_until(m_comm.get_timeout(),
                             [&] { return counter(l).load(std::memory_order_acquire) >= m_epoch; },
                             detail::Backoff::spin()))
        continue;
      std::string missing;
      for (int q = 0; q < m_local_size; ++q)
        if (q != m_local_rank && counter(q).load(std::memory_order_acquire) < m_epoch)
          missing += (missing.empty() ? "" : ", ") + std::to_string(m_node_ranks[static_cast<size_t>(q)]);
      m_broken = m_comm.timeout_message(
          what, std::string(when) + ", waiting for rank(s) " + missing + " of " + m_comm.name());
      throw DistributedError(m_broken);
    }
  }

  // Elements [b, b + n) of the slots' inputs at in_offset reduced, in rank order, into this
  // rank's slot at out_offset. In place, a block is reduced into scratch first: the output
  // aliases every input.
  template <typename T, typename F>
  void reduce_block(size_t in_offset, size_t out_offset, size_t b, size_t n, F f) {
    auto in = [&](int l) { return reinterpret_cast<const T*>(slot_at(l) + in_offset); };
    T* mine = reinterpret_cast<T*>(slot_at(m_local_rank) + out_offset);
    const bool in_place = in_offset == out_offset;
    if (m_local_size == 1) {  // one rank on the node: its own values
      if (!in_place) std::memcpy(mine + b, in(0) + b, n * sizeof(T));
      return;
    }
    T* dst = in_place ? reinterpret_cast<T*>(m_scratch.get()) : mine + b;
    combine(dst, in(0) + b, in(1) + b, n, f);
    for (int l = 2; l < m_local_size; ++l) combine(dst, dst, in(l) + b, n, f);
    if (in_place) std::memcpy(mine + b, dst, n * sizeof(T));
  }
  // Runs a step between nodes; a failure there leaves the region unusable.
  template <typename F>
  void guarded(F step) {
    try {
      step();
    } catch (const DistributedError& e) {
      m_broken = e.what();
      throw;
    }
  }
  static void check_range(size_t offset, size_t bytes, size_t limit, const std::string& what) {
    if (offset + bytes > limit)
      throw std::invalid_argument(what + ": bytes [" + std::to_string(offset) + ", +" +
                                  std::to_string(bytes) + ") lie outside the region's " +
                                  std::to_string(limit) + " bytes");
  }

  template <typename T>
  void reduce(size_t in_offset, size_t out_offset, size_t lo, size_t hi, ReduceOp op,
              const std::string& what, const Compression* compression = nullptr) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean: reduce_with<T>(in_offset, out_offset, lo, hi, op, Sum<T>(), what, compression); break;
      case ReduceOp::prod: reduce_with<T>(in_offset, out_offset, lo, hi, op, Prod<T>(), what); break;
      case ReduceOp::max: reduce_with<T>(in_offset, out_offset, lo, hi, op, Max<T>(), what); break;
      case ReduceOp::min: reduce_with<T>(in_offset, out_offset, lo, hi, op, Min<T>(), what); break;
    }
  }

  // The step between nodes of a compressed f32 sum: this rank's reduced piece [lo, hi) of its
  // slot with the same piece on the other nodes, through the exchange (pieces summed in rank
  // order, so every node's copy has the same bits).
  void cross_compressed(float* piece, size_t n, const Compression& c, const std::string& what) {
    if (!m_exchange) m_exchange = std::make_unique<CrossNodeExchange>(m_comm, m_cross);
    float* residual = residual_for(n, c);
    try {
      m_exchange->allreduce_sum(piece, n, c.wire, what + " between nodes", residual);
    } catch (const DistributedError& e) {
      m_broken = e.what();
      throw;
    }
  }

  // The carried rounding errors of a compressed step between nodes over a piece of n floats
  // (null without error feedback or compression): the exchange's residual_count(n), zero on
  // first use. The compressed allreduce and the compressed reduce-scatter share this layout:
  // the piece's contributions, then the owner's rounding of its part.
  float* residual_for(size_t n, const Compression& c) {
    if (!c.residual || c.wire == Wire::f32) return nullptr;
    size_t need = m_exchange->residual_count(n);
    if (c.residual->size() != need) c.residual->assign(need, 0.0f);
    return c.residual->data();
  }

  template <typename T, typename F>
  void reduce_with(size_t in_offset, size_t out_offset, size_t lo, size_t hi, ReduceOp op, F f,
                   const std::string& what, const Compression* compression = nullptr) {
    auto out = [&](int l) { return reinterpret_cast<T*>(slot_at(l) + out_offset); };
    T* mine = out(m_local_rank);
    double factor = op == ReduceOp::mean ? 1.0 / (m_local_size * m_nodes) : 1.0;
    auto reduce_block = [&](size_t b, size_t n) { this->reduce_block<T>(in_offset, out_offset, b, n, f); };
    auto publish_block = [&](size_t b, size_t n) {
      if (factor != 1.0) scale_by(mine + b, n, factor);
      for (int l = 0; l < m_local_size; ++l)
        if (l != m_local_rank) std::memcpy(out(l) + b, mine + b, n * sizeof(T));
    };
    if (m_nodes == 1) {  // reduce and copy out block by block, while the block is in cache
      for (size_t b = lo; b < hi; b += kBlock) {
        size_t n = std::min(kBlock, hi - b);
        reduce_block(b, n);
        publish_block(b, n);
      }
      return;
    }
    for (size_t b = lo; b < hi; b += kBlock) reduce_block(b, std::min(kBlock, hi - b));
    if constexpr (std::is_same_v<T, float>) {
      if (compression) {
        cross_compressed(mine + lo, hi - lo, *compression, what);
        for (size_t b = lo; b < hi; b += kBlock) publish_block(b, std::min(kBlock, hi - b));
        return;
      }
    }
    if (m_exchange && !m_cross_allreduce && std::is_same<T, float>::value &&
        (op == ReduceOp::sum || op == ReduceOp::mean)) {  // deterministic: as a sharded update sums
      guarded([&] {
        m_exchange->allreduce_sum(reinterpret_cast<float*>(mine + lo), hi - lo, Wire::f32,
                                  what + " between nodes");
      });
      for (size_t b = lo; b < hi; b += kBlock) publish_block(b, std::min(kBlock, hi - b));
      return;
    }
    if (m_cross_allreduce) {  // another backend's (oneCCL)
      try {
        m_cross_allreduce(mine + lo, hi - lo, element::from<T>(), op == ReduceOp::mean ? ReduceOp::sum : op,
                          what + " between nodes");
      } catch (const DistributedError& e) {
        m_broken = e.what();
        throw;
      }
      for (size_t b = lo; b < hi; b += kBlock) publish_block(b, std::min(kBlock, hi - b));
      return;
    }
    if (hi - lo > static_cast<size_t>(INT_MAX))
      throw std::invalid_argument(what + ": a piece of " + std::to_string(hi - lo) +
                                  " elements exceeds MPI's count limit");
    // The same piece on every other node: local rank l of each node holds piece l.
    MPI_Request req;
    detail::check(MPI_Iallreduce(MPI_IN_PLACE, mine + lo, static_cast<int>(hi - lo),
                                 detail::mpi_type(element::from<T>(), "AllReduce"), detail::mpi_op(op),
                                 m_cross, &req),
                  what);
    try {
      m_comm.wait_request(req, what + " between nodes");
    } catch (const DistributedError& e) {
      m_broken = e.what();
      throw;
    }
    for (size_t b = lo; b < hi; b += kBlock) publish_block(b, std::min(kBlock, hi - b));
  }

  MPICommunicator& m_comm;
  char* m_base;
  size_t m_mapped, m_header, m_slot, m_bytes, m_common;
  int m_local_rank, m_local_size, m_nodes;
  MPI_Comm m_cross;
  std::vector<int> m_node_ranks;
  MPICommunicator::CrossNodeAllreduce m_cross_allreduce;
  std::unique_ptr<CrossNodeExchange> m_exchange;  // several nodes: the network step
  int m_node = 0;                                 // this rank's place in m_cross
  uint64_t m_epoch = 0;
  uint64_t m_exchanges = 0;
  std::string m_broken;
  // One block of the widest type, for reductions in place (allocated once, not per call).
  std::unique_ptr<unsigned char[]> m_scratch{new unsigned char[kBlock * sizeof(double)]};
};

}  // namespace

void MPICommunicator::make_topology() {
  if (m_topology.made) return;
  const std::string what = "[SharedRegion] node topology of " + m_name;
  // MPI_Comm_split(_type) block until every rank calls them: a barrier polled with the
  // deadline first, so a rank that never comes is an error here, not a hang inside MPI. A
  // rank stopped or lost between the barrier and a split is caught by the watchdog, which
  // ends the job with the message (no MPI call can be interrupted).
  testing::at(testing::Point::topology_barrier);  // a test: this rank arrives late
  MPI_Request req;
  detail::check(MPI_Ibarrier(m_comm, &req), what);
  wait_request(req, what + " (every rank arriving)");
  int node_size = static_cast<int>(settings::integer("NGRAPH_SHM_NODE_SIZE"));
  testing::at(testing::Point::topology_split);  // a test: this rank stops before the split
  {
    detail::BlockingGuard guard(get_timeout(), what,
                                node_size > 0 ? "in a blocking MPI_Comm_split" : "in a blocking MPI_Comm_split_type",
                                this);
    if (node_size > 0)
      detail::check(MPI_Comm_split(m_comm, m_rank / node_size, m_rank, &m_topology.node), what);
    else
      detail::check(
          MPI_Comm_split_type(m_comm, MPI_COMM_TYPE_SHARED, m_rank, MPI_INFO_NULL, &m_topology.node), what);
  }
  MPI_Comm_set_errhandler(m_topology.node, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m_topology.node, &m_topology.local_rank);
  MPI_Comm_size(m_topology.node, &m_topology.local_size);
  m_topology.node_ranks.resize(static_cast<size_t>(m_topology.local_size));
  detail::check(MPI_Iallgather(&m_rank, 1, MPI_INT, m_topology.node_ranks.data(), 1, MPI_INT,
                               m_topology.node, &req),
                what);
  wait_request(req, what);
  // Every node must have as many ranks: {min, -max} of the node sizes.
  int sizes[2] = {m_topology.local_size, -m_topology.local_size}, agreed[2] = {0, 0};
  detail::check(MPI_Iallreduce(sizes, agreed, 2, MPI_INT, MPI_MIN, m_comm, &req), what);
  wait_request(req, what);
  // One rank per node too (a node of one slot), so a sharded update can serve it.
  m_topology.usable = agreed[0] == -agreed[1];
  m_topology.nodes = m_size / m_topology.local_size;
  // Every rank has passed the allreduce: the split below finds them all.
  {
    detail::BlockingGuard guard(get_timeout(), what, "in a blocking MPI_Comm_split", this);
    detail::check(MPI_Comm_split(m_comm, m_topology.local_rank, m_rank, &m_topology.cross), what);
  }
  MPI_Comm_set_errhandler(m_topology.cross, MPI_ERRORS_RETURN);
  gather_creator(what);
  m_topology.made = true;
}

MPI_Comm MPICommunicator::cross_node_handle(int* nodes) {
  {
    std::lock_guard<std::mutex> lock(m_setup_mutex);
    make_topology();
  }
  if (nodes) *nodes = m_topology.nodes;
  return m_topology.cross;
}

void MPICommunicator::gather_creator(const std::string& what) {
  int64_t mine[2] = {static_cast<int64_t>(getpid()), static_cast<int64_t>(m_uid)};
  int64_t first[2] = {mine[0], mine[1]};
  MPI_Request req;
  detail::check(MPI_Ibcast(first, 2, MPI_INT64_T, 0, m_topology.node, &req), what);
  wait_request(req, what);
  m_topology.creator_pid = static_cast<long>(first[0]);
  m_topology.creator_uid = static_cast<uint64_t>(first[1]);
}

namespace {

// "/ngraph-<pid>-...": objects whose creating process is gone (killed before every rank had
// mapped and unlinked them) are removed by the next region made on the machine.
void remove_stale_objects() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  while (dirent* entry = readdir(dir)) {
    const char* prefix = "ngraph-";
    if (std::strncmp(entry->d_name, prefix, std::strlen(prefix)) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(entry->d_name + std::strlen(prefix), &end, 10);
    if (pid <= 0 || end == entry->d_name + std::strlen(prefix) || *end != '-') continue;
    if (pid == static_cast<long>(getpid())) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      shm_unlink((std::string("/") + entry->d_name).c_str());
  }
  closedir(dir);
}

// A region's bytes: a header (a counter and two mailboxes per local rank), one slot per local
// rank, then the memory held once per node.
struct RegionLayout {
  size_t header, slot, common, total;
};
RegionLayout region_layout(size_t bytes, size_t common, int local_size) {
  RegionLayout l;
  l.header = round_up(3 * kLine * static_cast<size_t>(local_size), kPage);
  l.slot = round_up(std::max<size_t>(bytes, 1), kPage);
  l.common = common;
  l.total = l.header + l.slot * static_cast<size_t>(local_size) + round_up(l.common, kPage);
  return l;
}

// Local rank 0 makes the object `name` with its pages reserved: its descriptor, or -1 and an
// empty name when that fails.
int create_object(char* name, size_t total) {
  remove_stale_objects();
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  // fallocate reserves the pages now: tmpfs would otherwise fail later with SIGBUS.
  if (fd >= 0 && (ftruncate(fd, static_cast<off_t>(total)) != 0 ||
                  posix_fallocate(fd, 0, static_cast<off_t>(total)) != 0)) {
    close(fd);
    shm_unlink(name);
    fd = -1;
  }
  if (fd < 0) name[0] = 0;
  testing::at(testing::Point::shared_object_made);  // a test: the creator stalls, nobody mapped it
  return fd;
}

// Maps the object open on `fd` (if any) and closes it: fd is -1 after; nullptr when not mapped.
char* map_object(int& fd, size_t total) {
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  fd = -1;
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

// Whether every rank mapped the region and all asked for the same sizes: {mapped, bytes,
// -bytes, common, -common} at their minimum over the communicator.
bool mapped_alike_everywhere(MPICommunicator& comm, bool mapped, size_t bytes, size_t common,
                             const std::string& what) {
  int64_t mine[5] = {mapped ? 1 : 0, static_cast<int64_t>(bytes), -static_cast<int64_t>(bytes),
                     static_cast<int64_t>(common), -static_cast<int64_t>(common)};
  int64_t all[5] = {0, 0, 0, 0, 0};
  MPI_Request req;
  detail::check(MPI_Iallreduce(mine, all, 5, MPI_INT64_T, MPI_MIN, comm.handle(), &req), what);
  comm.wait_request(req, what);
  return all[0] == 1 && all[1] == -all[2] && all[3] == -all[4];
}

}  // namespace

std::shared_ptr<SharedRegion> MPICommunicator::create_shared_region(size_t bytes, size_t common) {
  return create_shared_region_with(bytes, common, nullptr);
}

std::shared_ptr<SharedRegion> MPICommunicator::create_shared_region_with(size_t bytes, size_t common,
                                                                         CrossNodeAllreduce cross) {
  check_usable("SharedRegion");
  if (m_size < 2) return nullptr;
  {
    std::lock_guard<std::mutex> lock(m_setup_mutex);
    make_topology();  // made at compile time for computations' communicators
  }
  const std::string what = "[SharedRegion] " + std::to_string(bytes) + " bytes per rank, " +
                           std::to_string(common) + " per node";
  const Topology& t = m_topology;
  const RegionLayout layout = region_layout(bytes, common, t.local_size);
  common = layout.common;
  bool ok = t.usable && shared_memory_enabled();
  // Local rank 0 creates the object; every rank of the node knows its name (creator's pid,
  // communicator and count), so any of them can remove it when set-up fails.
  char name[64] = {0};
  std::snprintf(name, sizeof name, "/ngraph-%ld-%llu-%llu", t.creator_pid,
                static_cast<unsigned long long>(t.creator_uid), static_cast<unsigned long long>(++m_regions));
  const std::string object = name;
  int fd = ok && t.local_rank == 0 ? create_object(name, layout.total) : -1;
  char* base = nullptr;
  try {
    if (t.local_size > 1) {  // whether it was made
      MPI_Request req;
      detail::check(MPI_Ibcast(name, sizeof name, MPI_CHAR, 0, t.node, &req), what);
      wait_request(req, what);
    }
    if (ok && t.local_rank != 0 && name[0]) fd = shm_open(name, O_RDWR, 0600);
    base = map_object(fd, layout.total);
    bool alike = mapped_alike_everywhere(*this, base != nullptr, bytes, common, what);
    // Everyone has it open (or gave up): the name can go, so nothing is left in /dev/shm.
    if (t.local_rank == 0 && name[0]) shm_unlink(name);
    if (!alike) {
      if (base) munmap(base, layout.total);
      return nullptr;
    }
  } catch (...) {
    // A rank failed or stalled during set-up: whoever notices removes the object (the
    // creator may be the one that is gone), so nothing stays in /dev/shm.
    if (fd >= 0) close(fd);
    if (base) munmap(base, layout.total);
    if (ok) shm_unlink(object.c_str());
    throw;
  }
  return std::make_shared<MPISharedRegion>(*this, base, layout.total, layout.header, layout.slot, bytes, common,
                                           t.local_rank, t.local_size, t.nodes, t.cross, t.node_ranks,
                                           std::move(cross));
}

}  // namespace distributed
}  // namespace ngraph
