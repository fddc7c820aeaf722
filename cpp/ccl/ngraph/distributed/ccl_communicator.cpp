#include "ngraph/distributed/ccl_communicator.hpp"

#include <oneapi/ccl.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ngraph/distributed/mpi_detail.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace distributed {

struct CCLCommunicator::Impl {
  ccl::shared_ptr_class<ccl::kvs> kvs;
  std::optional<ccl::communicator> comm;
  // Operations that timed out: kept, since oneCCL may still complete them when a late rank
  // arrives (destroying a pending event is not allowed).
  std::vector<ccl::event> abandoned;
};

namespace {

using detail::poll_until;

const char* kInstallHint =
    "oneCCL needs libccl.so.1 from the pip wheels oneccl-cpu==2021.15.2 and "
    "oneccl-cpu-devel==2021.15.2 and the libfabric transport (Debian: apt-get install "
    "libfabric-dev); see tools/ccl_setup.sh and docs/distributed.md, section \"oneCCL backend\"";

ccl::datatype ccl_type(element::Type t, const char* op) {
  switch (t.get_type_enum()) {
    case element::Type_t::f32: return ccl::datatype::float32;
    case element::Type_t::f64: return ccl::datatype::float64;
    case element::Type_t::i32: return ccl::datatype::int32;
    case element::Type_t::i64: return ccl::datatype::int64;
    default: break;
  }
  throw std::invalid_argument(std::string("[") + op + "] element type " + t.get_type_name() +
                              " is not supported by collectives (f32, f64, i32, i64)");
}

// oneCCL 2021.15's avg is refused on the CPU ("not supported for the scheduler path"): mean
// is a sum scaled afterwards, as on MPI, so both backends give the same values.
ccl::reduction ccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return ccl::reduction::sum;
    case ReduceOp::max: return ccl::reduction::max;
    case ReduceOp::min: return ccl::reduction::min;
    case ReduceOp::prod: return ccl::reduction::prod;
  }
  return ccl::reduction::sum;
}

void check_mean(ReduceOp op, element::Type type, const char* name) {
  if (op == ReduceOp::mean && !type.is_real())
    throw std::invalid_argument(std::string("[") + name + "] mean needs a floating-point type, got " +
                                type.get_type_name());
}

template <typename T>
void scale(void* data, size_t count, double factor) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] * factor);
}

void scale_mean(void* out, size_t count, element::Type type, int ranks) {
  double f = 1.0 / ranks;
  if (type == element::f32) scale<float>(out, count, f);
  else if (type == element::f64) scale<double>(out, count, f);
}

std::string describe(const char* op, size_t count, element::Type t) {
  return std::string("[") + op + "] " + std::to_string(count) + " x " + t.get_type_name() + " (" +
         std::to_string(count * t.size()) + " bytes, oneCCL)";
}

// Runs a oneCCL call, turning its exceptions into DistributedError naming the op.
template <typename F>
auto ccl_call(const std::string& what, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const ccl::exception& e) {
    throw DistributedError(what + ": oneCCL error: " + e.what());
  }
}

void set_default_env(const char* name, const std::string& value) {
  setenv(name, value.c_str(), 0);  // the user's setting wins
}

