#include "ngraph/distributed/mpi_communicator.hpp"

#include "ngraph/distributed/mpi_detail.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace ngraph {
namespace distributed {

namespace {

using detail::check;
using detail::mpi_op;
using detail::mpi_type;
using detail::poll_until;

bool g_we_initialized = false;

void finalize_if_ours() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialized && !finalized) MPI_Finalize();
}

int mpi_count(size_t count, const char* op) {
  if (count > static_cast<size_t>(INT_MAX))
    throw std::invalid_argument(std::string("[") + op + "] " + std::to_string(count) +
                                " elements exceed MPI's count limit");
  return static_cast<int>(count);
}

template <typename T>
void scale(void* data, size_t count, double factor) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] * factor);
}

// A non-blocking MPI operation waited for with the communicator's timeout.
class MPIRequest : public Request {
 public:
  MPIRequest(MPICommunicator& comm, MPI_Request req, std::string what)
      : m_comm(comm), m_req(req), m_what(std::move(what)) {}
  ~MPIRequest() override {
    // A request dropped without wait (an exception elsewhere) must not be left active.
    if (m_req != MPI_REQUEST_NULL && !m_done)
      m_comm.mark_broken(m_what + " was abandoned before it completed");
  }
  void wait() override {
    if (m_done) return;
    MPI_Status status;
    m_done = true;  // completed, or failed for good
    m_comm.wait_request(m_req, m_what, &status);
    finish(status);
  }

  bool test() override {
    if (m_done) return true;
    MPI_Status status;
    int flag = 0;
    check(MPI_Test(&m_req, &flag, &status), m_what);
    if (!flag) return false;
    m_done = true;
    finish(status);
    return true;
  }

 protected:
  virtual void finish(const MPI_Status&) {}
  MPICommunicator& m_comm;
  MPI_Request m_req;
  std::string m_what;
  bool m_done = false;
};

class MeanRequest : public MPIRequest {
 public:
  MeanRequest(MPICommunicator& comm, MPI_Request req, std::string what, void* out, size_t count,
              element::Type type)
      : MPIRequest(comm, req, std::move(what)), m_out(out), m_count(count), m_type(type) {}

 protected:
  void finish(const MPI_Status&) override {
    double f = 1.0 / m_comm.size();
    if (m_type == element::f32) scale<float>(m_out, m_count, f);
    else if (m_type == element::f64) scale<double>(m_out, m_count, f);
    else throw DistributedError(m_what + ": mean needs a floating-point type, got " + m_type.get_type_name());
  }

 private:
  void* m_out;
  size_t m_count;
  element::Type m_type;
};

// Waits for the message with a deadline (probe), checks its size, then receives it.
class RecvRequest : public Request {
 public:
  RecvRequest(MPICommunicator& comm, void* buffer, size_t count, element::Type type, int source,
              int tag, std::string what)
      : m_comm(comm), m_buffer(buffer), m_count(count), m_type(type), m_source(source), m_tag(tag),
        m_what(std::move(what)) {}
  void wait() override {
    MPI_Status status;
    int flag = 0;
    if (!poll_until(m_comm.get_timeout(), [&] {
          check(MPI_Iprobe(m_source, m_tag, m_comm.handle(), &flag, &status), m_what);
          return flag != 0;
        }))
      throw DistributedError(
          m_comm.timeout_message(m_what, "waiting for a message from rank " + std::to_string(m_source)));
    MPI_Datatype dt = mpi_type(m_type, "Recv");
    int got = 0;
    MPI_Get_count(&status, dt, &got);
    if (got == MPI_UNDEFINED || static_cast<size_t>(got) != m_count) {
      // Take the message off the wire so the communicator stays usable, then report.
      int bytes = 0;
      MPI_Get_count(&status, MPI_BYTE, &bytes);
      std::vector<char> sink(static_cast<size_t>(std::max(bytes, 1)));
      MPI_Recv(sink.data(), bytes, MPI_BYTE, m_source, m_tag, m_comm.handle(), MPI_STATUS_IGNORE);
      throw DistributedError(m_what + ": rank " + std::to_string(m_comm.rank()) + " expected " +
                             std::to_string(m_count) + " elements of " + m_type.get_type_name() +
                             " from rank " + std::to_string(m_source) + ", the message has " +
                             std::to_string(bytes) + " bytes (" +
                             std::to_string(bytes / static_cast<int>(m_type.size())) + " elements)");
    }
    check(MPI_Recv(m_buffer, got, dt, m_source, m_tag, m_comm.handle(), MPI_STATUS_IGNORE), m_what);
  }

