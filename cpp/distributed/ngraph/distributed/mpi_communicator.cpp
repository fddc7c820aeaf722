#include "ngraph/distributed/mpi_communicator.hpp"

#include "ngraph/distributed/mpi_detail.hpp"
#include "ngraph/settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
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

// ------------------------------------------------------------------- the side channel
//
// After a timeout a rank asks every other rank, on a duplicate of the communicator made for
// this purpose, what it is waiting for; the watchdog thread of every rank answers within
// 100 ms (with MPI_THREAD_MULTIPLE), from a table of the waits its threads are in. A rank
// that does not answer within a second is stopped, dead, or inside an MPI call that does not
// progress: that is the rank the others name.
constexpr int kAskTag = 1, kAnswerTag = 2;  // an answer's tag: kAnswerTag + question id % 30000
constexpr double kSurveySeconds = 1.0;

std::mutex g_waits_mutex;
std::map<uint64_t, std::string> g_waits;  // this process's threads' current long waits
uint64_t g_next_wait = 0;

std::mutex g_side_mutex;  // the side channels, the answers in flight, g_finalizing
std::vector<std::weak_ptr<MPI_Comm>> g_controls;
std::vector<std::pair<std::shared_ptr<std::string>, MPI_Request>> g_answers;
std::vector<std::shared_ptr<int64_t>> g_questions;  // buffers of questions sent (freed requests)
bool g_finalizing = false;

std::string current_waits() {
  std::lock_guard<std::mutex> lock(g_waits_mutex);
  if (g_waits.empty()) return "is not waiting in ngraph (it runs other code)";
  std::string out = "waits in ";
  bool first = true;
  for (const auto& [id, text] : g_waits) {
    out += (first ? "" : ", and in ") + text;
    first = false;
  }
  return out;
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first: from then on the side channels
// are left alone.
int on_finalize(MPI_Comm, int, void*, void*) {
  std::lock_guard<std::mutex> lock(g_side_mutex);
  g_finalizing = true;
  return MPI_SUCCESS;
}

void watch_finalize() {
  static std::once_flag once;
  std::call_once(once, [] {
    int key = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &key, nullptr) == MPI_SUCCESS)
      MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
  });
}

