// Communicators: the small interface ngraph's collective ops run on. One process without a
// launcher gets a LocalCommunicator (every collective is a cheap identity); under mpirun,
// an MPICommunicator (mpi_communicator.hpp). Every wait is bounded by a timeout, so a rank
// that never arrives ends in an error instead of a hang.
#pragma once

#include <atomic>
#include <chrono>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "ngraph/element_type.hpp"

namespace ngraph {
namespace distributed {


// The moment `seconds` from now on the steady clock; time_point::max() (never) when the
// timeout is infinite or too large for the clock (converting such a duration would overflow
// into the past).
std::chrono::steady_clock::time_point deadline_after(double seconds);

// A timeout for messages: "60 s", "2.5 s", "no limit".
std::string timeout_text(double seconds);

// The reduction of a collective. Ops store it as this enum and visit it as the attribute
// reduce_op="sum" (AttributeVisitor::on_enum).
enum class ReduceOp { sum, mean, max, min, prod };
// "sum", "mean", "max", "min", "prod".
const char* to_string(ReduceOp op);
// The inverse of to_string; throws std::invalid_argument naming reduce_op and the value
// otherwise.
ReduceOp reduce_op_from_string(const std::string& name);

// How float values travel where ranks do not share memory (gradient compression): f32, or
// rounded to bfloat16 / IEEE half (see cpp/distributed/.../cross_node.hpp for the rounding).
// Ops visit it as the attribute compression="none" | "bf16" | "fp16".
enum class Wire { f32, bf16, fp16 };
// "none" (f32), "bf16", "fp16": the names users write (compression=...).
const char* to_string(Wire wire);
// The inverse; std::invalid_argument naming the accepted names otherwise.
Wire wire_from_string(const std::string& name);

// A float sum or mean allreduce's compression: the wire of its network step, and with error
// feedback the caller's storage for the carried rounding error (kept between calls; the
// communicator sizes it, zero-filled, on first use; null: no error feedback).
struct Compression {
  Wire wire = Wire::f32;
  std::vector<float>* residual = nullptr;
};

// The compression ng.allreduce uses when given none (for f32 sum and mean allreduces):
// NGRAPH_DIST_COMPRESSION and NGRAPH_DIST_ERROR_FEEDBACK, replaced by
// ngraph.distributed.init(compression=..., error_feedback=...). Ranks must agree on it (the
// settings check compares it when communicators are made and computations compiled).
struct DefaultCompression {
  Wire wire = Wire::f32;
  bool error_feedback = false;
};
DefaultCompression get_default_compression();
// std::invalid_argument when error_feedback is asked without a 16-bit wire.
void set_default_compression(DefaultCompression c);

// A collective failed, timed out, or ranks disagree about what to run. The message names
// the op, the rank and what differs. Python: ngraph.distributed.DistributedError.
class DistributedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A started operation; wait() completes it or throws DistributedError after the
// communicator's timeout.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // Lets the operation advance without blocking; true once it has completed (then wait()
  // returns at once). MPI progresses non-blocking collectives inside such calls.
  virtual bool test() { return false; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "local", "MPI (duplicate of MPI_COMM_WORLD)", ...
  virtual std::string name() const = 0;

  // Non-blocking starts. Counts are elements; allgather/reduce_scatter counts are per rank
  // (allgather: in has count, out has count * size; reduce_scatter: in has count * size, out
  // has count). `in` and `out` never overlap, except that allreduce takes in == out (in
  // place: a buffer planned so in shared memory, reduced over MPI in a call that skips the
  // agreement check).
  virtual std::unique_ptr<Request> start_allreduce(const void* in, void* out, size_t count,
                                                   element::Type type, ReduceOp op) = 0;
  // On the root, `buffer` holds the value; on the others it receives it.
  virtual std::unique_ptr<Request> start_broadcast(void* buffer, size_t count, element::Type type,
                                                   int root) = 0;
  virtual std::unique_ptr<Request> start_allgather(const void* in, void* out, size_t count,
                                                   element::Type type) = 0;
  virtual std::unique_ptr<Request> start_reduce_scatter(const void* in, void* out, size_t count,
                                                        element::Type type, ReduceOp op) = 0;
  virtual std::unique_ptr<Request> start_send(const void* buffer, size_t count, element::Type type,
                                              int dest, int tag) = 0;
  // Fails (in wait) when the message that arrives has a different number of elements.
  virtual std::unique_ptr<Request> start_recv(void* buffer, size_t count, element::Type type,
                                              int source, int tag) = 0;

  // The fast blocking form kernels use once the ranks have been checked to agree (see
  // check_same_collectives): MPI's blocking collective, which is faster than a polled
  // non-blocking one. It cannot be interrupted, so a watchdog ends the whole job (with a
  // message naming the op and the rank) if it outlasts the timeout. Default: allreduce().
  virtual void allreduce_guarded(const void* in, void* out, size_t count, element::Type type,
                                 ReduceOp op) {
    allreduce(in, out, count, type, op);
  }
  // A float (f32) sum or mean allreduce whose network step sends the values as `c.wire` says.
  // Blocking (the exchange adds the pieces itself, in rank order), bounded by the timeout; in
  // and out as for start_allreduce. Where no network is crossed (one process, the ranks of one
  // node) and for Wire::f32 it is the plain allreduce: this default.
  virtual void allreduce_compressed(const void* in, void* out, size_t count, element::Type type,
                                    ReduceOp op, const Compression& c) {
    (void)c;
    allreduce(in, out, count, type, op);
  }

  // Blocking forms, each wait bounded by the timeout (DistributedError after it).
  // With several ranks these work on staging buffers: after a timeout the operation stays
  // pending inside MPI, which may still read or write its buffers when a late rank arrives,
  // so those buffers are the communicator's (kept) rather than the caller's (maybe freed).
  void allreduce(const void* in, void* out, size_t count, element::Type type, ReduceOp op);
  void broadcast(void* buffer, size_t count, element::Type type, int root);
  void allgather(const void* in, void* out, size_t count, element::Type type);
  void reduce_scatter(const void* in, void* out, size_t count, element::Type type, ReduceOp op);
  void send(const void* buffer, size_t count, element::Type type, int dest, int tag = 0);
  void recv(void* buffer, size_t count, element::Type type, int source, int tag = 0);

  // Seconds a wait may take before it fails (default: $NGRAPH_DIST_TIMEOUT, else 60).
  // A communicator made by duplicate() shares its timeout with the one it came from.
  double get_timeout() const { return m_timeout->load(std::memory_order_relaxed); }
  void set_timeout(double seconds);

  // Checks that every rank is about to run the same sequence of collectives (one text line
  // per collective, without node names) of the same computation (the identity given to
  // duplicate()) in the same call (counted per check). Throws DistributedError on every rank,
  // naming the computations or the first collective that differs and the ranks, when they
  // are not. `where` names the graph and `labels` (same length as `signature`) name the
  // nodes, for the message.
  void check_same_collectives(const std::vector<std::string>& signature,
                              const std::vector<std::string>& labels, const std::string& where);
  // How many signature checks found agreement (for tests and benchmarks).
  size_t get_checks_passed() const { return m_checks_passed; }
  // The same, with the checks of the computations' own communicators (duplicates) made from
  // this one, where the implementation makes such duplicates.
  virtual size_t get_all_checks_passed() const { return get_checks_passed(); }

  // A communicator of one compiled computation: the same ranks, with traffic of its own, so
  // calls of different computations from different threads never match each other's
  // messages (like a process group). Collective over the ranks, in the same order on every
  // rank (compiling is); bounded by the timeout. `label` names the computation in messages
  // and `identity` (equal across ranks for the same graph) is part of every agreement check.
  // nullptr when this kind of communicator needs none (one process): use this one.
  virtual std::shared_ptr<Communicator> duplicate(const std::string& label, uint64_t identity) {
    (void)label;
    (void)identity;
    return nullptr;
  }
  // Held for the duration of each call of a computation on this communicator: refuses, with
  // DistributedError, a second thread's call at once when MPI cannot take calls from several
  // threads (below MPI_THREAD_MULTIPLE). Default: nothing to refuse.
  virtual std::shared_ptr<void> begin_call(const std::string& where) {
    (void)where;
    return nullptr;
  }

 protected:
  Communicator();
  void check_rank(int r, const char* what) const;
  // The first step of check_same_collectives: the allreduce (max) of `count` hash words,
  // check number `call` on this communicator, `what` naming the computation and the call
  // ("graph 'g' (computation #2), call #5"). A backend may watch this wait for ranks that
  // wait in the check of another computation (on another communicator, so the wait would
  // otherwise last the whole timeout) and throw DistributedError naming both. Default: the
  // plain allreduce.
  virtual void agreement_allreduce(const int64_t* in, int64_t* out, size_t count, uint64_t call,
                                   const std::string& what);
  // Set by duplicate() on the communicator it makes; part of every agreement check.
  uint64_t m_identity = 0;
  std::string m_label;
  // Makes this communicator's timeout the same setting as `other`'s (for duplicates).
  void share_timeout_with(const Communicator& other) { m_timeout = other.m_timeout; }

 private:
  std::shared_ptr<std::atomic<double>> m_timeout;
  size_t m_checks_passed = 0;
  uint64_t m_check_calls = 0;  // checks made: the call number every rank must agree on
  std::vector<int64_t> m_check_send, m_check_recv;  // check_same_collectives' buffers
  // Runs start(in_stage, out_stage) on copies of `in` (in_bytes) and into a buffer of
  // out_bytes copied to `out` after the wait; a wait that fails leaves the staging buffers
  // in m_abandoned for good.
  void staged(const void* in, size_t in_bytes, void* out, size_t out_bytes,
              const std::function<std::unique_ptr<Request>(const void*, void*)>& start,
              bool in_place = false);
  std::vector<std::shared_ptr<std::vector<char>>> m_abandoned;
  std::mutex m_abandoned_mutex;  // threads may share a communicator (barrier, send/recv)
};

// One process: rank 0 of 1; collectives copy `in` to `out`; send/recv to self are an error.
class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local (one process)"; }
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
};

// When executables check that all ranks agree on their collectives: before every call
// (default; one small allreduce per call and communicator), before the first call only, or
// never. Set with NGRAPH_DIST_CHECK=always|first|never or set_check_mode.
enum class CheckMode { always, first, never };
CheckMode get_check_mode();
void set_check_mode(CheckMode mode);

// What a collective that outlasts the timeout does where it cannot be interrupted (MPI's
// blocking allreduce, used once the ranks were checked to agree): true (default) ends the
// job after printing which ranks did not arrive on every rank; false makes such collectives
// run as non-blocking ones polled with the deadline, so the live ranks raise
// DistributedError instead (a little slower). ngraph.distributed.init(abort_on_error=...).
bool get_abort_on_error();
void set_abort_on_error(bool abort);

// The communicator ops use when they are given none. Until set, the first use creates it:
// the MPI world (initialising MPI if needed) when the process was started by an MPI launcher
// (mpirun/srun environment) with more than one rank, else a LocalCommunicator.
std::shared_ptr<Communicator> get_default_communicator();
void set_default_communicator(std::shared_ptr<Communicator> comm);
// Used by the MPI library to offer the world communicator.
void register_world_factory(std::function<std::shared_ptr<Communicator>()> factory);
// True when environment variables of an MPI launcher say this job has more than one rank.
bool launched_with_several_ranks();
// False when NGRAPH_SHM=0: collectives then never use shared memory (as between hosts).
bool shared_memory_enabled();

}  // namespace distributed
}  // namespace ngraph
