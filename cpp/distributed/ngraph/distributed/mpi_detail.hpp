// Helpers shared by the MPI communicator and its shared-memory regions (not installed).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <stdexcept>
#include <string>
#include <thread>

#include "ngraph/distributed/communicator.hpp"

namespace ngraph {
namespace distributed {
class MPICommunicator;
namespace detail {

inline MPI_Datatype mpi_type(element::Type t, const char* op) {
  switch (t.get_type_enum()) {
    case element::Type_t::f32: return MPI_FLOAT;
    case element::Type_t::f64: return MPI_DOUBLE;
    case element::Type_t::i32: return MPI_INT32_T;
    case element::Type_t::i64: return MPI_INT64_T;
    default: break;
  }
  throw std::invalid_argument(std::string("[") + op + "] element type " + t.get_type_name() +
                              " is not supported by collectives (f32, f64, i32, i64)");
}

inline MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::prod: return MPI_PROD;
  }
  return MPI_SUM;
}

inline void check(int err, const std::string& what) {
  if (err == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, text, &len);
  throw DistributedError(what + ": MPI error: " + std::string(text, static_cast<size_t>(len)));
}

#if defined(__x86_64__) || defined(__i386__)
inline void cpu_relax() { __builtin_ia32_pause(); }
#else
inline void cpu_relax() {}
#endif

// How a wait backs off. MPI requests (the default): tested in a loop, then with sleeps after
// 2 ms, so waiting ranks leave the cores to ranks that still compute. Shared-memory flags
// (spin): the other rank is usually microseconds away, so spin first, then yield (for
// oversubscribed nodes), then sleep after 20 ms.
struct Backoff {
  long spins = 0;  // iterations of pure spinning before anything else
  std::chrono::microseconds sleep_after{2000}, sleep{50};
  static Backoff spin() { return {2000, std::chrono::microseconds(20000), std::chrono::microseconds(20)}; }
};

// While a thread waits longer than a moment, what it waits for ("[AllReduce] 10 x f32 sum
// on MPI communicator of graph 'g' ..."): the answer other ranks get when they ask this
// one after a timeout of theirs (see survey in mpi_communicator.cpp).
class WaitNote {
 public:
  explicit WaitNote(const std::string& text);
  ~WaitNote();
  WaitNote(const WaitNote&) = delete;
  WaitNote& operator=(const WaitNote&) = delete;

 private:
  uint64_t m_id;
};

// Arms the watchdog around an MPI call that blocks and cannot be polled (MPI_Comm_split,
// MPI_Comm_split_type, MPI_Allreduce): if it outlasts `seconds`, the watchdog prints `what`
// with the other ranks' answers (survey) and ends the job (MPI_Abort), never a hang. `comm`
// (may be null) must outlive the guard; `waiting` is a string literal.
class BlockingGuard {
 public:
  BlockingGuard(double seconds, std::string what, const char* waiting, const MPICommunicator* comm);
  ~BlockingGuard();
  BlockingGuard(const BlockingGuard&) = delete;
  BlockingGuard& operator=(const BlockingGuard&) = delete;

 private:
  uint64_t m_id;
};

// Calls ready() until it returns true or `seconds` pass (then returns false). `waiting`
// (lazily, once the wait has outlasted its spinning phase) describes the wait for a
// WaitNote; empty: none.
template <typename Ready, typename Text = std::nullptr_t>
bool poll_until(double seconds, Ready ready, Backoff backoff = {}, Text waiting = nullptr) {
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  auto deadline = deadline_after(seconds);
  std::optional<WaitNote> note;
  for (long spins = 0;; ++spins) {
    if (ready()) return true;
    if (spins < backoff.spins) {
      cpu_relax();
      continue;
    }
    if ((spins & 15) == 0) {
      auto now = clock::now();
      if (now > deadline) return false;
      if (now - start > backoff.sleep_after) {
        if constexpr (!std::is_same_v<Text, std::nullptr_t>)
          if (!note) note.emplace(waiting());
        std::this_thread::sleep_for(backoff.sleep);
        continue;
      }
    }
    if (backoff.spins) std::this_thread::yield();
  }
}

// After a timeout on a communicator whose side channel is `control` (rank `self` of
// `size`): asks every other rank what it waits for and collects the answers for up to a
// second. Returns " Other ranks: rank 1 did not answer within 1 s (stopped, killed, or its
// MPI is stuck); rank 2 waits in ..." (empty when MPI cannot serve questions from another
// thread: below MPI_THREAD_MULTIPLE).
std::string survey(MPI_Comm control, int self, int size);

}  // namespace detail
}  // namespace distributed
}  // namespace ngraph
