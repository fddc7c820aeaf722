// The exchange of float sums between ranks that do not share memory ("the network step"):
// a reduce-scatter and an allgather of pieces, over non-blocking MPI collectives waited for
// with the communicator's timeout, with the values on the wire in 32 or 16 bits.
//
// Deterministic: piece r of a buffer is summed by rank r of the exchange, adding every rank's
// contribution in rank order (rank 0 first) in f32, so the sum of a piece has the same bits
// whether it is computed for an allreduce or for a sharded update. With a 16-bit wire every
// contribution is rounded to the wire type first, the owner's own included: the result is the
// f32 sum, in rank order, of the 16-bit values, whichever rank owns the piece.
//
// Rounding: to nearest, ties to even. bfloat16 keeps f32's range (finite values beyond its
// largest become infinity, as IEEE rounding says). float16 ends at 65504: finite values beyond
// it saturate to +-65504 (infinity would poison every rank's sum); infinities and NaN pass as
// they are. Error feedback (the overloads with `residual`) carries what rounding (and
// saturation) lost into the same rank's next send.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ngraph/distributed/communicator.hpp"

namespace ngraph {
namespace distributed {

class MPICommunicator;

// Wire (how float values travel: f32, bf16, fp16), to_string(Wire) and wire_from_string
// ("none", "bf16", "fp16") are declared in ngraph/distributed/communicator.hpp (core: ops
// carry the wire as their compression attribute).

// Bytes per value on the wire.
inline size_t wire_bytes(Wire wire) { return wire == Wire::f32 ? 4 : 2; }

namespace wire {
// out[i] = x[i] rounded to the 16-bit `wire` type (bits). With `residual` (n floats): x[i] +
// residual[i] is rounded instead, and residual[i] becomes what that rounding lost (0 where the
// rounded value is not finite).
void encode(const float* x, uint16_t* out, size_t n, Wire wire, float* residual = nullptr);
// out[i] = the float value of the 16-bit `wire` bits in[i] (exact).
void decode(const uint16_t* in, float* out, size_t n, Wire wire);
// x[i] = decode(encode(x[i])) in place, with the same residual rule as encode.
void round_in_place(float* x, size_t n, Wire wire, float* residual = nullptr);
}  // namespace wire

// Payload bytes every CrossNodeExchange of this process sent with `wire` (ngraph.distributed.
// traffic()): the network step of compressed allreduces, and whatever else uses an exchange.
uint64_t process_bytes_sent(Wire wire);

class CrossNodeExchange {
 public:
  // comm: the ranks that exchange (a shared region's cross-node communicator, or the whole
  // communicator). Waits use `owner`'s timeout; a timeout marks `owner` broken and throws
  // DistributedError naming `what` (as every wait on the owner does).
  CrossNodeExchange(MPICommunicator& owner, MPI_Comm comm);
  CrossNodeExchange(const CrossNodeExchange&) = delete;
  CrossNodeExchange& operator=(const CrossNodeExchange&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  // Piece r of `count` floats is SharedRegion::piece(count, sizeof(float), r, size()).
  struct Range {
    size_t lo, hi;
  };
  Range piece(size_t count, int r) const;

  // In place: afterwards piece rank() of buf holds the sum over comm's ranks of that piece,
  // added in rank order (rank 0 first) in f32, the same bits whichever path computes it; the
  // other pieces of buf are unspecified afterwards (scratch).
  void reduce_scatter_sum(float* buf, size_t count, Wire wire, const std::string& what);
  // In place: rank r's piece r of its buf copied into piece r of every rank's buf. With a
  // 16-bit wire the piece's owner also rounds its own piece to the wire type, so every rank
  // ends with bitwise the same buffer.
  void allgather(float* buf, size_t count, Wire wire, const std::string& what);
  // reduce_scatter_sum then allgather.
  void allreduce_sum(float* buf, size_t count, Wire wire, const std::string& what);
  // After a timeout (the owner is then broken) MPI may still complete the abandoned exchange
  // when a late rank arrives: with Wire::f32 it sends from and receives into `buf` itself
  // (16-bit wires use this object's buffers only), so keep `buf` alive, as the shared region's
  // slots are. This object must outlive its pending exchanges too (the communicator and the
  // region keep theirs after a failure).

  // With error feedback (16-bit wires; ignored for f32): `residual` is this rank's carried
  // rounding error, zero at the start and kept by the caller between calls.
  // reduce_scatter_sum: `count` floats, one per element this rank contributes.
  void reduce_scatter_sum(float* buf, size_t count, Wire wire, const std::string& what, float* residual);
  // allgather: piece(count, rank()).hi - lo floats, for the owner's rounding of its piece.
  void allgather(float* buf, size_t count, Wire wire, const std::string& what, float* residual);
  // allreduce_sum: residual_count(count) floats: the reduce-scatter's, then the allgather's.
  void allreduce_sum(float* buf, size_t count, Wire wire, const std::string& what, float* residual);
  size_t residual_count(size_t count) const;
  // Piece rank() of buf (count floats) rounded to the 16-bit `wire` and back in place, with
  // `residual` (piece(count, rank()).hi - lo floats, or null) as allgather's: exactly what the
  // owner keeps, and the other ranks receive, when allgather sends that piece. Sends nothing.
  // A sharded update across nodes rounds its share of the sums so, without gathering them.
  void round_own_piece(float* buf, size_t count, Wire wire, float* residual);

  // Payload bytes this object sent (values only: every piece once per receiving rank), for
  // tests and benchmarks.
  uint64_t bytes_sent() const { return m_bytes_sent.load(std::memory_order_relaxed); }

 private:
  void wait(MPI_Request& req, const std::string& what);
  void count_sent(uint64_t values, Wire wire);
  void check_count(size_t count, const std::string& what) const;
  MPICommunicator& m_owner;
  MPI_Comm m_comm;
  int m_rank = 0, m_size = 1;
  std::atomic<uint64_t> m_bytes_sent{0};
  // Reused between calls (grown, never shrunk): the wire copies of a buffer, what arrives, the
  // sum being accumulated, MPI's counts and displacements.
  std::vector<uint16_t> m_packed, m_arrived16;
  std::vector<float> m_arrived32, m_sum;
  std::vector<int> m_send_counts, m_send_displs, m_recv_counts, m_recv_displs;
};

}  // namespace distributed
}  // namespace ngraph