// oneCCL reads its settings when it is initialised, once per process. Its MPI transport
// wants an MPICH-ABI libmpi.so.12 (Open MPI's is libmpi.so.40), so it goes over libfabric
// (OFI); libfabric's default provider choice finds none on plain Ethernet hosts, tcp works on
// one host and across hosts. The local rank and size (which oneCCL warns about otherwise)
// come from Open MPI's launcher or from a node split of the communicator.
void init_ccl_once(MPICommunicator& mpi) {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [&] {
    set_default_env("CCL_ATL_TRANSPORT", "ofi");
    set_default_env("FI_PROVIDER", "tcp");
    set_default_env("CCL_PROCESS_LAUNCHER", "none");
    // oneCCL's worker thread spins while it waits; where ranks share cores that takes them
    // from the ranks still computing (a 2-rank training step ran at half speed). Yield
    // instead, as ngraph's own waits back off (set CCL_SPIN_COUNT/CCL_YIELD to choose).
    set_default_env("CCL_SPIN_COUNT", "100");
    set_default_env("CCL_YIELD", "sched_yield");
    auto lr = settings::environment("OMPI_COMM_WORLD_LOCAL_RANK");
    auto ls = settings::environment("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (lr && ls) {
      set_default_env("CCL_LOCAL_RANK", *lr);
      set_default_env("CCL_LOCAL_SIZE", *ls);
    } else {
      MPI_Comm node = MPI_COMM_NULL;
      int r = 0, s = 1;
      if (MPI_Comm_split_type(mpi.handle(), MPI_COMM_TYPE_SHARED, mpi.rank(), MPI_INFO_NULL, &node) ==
          MPI_SUCCESS) {
        MPI_Comm_rank(node, &r);
        MPI_Comm_size(node, &s);
        MPI_Comm_free(&node);
      }
      set_default_env("CCL_LOCAL_RANK", std::to_string(r));
      set_default_env("CCL_LOCAL_SIZE", std::to_string(s));
    }
    try {
      ccl::init();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  if (!failure.empty())
    throw DistributedError("[CCLCommunicator] rank " + std::to_string(mpi.rank()) +
                           ": oneCCL could not be initialised: " + failure + " (" + kInstallHint + ")");
}

// Already complete (nothing to move).
class DoneRequest : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// A oneCCL operation waited for with the communicator's timeout.
class CCLRequest : public Request {
 public:
  CCLRequest(CCLCommunicator& comm, CCLCommunicator::Impl& impl, ccl::event ev, std::string what,
             std::function<void()> finish = {})
      : m_comm(comm), m_impl(impl), m_event(std::move(ev)), m_what(std::move(what)),
        m_finish(std::move(finish)) {}
  ~CCLRequest() override {
    if (m_done) return;
    m_comm.mark_broken(m_what + " was abandoned before it completed");
    m_impl.abandoned.push_back(std::move(m_event));
  }
  bool test() override {
    if (m_done) return true;
    bool ready = false;
    try {
      ready = m_event.test();
    } catch (const ccl::exception& e) {
      m_done = true;
      std::string msg = m_what + ": rank " + std::to_string(m_comm.rank()) + ": oneCCL error: " + e.what();
      m_comm.mark_broken(msg);
      throw DistributedError(msg);
    }
    if (!ready) return false;
    m_done = true;
    if (m_finish) m_finish();
    return true;
  }
  void wait() override {
    if (m_done) return;
    if (poll_until(m_comm.get_timeout(), [&] { return test(); })) return;
    m_done = true;
    std::string msg = m_comm.timeout_message(m_what, "waiting for the other ranks of " + m_comm.name());
    m_comm.mark_broken(msg);
    m_impl.abandoned.push_back(std::move(m_event));
    throw DistributedError(msg);
  }

 private:
  CCLCommunicator& m_comm;
  CCLCommunicator::Impl& m_impl;
  ccl::event m_event;
  std::string m_what;
  std::function<void()> m_finish;
  bool m_done = false;
};

}  // namespace

std::string CCLCommunicator::library_version() {
  auto v = ccl::get_library_version();
  return std::string("oneCCL ") + std::to_string(v.major) + "." + std::to_string(v.minor) + "." +
         std::to_string(v.update) + " (" + v.full + ")";
}

CCLCommunicator::CCLCommunicator(std::shared_ptr<MPICommunicator> mpi)
    : m_mpi(std::move(mpi)), m_impl(std::make_unique<Impl>()) {
  if (!m_mpi) throw std::invalid_argument("[CCLCommunicator] the MPI communicator is null");
  set_timeout(m_mpi->get_timeout());
  m_name = "oneCCL communicator over " + m_mpi->name();
  const std::string what = "[CCLCommunicator] creating the " + m_name;
  const int r = rank(), n = size();
  // Every step is checked on every rank, so a rank where oneCCL cannot start makes all of
  // them fail (naming it) instead of leaving the others waiting.
  std::string error;
  try {
    init_ccl_once(*m_mpi);
  } catch (const DistributedError& e) {
    error = e.what();
  }
  // Rank 0 serves the key-value store; its address goes to the others over MPI.
  struct {
    char ok;
    ccl::kvs::address_type address;
  } root{};
  if (r == 0 && error.empty()) {
    try {
      m_impl->kvs = ccl::create_main_kvs();
      root.address = m_impl->kvs->get_address();
      root.ok = 1;
    } catch (const std::exception& e) {
      error = what + ": rank 0 could not start oneCCL's key-value store: " + e.what();
    }
  }
  MPI_Request req;
  detail::check(MPI_Ibcast(&root, sizeof root, MPI_BYTE, 0, m_mpi->handle(), &req), what);
  m_mpi->wait_request(req, what + " (the key-value store's address from rank 0)");
  if (r != 0 && error.empty() && root.ok) {
    try {
      m_impl->kvs = ccl::create_kvs(root.address);
    } catch (const std::exception& e) {
      error = what + ": rank " + std::to_string(r) + " could not reach oneCCL's key-value store on rank 0: " +
              e.what();
    }
  }
  int ok = error.empty() && root.ok ? 1 : 0;
  std::vector<int> oks(static_cast<size_t>(n), 0);
  detail::check(MPI_Iallgather(&ok, 1, MPI_INT, oks.data(), 1, MPI_INT, m_mpi->handle(), &req), what);
  m_mpi->wait_request(req, what);
  std::string failed;
  for (int k = 0; k < n; ++k)
    if (!oks[static_cast<size_t>(k)]) failed += (failed.empty() ? "" : ", ") + std::to_string(k);
  if (!failed.empty()) {
    if (error.empty()) error = what + ": oneCCL failed to start on rank(s) " + failed + " (see their errors)";
    throw DistributedError(error);
  }
  // The communicator itself: collective inside oneCCL, which cannot be bounded, so it runs on
  // a thread of its own and the wait for it is.
  auto task = std::make_shared<std::packaged_task<ccl::communicator()>>(
      [n, r, kvs = m_impl->kvs] { return ccl::create_communicator(n, r, kvs); });
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (!poll_until(get_timeout(), [&] {
        return result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      })) {
    m_broken = timeout_message(what, "waiting for the other ranks to join it");
    throw DistributedError(m_broken);
  }
  try {
    m_impl->comm.emplace(result.get());
  } catch (const std::exception& e) {
    std::string provider = settings::environment("FI_PROVIDER").value_or("");
    throw DistributedError(what + ": rank " + std::to_string(r) + ": oneCCL error: " + e.what() +
                           " (libfabric provider FI_PROVIDER=" + provider + "; " +
                           kInstallHint + ")");
  }
  m_name += ", size " + std::to_string(n);
  // A oneCCL communicator must go while oneCCL is still there: the default communicator (a
  // static of ngraph_core) would otherwise be destroyed after oneCCL's own statics at exit.
  // Registered after oneCCL started, this handler runs before those are destroyed.
  static std::once_flag release_at_exit;
  std::call_once(release_at_exit, [] { std::atexit([] { set_default_communicator(nullptr); }); });
}

CCLCommunicator::~CCLCommunicator() {
  m_cross.reset();
  // Operations that timed out may still complete when a late rank arrives, writing into the
  // staging buffers this object owns: give them the timeout to settle. Those that do not
  // stay with oneCCL's objects, never destroyed (a rank that is gone never completes them).
  auto& abandoned = m_impl->abandoned;
  bool settled = poll_until(get_timeout(), [&] {
    for (auto& e : abandoned) {
      try {
        if (!e.test()) return false;
      } catch (const std::exception&) {  // failed: it will not write any more
      }
    }
    return true;
  });
  if (!settled) (void)m_impl.release();
}

void CCLCommunicator::mark_broken(const std::string& why) {
  if (m_broken.empty()) m_broken = why;
}

std::string CCLCommunicator::timeout_message(const std::string& what, const std::string& waiting) const {
  return what + ": rank " + std::to_string(rank()) + " timed out after " + timeout_text(get_timeout()) + " " +
         waiting +
         " (a rank failed, exited, or runs different collectives; set the timeout with "
         "NGRAPH_DIST_TIMEOUT or ngraph.distributed.init)";
}

void CCLCommunicator::check_usable(const char* op) const {
  if (!m_broken.empty())
    throw DistributedError(std::string("[") + op + "] rank " + std::to_string(rank()) +
                           ": the oneCCL communicator is unusable after an earlier failure: " + m_broken);
}

namespace {

// What every collective does: refused on a broken communicator, checked types, nothing to
// move for 0 elements, oneCCL's errors named, a mean scaled on completion (into `out`).
template <typename Call>
std::unique_ptr<Request> start_op(CCLCommunicator& c, CCLCommunicator::Impl& impl, const char* op,
                                  size_t count, element::Type type, const ReduceOp* reduce, void* out,
                                  const std::string& detail, Call call) {
  c.check_usable(op);
  if (reduce) check_mean(*reduce, type, op);
  auto dt = ccl_type(type, op);
  if (count == 0) return std::make_unique<DoneRequest>();
  std::string what = describe(op, count, type) + detail;
  auto ev = ccl_call(what, [&] { return call(dt, *impl.comm); });
  std::function<void()> finish;
  if (reduce && *reduce == ReduceOp::mean)
    finish = [out, count, type, n = c.size()] { scale_mean(out, count, type, n); };
  return std::make_unique<CCLRequest>(c, impl, std::move(ev), what, std::move(finish));
}

}  // namespace

std::unique_ptr<Request> CCLCommunicator::start_allreduce(const void* in, void* out, size_t count,
                                                          element::Type type, ReduceOp op) {
  return start_op(*this, *m_impl, "AllReduce", count, type, &op, out, std::string(" ") + to_string(op),
                  [&](ccl::datatype dt, ccl::communicator& comm) {
                    return ccl::allreduce(in, out, count, dt, ccl_op(op), comm);
                  });
}

std::unique_ptr<Request> CCLCommunicator::start_broadcast(void* buffer, size_t count, element::Type type,
                                                          int root) {
  check_rank(root, "[BroadcastDistributed] root");
  return start_op(*this, *m_impl, "BroadcastDistributed", count, type, nullptr, nullptr,
                  " from rank " + std::to_string(root), [&](ccl::datatype dt, ccl::communicator& comm) {
                    return ccl::broadcast(buffer, count, dt, root, comm);
                  });
}

std::unique_ptr<Request> CCLCommunicator::start_allgather(const void* in, void* out, size_t count,
                                                          element::Type type) {
  return start_op(*this, *m_impl, "AllGather", count, type, nullptr, nullptr, "",
                  [&](ccl::datatype dt, ccl::communicator& comm) {
                    return ccl::allgather(in, out, count, dt, comm);
                  });
}

std::unique_ptr<Request> CCLCommunicator::start_reduce_scatter(const void* in, void* out, size_t count,
                                                               element::Type type, ReduceOp op) {
  return start_op(*this, *m_impl, "ReduceScatter", count, type, &op, out, std::string(" ") + to_string(op),
                  [&](ccl::datatype dt, ccl::communicator& comm) {
                    return ccl::reduce_scatter(in, out, count, dt, ccl_op(op), comm);
                  });
}

// Point-to-point goes over MPI: oneCCL's send/recv have no tags and cannot tell that a
// message has another size, which ngraph's Send/Recv promise.
std::unique_ptr<Request> CCLCommunicator::start_send(const void* buffer, size_t count, element::Type type,
                                                     int dest, int tag) {
  check_usable("Send");
  m_mpi->set_timeout(get_timeout());
  return m_mpi->start_send(buffer, count, type, dest, tag);
}

std::unique_ptr<Request> CCLCommunicator::start_recv(void* buffer, size_t count, element::Type type,
                                                     int source, int tag) {
  check_usable("Recv");
  m_mpi->set_timeout(get_timeout());
  return m_mpi->start_recv(buffer, count, type, source, tag);
}

void CCLCommunicator::allreduce_guarded(const void* in, void* out, size_t count, element::Type type,
                                        ReduceOp op) {
  check_usable("AllReduce");
  check_mean(op, type, "AllReduce");
  auto dt = ccl_type(type, "AllReduce");
  if (count == 0) return;
  std::string what = describe("AllReduce", count, type) + " " + to_string(op);
  auto ev = ccl_call(what, [&] { return ccl::allreduce(in, out, count, dt, ccl_op(op), *m_impl->comm); });
  // The caller's buffers: after a timeout oneCCL could still write into them, so the job ends
  // here (the MPI backend's watchdog does the same).
  if (!poll_until(get_timeout(), [&] { return ccl_call(what, [&] { return ev.test(); }); })) {
    std::fprintf(stderr, "[ngraph] %s: rank %d did not complete within %s (a rank failed or stopped taking part); ending the job\n",
                 what.c_str(), rank(), timeout_text(get_timeout()).c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::_Exit(3);
  }
  if (op == ReduceOp::mean) scale_mean(out, count, type, size());
}

std::shared_ptr<SharedRegion> CCLCommunicator::create_shared_region(size_t bytes, size_t common) {
  check_usable("SharedRegion");
  if (size() < 2) return nullptr;
  m_mpi->set_timeout(get_timeout());
  auto region = m_mpi->create_shared_region_with(
      bytes, common, [this](void* data, size_t count, element::Type type, ReduceOp op, const std::string& what) {
        if (!m_cross) throw std::logic_error(what + ": no oneCCL communicator between the nodes");
        m_cross->set_timeout(get_timeout());
        auto req = m_cross->start_allreduce(data, data, count, type, op);  // in place: oneCCL allows it
        req->wait();
      });
  int nodes = 1;
  MPI_Comm cross = m_mpi->cross_node_handle(&nodes);
  // Every rank got a region or none (create_shared_region agrees on it), so this is collective.
  if (region && nodes > 1 && !m_cross) {
    auto cross_mpi = std::make_shared<MPICommunicator>(cross, "the ranks with this rank's place on each node");
    cross_mpi->set_timeout(get_timeout());
    m_cross = std::make_shared<CCLCommunicator>(cross_mpi);
  }
  return region;
}

namespace {
// With this library loaded, NGRAPH_DIST_BACKEND=ccl makes the default communicator of a
// program started by mpirun a oneCCL one.
const bool registered = [] {
  register_world_factory([]() -> std::shared_ptr<Communicator> {
    if (settings::text("NGRAPH_DIST_BACKEND") == "ccl")
      return std::make_shared<CCLCommunicator>(MPICommunicator::world());
    return MPICommunicator::world();
  });
  return true;
}();
}  // namespace

}  // namespace distributed
}  // namespace ngraph