// Answers the questions waiting on every side channel (the watchdog thread, every 100 ms).
void serve_questions() {
  std::lock_guard<std::mutex> lock(g_side_mutex);
  if (g_finalizing) return;
  for (size_t i = 0; i < g_answers.size();) {
    int done = 0;
    MPI_Test(&g_answers[i].second, &done, MPI_STATUS_IGNORE);
    if (done) {
      g_answers[i] = g_answers.back();
      g_answers.pop_back();
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < g_controls.size();) {
    auto control = g_controls[i].lock();
    if (!control) {
      g_controls[i] = g_controls.back();
      g_controls.pop_back();
      continue;
    }
    ++i;
    for (;;) {
      int flag = 0;
      MPI_Message message;
      MPI_Status status;
      if (MPI_Improbe(MPI_ANY_SOURCE, kAskTag, *control, &flag, &message, &status) != MPI_SUCCESS || !flag)
        break;
      int64_t id = 0;
      MPI_Mrecv(&id, 1, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
      auto text = std::make_shared<std::string>(current_waits());
      MPI_Request req;
      if (MPI_Isend(text->data(), static_cast<int>(text->size()), MPI_CHAR, status.MPI_SOURCE,
                    kAnswerTag + static_cast<int>(id % 30000), *control, &req) == MPI_SUCCESS)
        g_answers.emplace_back(text, req);
    }
  }
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

namespace detail {

WaitNote::WaitNote(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_waits_mutex);
  m_id = ++g_next_wait;
  g_waits.emplace(m_id, text);
}

WaitNote::~WaitNote() {
  std::lock_guard<std::mutex> lock(g_waits_mutex);
  g_waits.erase(m_id);
}

std::string survey(MPI_Comm control, int self, int size) {
  if (size < 2 || control == MPI_COMM_NULL) return "";
  if (MPICommunicator::thread_level() < MPI_THREAD_MULTIPLE)
    return " (the other ranks cannot be asked what they wait for: MPI was initialised below "
           "MPI_THREAD_MULTIPLE)";
  static std::atomic<int64_t> next{0};
  auto id = std::make_shared<int64_t>(++next);
  int tag = kAnswerTag + static_cast<int>(*id % 30000);
  {
    std::lock_guard<std::mutex> lock(g_side_mutex);
    if (g_finalizing) return "";
    g_questions.push_back(id);  // a freed request may still read it
    for (int r = 0; r < size; ++r) {
      if (r == self) continue;
      MPI_Request req;
      if (MPI_Isend(id.get(), 1, MPI_INT64_T, r, kAskTag, control, &req) == MPI_SUCCESS)
        MPI_Request_free(&req);
    }
  }
  std::map<int, std::string> answers;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kSurveySeconds);
  while (static_cast<int>(answers.size()) < size - 1 && std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(g_side_mutex);
      if (g_finalizing) return "";
      int flag = 0;
      MPI_Message message;
      MPI_Status status;
      if (MPI_Improbe(MPI_ANY_SOURCE, tag, control, &flag, &message, &status) == MPI_SUCCESS && flag) {
        int bytes = 0;
        MPI_Get_count(&status, MPI_CHAR, &bytes);
        std::string text(static_cast<size_t>(std::max(bytes, 0)), '\0');
        MPI_Mrecv(text.data(), bytes, MPI_CHAR, &message, MPI_STATUS_IGNORE);
        answers[status.MPI_SOURCE] = text;
        continue;
      }
    }
    // Others ask this rank at the same moment; its watchdog may be the thread asking here.
    serve_questions();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string silent;
  std::ostringstream out;
  for (int r = 0; r < size; ++r)
    if (r != self && !answers.count(r)) silent += (silent.empty() ? "" : ",") + std::to_string(r);
  out << " Other ranks:";
  if (!silent.empty())
    out << (silent.find(',') == std::string::npos ? " rank " : " ranks ") << silent
        << " did not answer within " << kSurveySeconds
        << " s (stopped, killed, or stuck inside MPI);";
  for (const auto& [r, text] : answers) out << " rank " << r << " " << text << ";";
  return out.str();
}

}  // namespace detail

int MPICommunicator::thread_level() {
  static std::atomic<int> level{-1};
  int v = level.load();
  if (v < 0) {
    MPI_Query_thread(&v);
    level = v;
  }
  return v;
}

namespace {
std::atomic<int> g_calls_in_flight{0};  // below MPI_THREAD_MULTIPLE: distributed calls running
std::atomic<uint64_t> g_next_uid{0};

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
  }
}
void start_watchdog();
}  // namespace

std::shared_ptr<void> MPICommunicator::begin_call(const std::string& where) {
  int level = thread_level();
  if (level >= MPI_THREAD_MULTIPLE) return nullptr;
  if (g_calls_in_flight.fetch_add(1) > 0) {
    --g_calls_in_flight;
    throw DistributedError(
        where + ": another thread is running a distributed computation, and MPI was initialised "
                "with " + thread_level_name(level) +
        "; calls from several threads need MPI_THREAD_MULTIPLE (mpi4py's default: leave "
        "mpi4py.rc.thread_level alone; ngraph asks for it when it initialises MPI itself)");
  }
  return std::shared_ptr<void>(nullptr, [](void*) { --g_calls_in_flight; });
}