 private:
  MPICommunicator& m_comm;
  void* m_buffer;
  size_t m_count;
  element::Type m_type;
  int m_source, m_tag;
  std::string m_what;
};

// MPI has no mean: it is a sum scaled afterwards, which needs floating point.
void check_mean(ReduceOp op, element::Type type, const char* name) {
  if (op == ReduceOp::mean && !type.is_real())
    throw std::invalid_argument(std::string("[") + name + "] mean needs a floating-point type, got " +
                                type.get_type_name());
}

std::string describe(const char* op, size_t count, element::Type t) {
  return std::string("[") + op + "] " + std::to_string(count) + " x " + t.get_type_name();
}

}  // namespace

bool MPICommunicator::ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return false;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  g_we_initialized = true;
  std::atexit(finalize_if_ours);
  if (provided < MPI_THREAD_SERIALIZED)
    throw DistributedError("MPI provides thread level " + std::to_string(provided) +
                           ", ngraph needs MPI_THREAD_SERIALIZED (" +
                           std::to_string(MPI_THREAD_SERIALIZED) + ")");
  return true;
}

std::string MPICommunicator::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  return std::string(text, static_cast<size_t>(len));
}

std::shared_ptr<MPICommunicator> MPICommunicator::world() {
  ensure_initialized();
  return std::make_shared<MPICommunicator>(MPI_COMM_WORLD, "MPI_COMM_WORLD");
}

MPICommunicator::MPICommunicator(MPI_Comm comm, const std::string& description) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw DistributedError("[MPICommunicator] MPI is not initialised");
  check(MPI_Comm_dup(comm, &m_comm), "[MPICommunicator] MPI_Comm_dup");
  MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m_comm, &m_rank);
  MPI_Comm_size(m_comm, &m_size);
  m_name = "MPI communicator (duplicate of " + (description.empty() ? std::string("a user communicator") : description) +
           ", size " + std::to_string(m_size) + ")";
}