bool MPICommunicator::ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return false;
  int provided = 0;
  // MULTIPLE: computations may run in several threads at once (each on a communicator of
  // its own), and the watchdog thread answers other ranks' questions after a timeout.
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  g_we_initialized = true;
  std::atexit(finalize_if_ours);
  if (provided < MPI_THREAD_SERIALIZED)
    throw DistributedError(std::string("MPI provides thread level ") + thread_level_name(provided) +
                           ", ngraph needs at least MPI_THREAD_SERIALIZED (MPI_THREAD_MULTIPLE "
                           "for calls from several threads)");
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
  watch_finalize();
  thread_level();  // asked here, in a thread that may call MPI, and kept
  m_uid = ++g_next_uid;
  MPI_Comm_rank(comm, &m_rank);
  MPI_Comm_size(comm, &m_size);
  m_name = "MPI communicator (duplicate of " + (description.empty() ? std::string("a user communicator") : description) +
           ", size " + std::to_string(m_size) + ")";
  // Non-blocking duplicates polled with the deadline: a rank that never comes is an error.
  const std::string what = "[init] duplicating " + (description.empty() ? std::string("the communicator") : description);
  auto control = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  for (MPI_Comm* c : {&m_comm, control.get()}) {
    MPI_Request req;
    check(MPI_Comm_idup(comm, c, &req), what);
    int flag = 0;
    if (!poll_until(get_timeout(), [&] {
          check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), what);
          return flag != 0;
        }))
      throw DistributedError(what + ": rank " + std::to_string(m_rank) + " timed out after " +
                             timeout_text(get_timeout()) + " waiting for the other ranks");
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  }
  m_control = std::shared_ptr<MPI_Comm>(new MPI_Comm(*control), [](MPI_Comm* c) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && *c != MPI_COMM_NULL) MPI_Comm_free(c);
    delete c;
  });
  {
    std::lock_guard<std::mutex> lock(g_side_mutex);
    g_controls.push_back(m_control);
  }
  start_watchdog();
  agree_on_settings("[init] " + m_name);
}

MPICommunicator::MPICommunicator(Adopt, MPI_Comm comm, const MPICommunicator& parent, const std::string& name)
    : m_comm(comm), m_control(parent.m_control), m_rank(parent.m_rank), m_size(parent.m_size), m_name(name) {
  m_uid = ++g_next_uid;
  share_timeout_with(parent);
  MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN);
}

size_t MPICommunicator::get_all_checks_passed() const {
  std::lock_guard<std::mutex> lock(m_family->mutex);
  size_t n = get_checks_passed() + m_family->gone_checks;
  for (const auto& child : m_family->children)
    if (auto c = child.lock()) n += c->get_checks_passed();
  return n;
}