MPICommunicator::~MPICommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || !m_broken.empty()) return;
  for (MPI_Comm* c : {&m_topology.node, &m_topology.cross, &m_comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void MPICommunicator::mark_broken(const std::string& why) {
  if (m_broken.empty()) m_broken = why;
}

std::string MPICommunicator::timeout_message(const std::string& what, const std::string& waiting) const {
  return what + ": rank " + std::to_string(m_rank) + " timed out after " +
         timeout_text(get_timeout()) + " " + waiting +
         " (a rank failed, exited, or runs different collectives; set the timeout with "
         "NGRAPH_DIST_TIMEOUT or ngraph.distributed.init)";
}

void MPICommunicator::wait_request(MPI_Request& req, const std::string& what, MPI_Status* status) {
  int flag = 0;
  if (poll_until(get_timeout(), [&] {
        check(MPI_Test(&req, &flag, status), what);
        return flag != 0;
      }))
    return;
  std::string msg = timeout_message(what, "waiting for the other ranks of " + m_name);
  mark_broken(msg);
  throw DistributedError(msg);
}

void MPICommunicator::check_usable(const char* op) const {
  if (!m_broken.empty())
    throw DistributedError(std::string("[") + op + "] rank " + std::to_string(m_rank) +
                           ": the communicator is unusable after an earlier failure: " + m_broken);
}

std::unique_ptr<Request> MPICommunicator::start_allreduce(const void* in, void* out, size_t count,
                                                          element::Type type, ReduceOp op) {
  check_usable("AllReduce");
  std::string what = describe("AllReduce", count, type) + " " + to_string(op);
  check_mean(op, type, "AllReduce");
  MPI_Request req;
  check(MPI_Iallreduce(in, out, mpi_count(count, "AllReduce"), mpi_type(type, "AllReduce"), mpi_op(op),
                       m_comm, &req), what);
  if (op == ReduceOp::mean) return std::make_unique<MeanRequest>(*this, req, what, out, count, type);
  return std::make_unique<MPIRequest>(*this, req, what);
}

std::unique_ptr<Request> MPICommunicator::start_broadcast(void* buffer, size_t count,
                                                          element::Type type, int root) {
  check_usable("BroadcastDistributed");
  check_rank(root, "[BroadcastDistributed] root");
  std::string what = describe("BroadcastDistributed", count, type) + " from rank " + std::to_string(root);
  MPI_Request req;
  check(MPI_Ibcast(buffer, mpi_count(count, "BroadcastDistributed"), mpi_type(type, "BroadcastDistributed"),
                   root, m_comm, &req), what);
  return std::make_unique<MPIRequest>(*this, req, what);
}

std::unique_ptr<Request> MPICommunicator::start_allgather(const void* in, void* out, size_t count,
                                                          element::Type type) {
  check_usable("AllGather");
  std::string what = describe("AllGather", count, type);
  MPI_Datatype dt = mpi_type(type, "AllGather");
  int n = mpi_count(count, "AllGather");
  MPI_Request req;
  check(MPI_Iallgather(in, n, dt, out, n, dt, m_comm, &req), what);
  return std::make_unique<MPIRequest>(*this, req, what);
}

std::unique_ptr<Request> MPICommunicator::start_reduce_scatter(const void* in, void* out, size_t count,
                                                               element::Type type, ReduceOp op) {
  check_usable("ReduceScatter");
  std::string what = describe("ReduceScatter", count, type) + " " + to_string(op);
  check_mean(op, type, "ReduceScatter");
  MPI_Request req;
  check(MPI_Ireduce_scatter_block(in, out, mpi_count(count, "ReduceScatter"), mpi_type(type, "ReduceScatter"),
                                  mpi_op(op), m_comm, &req), what);
  if (op == ReduceOp::mean) return std::make_unique<MeanRequest>(*this, req, what, out, count, type);
  return std::make_unique<MPIRequest>(*this, req, what);
}

std::unique_ptr<Request> MPICommunicator::start_send(const void* buffer, size_t count,
                                                     element::Type type, int dest, int tag) {
  check_usable("Send");
  check_rank(dest, "[Send] destination");
  std::string what = describe("Send", count, type) + " to rank " + std::to_string(dest);
  MPI_Request req;
  check(MPI_Isend(buffer, mpi_count(count, "Send"), mpi_type(type, "Send"), dest, tag, m_comm, &req), what);
  return std::make_unique<MPIRequest>(*this, req, what);
}

std::unique_ptr<Request> MPICommunicator::start_recv(void* buffer, size_t count, element::Type type,
                                                     int source, int tag) {
  check_usable("Recv");
  check_rank(source, "[Recv] source");
  mpi_type(type, "Recv");
  std::string what = describe("Recv", count, type) + " from rank " + std::to_string(source);
  return std::make_unique<RecvRequest>(*this, buffer, count, type, source, tag, what);
}

namespace {

// One thread per process that ends the job when a blocking collective outlasts its deadline
// (the call itself cannot be interrupted). It looks every 100 ms, so arming and disarming
// only take an uncontended lock: no wake-up, no context switch on the hot path.
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* w = new Watchdog();  // never destroyed: the thread outlives statics
    return *w;
  }
  uint64_t arm(double seconds, std::string message) {
    auto deadline = deadline_after(seconds);
    std::lock_guard<std::mutex> lock(m_mutex);
    uint64_t id = ++m_next;
    m_armed.emplace(id, std::make_pair(deadline, std::move(message)));
    return id;
  }
  void disarm(uint64_t id) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_armed.erase(id);
  }

 private:
  Watchdog() : m_thread([this] { run(); }) { m_thread.detach(); }
  void run() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::string expired;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        auto now = std::chrono::steady_clock::now();
        for (const auto& [id, entry] : m_armed)
          if (entry.first < now) {
            expired = entry.second;
            break;
          }
      }
      if (!expired.empty()) {
        std::fprintf(stderr, "%s\n", expired.c_str());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 3);
        std::_Exit(3);
      }
    }
  }
  std::mutex m_mutex;
  std::map<uint64_t, std::pair<std::chrono::steady_clock::time_point, std::string>> m_armed;
  uint64_t m_next = 0;
  std::thread m_thread;
};

}  // namespace

void MPICommunicator::allreduce_guarded(const void* in, void* out, size_t count, element::Type type,
                                        ReduceOp op) {
  check_usable("AllReduce");
  check_mean(op, type, "AllReduce");
  std::string what = describe("AllReduce", count, type) + " " + to_string(op);
  uint64_t guard = Watchdog::get().arm(
      get_timeout(), "[ngraph] " + what + ": rank " + std::to_string(m_rank) +
                         " did not complete within " + timeout_text(get_timeout()) +
                         " (a rank failed or stopped taking part); ending the job");
  int err = MPI_Allreduce(in, out, mpi_count(count, "AllReduce"), mpi_type(type, "AllReduce"), mpi_op(op), m_comm);
  Watchdog::get().disarm(guard);
  check(err, what);
  if (op == ReduceOp::mean) {
    double f = 1.0 / m_size;
    if (type == element::f32) scale<float>(out, count, f);
    else scale<double>(out, count, f);
  }
}

namespace {
const bool registered = [] {
  register_world_factory([] { return std::static_pointer_cast<Communicator>(MPICommunicator::world()); });
  return true;
}();
}  // namespace

}  // namespace distributed
}  // namespace ngraph