MPICommunicator::~MPICommunicator() {
  if (m_parent_family) {
    std::lock_guard<std::mutex> lock(m_parent_family->mutex);
    m_parent_family->gone_checks += get_checks_passed();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || is_broken()) return;
  for (MPI_Comm* c : {&m_topology.node, &m_topology.cross, &m_comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void MPICommunicator::mark_broken(const std::string& why) {
  std::lock_guard<std::mutex> lock(m_broken_mutex);
  if (m_broken.empty()) m_broken = why;
}

bool MPICommunicator::is_broken() const {
  std::lock_guard<std::mutex> lock(m_broken_mutex);
  return !m_broken.empty();
}

std::string MPICommunicator::broken_reason() const {
  std::lock_guard<std::mutex> lock(m_broken_mutex);
  return m_broken;
}

std::string MPICommunicator::timeout_message(const std::string& what, const std::string& waiting) const {
  // Still waiting, as far as the others are concerned: they time out about now and ask too.
  detail::WaitNote note(what + " (timed out " + waiting + ")");
  return what + ": rank " + std::to_string(m_rank) + " timed out after " +
         timeout_text(get_timeout()) + " " + waiting + "." +
         detail::survey(m_control ? *m_control : MPI_COMM_NULL, m_rank, m_size) +
         " (A rank failed, exited, stopped, or runs different collectives or computations; set "
         "the timeout with NGRAPH_DIST_TIMEOUT or ngraph.distributed.init.)";
}

void MPICommunicator::wait_request(MPI_Request& req, const std::string& what, MPI_Status* status) {
  int flag = 0;
  if (poll_until(
          get_timeout(),
          [&] {
            check(MPI_Test(&req, &flag, status), what);
            return flag != 0;
          },
          {}, [&] { return what + " on " + m_name; }))
    return;
  std::string msg = timeout_message(what, "waiting for the other ranks of " + m_name);
  mark_broken(msg);
  throw DistributedError(msg);
}

void MPICommunicator::wait_setup(MPI_Request& req, const std::string& what) { wait_request(req, what); }

void MPICommunicator::check_usable(const char* op) const {
  std::lock_guard<std::mutex> lock(m_broken_mutex);
  if (!m_broken.empty())
    throw DistributedError(std::string("[") + op + "] rank " + std::to_string(m_rank) +
                           ": the communicator is unusable after an earlier failure: " + m_broken);
}

// ------------------------------------------------------------------ settings agreement

namespace {
struct Setting {
  std::string name, value;
};

// The registry's settings marked `agree`, each with its value in effect on this rank.
std::vector<Setting> settings_that_must_agree() {
  std::vector<Setting> out;
  for (const auto& s : settings::all())
    if (s.agree) out.push_back({s.label.empty() ? s.name : s.label, settings::effective(s.name)});
  return out;
}
constexpr size_t kSettingBytes = 64;  // each value, NUL-terminated (longer ones are cut)
}  // namespace

void MPICommunicator::agree_on_settings(const std::string& where) {
  if (m_size < 2) return;
  auto mine = settings_that_must_agree();
  size_t block = mine.size() * kSettingBytes;
  std::vector<char> send(block, '\0'), recv(block * static_cast<size_t>(m_size), '\0');
  for (size_t i = 0; i < mine.size(); ++i)
    std::strncpy(send.data() + i * kSettingBytes, mine[i].value.c_str(), kSettingBytes - 1);
  MPI_Request req;
  const std::string what = where + ": comparing the settings that must agree";
  check(MPI_Iallgather(send.data(), static_cast<int>(block), MPI_CHAR, recv.data(), static_cast<int>(block),
                       MPI_CHAR, m_comm, &req),
        what);
  wait_setup(req, what);
  std::string differences;
  for (size_t i = 0; i < mine.size(); ++i) {
    std::map<std::string, std::vector<int>> values;
    for (int r = 0; r < m_size; ++r)
      values[std::string(recv.data() + static_cast<size_t>(r) * block + i * kSettingBytes)].push_back(r);
    if (values.size() < 2) continue;
    differences += " " + mine[i].name + " is";
    bool first = true;
    for (const auto& [value, ranks] : values) {
      differences += std::string(first ? " " : " but ") + value + " on rank" + (ranks.size() > 1 ? "s " : " ");
      for (size_t k = 0; k < ranks.size(); ++k) differences += (k ? "," : "") + std::to_string(ranks[k]);
      first = false;
    }
    differences += ";";
  }
  if (differences.empty()) return;
  throw DistributedError(where + ": settings that must be the same on every rank differ:" + differences +
                         " set them alike on every rank (mpirun -x NAME=value exports a variable "
                         "to every rank; see docs/distributed.md, Settings)");
}

// ------------------------------------------------------- communicators of computations

std::shared_ptr<Communicator> MPICommunicator::duplicate(const std::string& label, uint64_t identity) {
  std::lock_guard<std::mutex> lock(m_setup_mutex);
  check_usable("compile");
  const std::string what = "[compile] " + label + ": making its communicator";
  bool shm = m_size > 1 && shared_memory_enabled();
  if (shm) make_topology();
  uint64_t n = ++m_duplicates;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request req;
  check(MPI_Comm_idup(m_comm, &comm, &req), what);
  wait_setup(req, what);
  std::string name = "MPI communicator of " + label + " (computation #" + std::to_string(n) + " on " + m_name + ")";
  auto child = std::shared_ptr<MPICommunicator>(new MPICommunicator(Adopt{}, comm, *this, name));
  child->m_identity = identity ^ (n * 0x9E3779B97F4A7C15ull);
  child->m_label = "computation #" + std::to_string(n);
  if (shm && m_topology.made) {
    Topology& t = child->m_topology;
    t = m_topology;
    t.node = t.cross = MPI_COMM_NULL;
    // Its own node and cross-node communicators: another computation's shared-memory
    // allreduce between nodes must not match this one's.
    check(MPI_Comm_idup(m_topology.node, &t.node, &req), what);
    wait_setup(req, what);
    check(MPI_Comm_idup(m_topology.cross, &t.cross, &req), what);
    wait_setup(req, what);
    child->gather_creator(what);
  }
  child->agree_on_settings(what);
  child->m_parent_family = m_family;
  {
    std::lock_guard<std::mutex> family(m_family->mutex);
    auto& kids = m_family->children;
    kids.erase(std::remove_if(kids.begin(), kids.end(), [](const auto& k) { return k.expired(); }), kids.end());
    kids.push_back(child);
  }
  return child;
}


std::unique_ptr<Request> MPICommunicator::start_allreduce(const void* in, void* out, size_t count,
                                                          element::Type type, ReduceOp op) {
  check_usable("AllReduce");
  std::string what = describe("AllReduce", count, type) + " " + to_string(op);
  check_mean(op, type, "AllReduce");
  MPI_Request req;
  check(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, mpi_count(count, "AllReduce"),
                       mpi_type(type, "AllReduce"), mpi_op(op), m_comm, &req),
        what);
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
  struct Entry {
    std::chrono::steady_clock::time_point deadline;
    std::string message;
    const char* waiting;  // a literal: arming allocates nothing for it
    const MPICommunicator* comm;  // for the survey (armed only while its call runs)
  };
  uint64_t arm(double seconds, std::string message, const char* waiting, const MPICommunicator* comm) {
    auto deadline = deadline_after(seconds);
    std::lock_guard<std::mutex> lock(m_mutex);
    uint64_t id = ++m_next;
    m_armed.emplace(id, Entry{deadline, std::move(message), waiting, comm});
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
      if (MPICommunicator::thread_level() >= MPI_THREAD_MULTIPLE) serve_questions();
      std::string expired, waiting;
      const MPICommunicator* comm = nullptr;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        auto now = std::chrono::steady_clock::now();
        for (const auto& [id, entry] : m_armed)
          if (entry.deadline < now) {
            expired = entry.message;
            waiting = entry.waiting;
            comm = entry.comm;
            break;
          }
      }
      if (!expired.empty()) {
        // The stuck call holds the communicator alive; other ranks are asked (the blocking
        // MPI_Allreduce still runs in its thread) so every rank's message names the missing.
        if (comm) expired = comm->timeout_message(expired, waiting);
        std::fprintf(stderr, "[ngraph] %s; ending the job (MPI_Abort)\n", expired.c_str());
        std::fflush(stderr);
        // The other live ranks time out about now: let them print theirs before the abort.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        MPI_Abort(MPI_COMM_WORLD, 3);
        std::_Exit(3);
      }
    }
  }
  std::mutex m_mutex;
  std::map<uint64_t, Entry> m_armed;
  uint64_t m_next = 0;
  std::thread m_thread;
};

}  // namespace

namespace {
void start_watchdog() { Watchdog::get(); }
}  // namespace

namespace detail {
BlockingGuard::BlockingGuard(double seconds, std::string what, const char* waiting, const MPICommunicator* comm)
    : m_id(Watchdog::get().arm(seconds, std::move(what), waiting, comm)) {}
BlockingGuard::~BlockingGuard() { Watchdog::get().disarm(m_id); }
}  // namespace detail

void MPICommunicator::allreduce_guarded(const void* in, void* out, size_t count, element::Type type,
                                        ReduceOp op) {
  if (!get_abort_on_error()) {  // polled: a stall raises DistributedError instead
    allreduce(in, out, count, type, op);
    return;
  }
  check_usable("AllReduce");
  check_mean(op, type, "AllReduce");
  std::string what = describe("AllReduce", count, type) + " " + to_string(op);
  std::string waiting = what + " on " + m_name;
  detail::WaitNote note(waiting);  // for other ranks that ask after a timeout of theirs
  int err;
  {
    detail::BlockingGuard guard(get_timeout(), std::move(waiting), "in a blocking MPI_Allreduce", this);
    err = MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, mpi_count(count, "AllReduce"),
                        mpi_type(type, "AllReduce"), mpi_op(op), m_comm);
  }
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
