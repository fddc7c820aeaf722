#include "ngraph/distributed/mpi_communicator.hpp"

#include "ngraph/distributed/cross_node.hpp"

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
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
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
// progress: that is the rank the others name. A second question, asked while an agreement
// check waits (see MismatchWatch), has a structured answer: which agreement checks of this
// side channel's computations the rank waits in. Every answer starts with the question's id,
// so one that arrives too late is never taken for the answer to a later question.
constexpr int kAskTag = 1, kAnswerTag = 2;  // an answer's tag: kAnswerTag + question id % 30000
constexpr int kAskChecksTag = 32001;        // "which agreement checks do you wait in?"
constexpr int kVerdictTag = 32002;          // "your check waits for ranks in another one's"
constexpr double kSurveySeconds = 1.0;

std::mutex g_waits_mutex;
std::map<uint64_t, std::string> g_waits;  // this process's threads' current long waits
uint64_t g_next_wait = 0;

// The agreement checks this process's threads wait in (their allreduce), and per side channel
// and computation (identity) the checks entered so far; both under g_waits_mutex.
struct AgreementWait {
  const MPI_Comm* control;
  uint64_t identity, call;
  std::string description;  // "graph 'A' (computation #1), call #1"
  std::string verdict;      // another rank's finding that this wait cannot complete
};
std::map<uint64_t, AgreementWait> g_agreement_waits;
std::map<std::pair<const MPI_Comm*, uint64_t>, uint64_t> g_checks_entered;
std::atomic<int> g_calls_in_flight{0};  // distributed calls running in this process (begin_call)

std::mutex g_side_mutex;  // the side channels, the messages in flight, g_finalizing
std::vector<std::weak_ptr<MPI_Comm>> g_controls;
std::vector<std::pair<std::shared_ptr<void>, MPI_Request>> g_sends;  // with their buffers
bool g_finalizing = false;
std::atomic<int64_t> g_next_question{0};

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

// The answer about agreement checks: "calls <distributed calls in flight>", then "entered
// <identity> <checks>" per computation of this side channel, then "wait <identity> <call>
// <description>" per thread waiting in the allreduce of one's check.
std::string agreement_answer(const MPI_Comm* control) {
  std::lock_guard<std::mutex> lock(g_waits_mutex);
  std::ostringstream out;
  out << "calls " << g_calls_in_flight.load() << "\n";
  for (auto it = g_checks_entered.lower_bound({control, 0});
       it != g_checks_entered.end() && it->first.first == control; ++it)
    out << "entered " << it->first.second << " " << it->second << "\n";
  for (const auto& [id, w] : g_agreement_waits)
    if (w.control == control) out << "wait " << w.identity << " " << w.call << " " << w.description << "\n";
  return out.str();
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

// The side channel's messages, with g_side_mutex held. Sends do not wait: each buffer is
// kept until its send completes (complete_sends).
void send_text(std::shared_ptr<std::string> text, MPI_Comm control, int dest, int tag) {
  MPI_Request req;
  if (MPI_Isend(text->data(), static_cast<int>(text->size()), MPI_CHAR, dest, tag, control, &req) ==
      MPI_SUCCESS)
    g_sends.emplace_back(std::move(text), req);
}

void complete_sends() {
  for (size_t i = 0; i < g_sends.size();) {
    int done = 0;
    MPI_Test(&g_sends[i].second, &done, MPI_STATUS_IGNORE);
    if (done) {
      g_sends[i] = g_sends.back();
      g_sends.pop_back();
    } else {
      ++i;
    }
  }
}

// Takes one message with `tag` waiting on `control`, if any: its source and text.
bool receive_text(MPI_Comm control, int tag, int* source, std::string* text) {
  int flag = 0;
  MPI_Message message;
  MPI_Status status;
  if (MPI_Improbe(MPI_ANY_SOURCE, tag, control, &flag, &message, &status) != MPI_SUCCESS || !flag)
    return false;
  int bytes = 0;
  MPI_Get_count(&status, MPI_CHAR, &bytes);
  text->assign(static_cast<size_t>(std::max(bytes, 0)), '\0');
  MPI_Mrecv(text->data(), bytes, MPI_CHAR, &message, MPI_STATUS_IGNORE);
  *source = status.MPI_SOURCE;
  return true;
}

template <typename Answer>
void answer_questions(MPI_Comm control, int ask_tag, Answer answer) {
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, ask_tag, control, &flag, &message, &status) != MPI_SUCCESS || !flag)
      return;
    int64_t id = 0;
    MPI_Mrecv(&id, 1, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
    send_text(std::make_shared<std::string>(std::to_string(id) + "\n" + answer()), control,
              status.MPI_SOURCE, kAnswerTag + static_cast<int>(id % 30000));
  }
}

// A verdict ("<identity> <call>\n<identities>\n<message>") for a wait of this process: kept on
// that wait, which raises it (one for a wait that has ended is dropped).
void take_verdicts(const MPI_Comm* control) {
  int source = 0;
  std::string text;
  while (receive_text(*control, kVerdictTag, &source, &text)) {
    std::istringstream in(text);
    uint64_t identity = 0, call = 0;
    in >> identity >> call;
    in.ignore(1);
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::lock_guard<std::mutex> lock(g_waits_mutex);
    for (auto& [id, w] : g_agreement_waits)
      if (w.control == control && w.identity == identity && w.call == call && w.verdict.empty())
        w.verdict = rest;
  }
}

// Answers the questions waiting on every side channel (the watchdog thread, every 100 ms).
void serve_questions() {
  std::lock_guard<std::mutex> lock(g_side_mutex);
  if (g_finalizing) return;
  complete_sends();
  for (size_t i = 0; i < g_controls.size();) {
    auto control = g_controls[i].lock();
    if (!control) {
      g_controls[i] = g_controls.back();
      g_controls.pop_back();
      continue;
    }
    ++i;
    answer_questions(*control, kAskTag, [] { return current_waits(); });
    answer_questions(*control, kAskChecksTag, [&] { return agreement_answer(control.get()); });
    take_verdicts(control.get());
  }
}

// Asks every other rank question `ask_tag` on `control` and collects the answers for up to
// kSurveySeconds (rank -> text); nullopt once MPI is being finalised.
std::optional<std::map<int, std::string>> ask_all(MPI_Comm control, int self, int size, int ask_tag) {
  auto id = std::make_shared<int64_t>(++g_next_question);
  const std::string prefix = std::to_string(*id) + "\n";
  int tag = kAnswerTag + static_cast<int>(*id % 30000);
  {
    std::lock_guard<std::mutex> lock(g_side_mutex);
    if (g_finalizing) return std::nullopt;
    for (int r = 0; r < size; ++r) {
      MPI_Request req;
      if (r != self && MPI_Isend(id.get(), 1, MPI_INT64_T, r, ask_tag, control, &req) == MPI_SUCCESS)
        g_sends.emplace_back(id, req);
    }
  }
  std::map<int, std::string> answers;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kSurveySeconds);
  while (static_cast<int>(answers.size()) < size - 1 && std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(g_side_mutex);
      if (g_finalizing) return std::nullopt;
      int source = 0;
      std::string text;
      if (receive_text(control, tag, &source, &text)) {
        // One for an earlier question of the same tag (it came too late) is dropped.
        if (text.compare(0, prefix.size(), prefix) == 0) answers[source] = text.substr(prefix.size());
        continue;
      }
    }
    // Others ask this rank at the same moment; its watchdog may be the thread asking here.
    serve_questions();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return answers;
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

// --------------------------------------------- ranks waiting in different computations' checks
//
// Each computation has a communicator of its own, so ranks that call different computations
// wait in the agreement checks of different communicators, and neither check can complete.
// A check that waits longer than kCheckGrace asks the other ranks, on the side channel, which
// checks they wait in. It concludes that they cannot meet when every other rank answers and,
// for this rank and some other: each process has exactly one distributed call in flight (no
// other thread there can be about to start the matching call), and each waits in a check the
// other has not entered; and when the same is found again kCheckRecheck later (a rank that is
// merely arriving changes the picture by then). It then tells every rank waiting in a check
// on this side channel (kVerdictTag), and all of them raise the same DistributedError.
constexpr double kCheckGrace = 1.0, kCheckRecheck = 0.5;
constexpr auto kVerdictPoll = std::chrono::milliseconds(50);

struct CheckWait {
  uint64_t identity = 0, call = 0;
  std::string description;
};

// A rank's answer (agreement_answer) read back.
struct ChecksAnswer {
  long calls = -1;
  std::map<uint64_t, uint64_t> entered;  // identity -> checks entered
  std::vector<CheckWait> waits;
  uint64_t entered_of(uint64_t identity) const {
    auto it = entered.find(identity);
    return it == entered.end() ? 0 : it->second;
  }
};

ChecksAnswer parse_checks_answer(const std::string& text) {
  ChecksAnswer a;
  std::istringstream lines(text);
  std::string line, kind;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    in >> kind;
    if (kind == "calls") {
      in >> a.calls;
    } else if (kind == "entered") {
      uint64_t identity = 0, checks = 0;
      in >> identity >> checks;
      a.entered[identity] = checks;
    } else if (kind == "wait") {
      CheckWait w;
      in >> w.identity >> w.call;
      in.ignore(1);
      std::getline(in, w.description);
      a.waits.push_back(std::move(w));
    }
  }
  return a;
}

// Every rank's waits as one line, when this rank and at least one other cannot meet (see
// above); empty otherwise.
std::string stuck_key(const std::map<int, ChecksAnswer>& answers, int self, const CheckWait& mine) {
  const ChecksAnswer& me = answers.at(self);
  if (me.calls != 1 || me.waits.size() != 1) return "";
  bool stuck = false;
  std::ostringstream key;
  for (const auto& [r, a] : answers) {
    for (const auto& w : a.waits) key << r << ':' << w.identity << ':' << w.call << ' ';
    if (r == self || a.calls != 1 || a.waits.size() != 1) continue;
    const CheckWait& w = a.waits[0];
    stuck = stuck || (w.identity != mine.identity && me.entered_of(w.identity) < w.call &&
                      a.entered_of(mine.identity) < mine.call);
  }
  return stuck ? key.str() : "";
}

std::string stuck_message(const std::map<int, ChecksAnswer>& answers, int self, double waited) {
  std::map<std::string, std::vector<int>> groups;
  for (const auto& [r, a] : answers) {
    std::string where;
    for (const auto& w : a.waits) where += (where.empty() ? "" : " and in ") + w.description;
    groups[where].push_back(r);
  }
  std::ostringstream msg;
  msg << "[collective] ranks wait in the agreement checks of different computations, on "
         "different communicators, so none can complete:";
  for (const auto& [where, ranks] : groups) {
    bool one = ranks.size() == 1;
    msg << (one ? " rank " : " ranks ");
    for (size_t k = 0; k < ranks.size(); ++k) msg << (k ? "," : "") << ranks[k];
    if (where.empty()) msg << (one ? " is" : " are") << " in no agreement check;";
    else msg << (one ? " waits in " : " wait in ") << where << ";";
  }
  msg.setf(std::ios::fixed);
  msg.precision(1);
  msg << " every rank must call the same computations in the same order (found by rank " << self
      << " after " << waited << " s; the communicators of these computations are unusable now)";
  return msg.str();
}

// This thread's wait in an agreement check, for the answers (agreement_answer).
class AgreementWaitEntry {
 public:
  AgreementWaitEntry(const MPI_Comm* control, const CheckWait& wait) {
    std::lock_guard<std::mutex> lock(g_waits_mutex);
    m_id = ++g_next_wait;
    g_agreement_waits.emplace(m_id, AgreementWait{control, wait.identity, wait.call, wait.description, ""});
    uint64_t& entered = g_checks_entered[{control, wait.identity}];
    entered = std::max(entered, wait.call);
  }
  ~AgreementWaitEntry() {
    std::lock_guard<std::mutex> lock(g_waits_mutex);
    g_agreement_waits.erase(m_id);
  }
  AgreementWaitEntry(const AgreementWaitEntry&) = delete;
  AgreementWaitEntry& operator=(const AgreementWaitEntry&) = delete;
  uint64_t id() const { return m_id; }

 private:
  uint64_t m_id;
};

// Watches one agreement check's wait (see above): found() is polled with the allreduce.
class MismatchWatch {
 public:
  // `timeout`: the wait's; no look (up to kSurveySeconds) starts that would outlast it.
  MismatchWatch(const MPI_Comm* control, int rank, int size, CheckWait mine, uint64_t wait_id, double timeout)
      : m_control(control), m_rank(rank), m_size(size), m_mine(std::move(mine)), m_wait_id(wait_id),
        m_start(std::chrono::steady_clock::now()), m_last_look(deadline_after(timeout - kSurveySeconds)) {
    m_next_poll = m_start + kVerdictPoll;
    m_next_look = m_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(kCheckGrace));
  }
  // True once this rank or another found that the ranks wait in checks that cannot meet.
  bool found();
  const std::string& message() const { return m_message; }
  // The computations whose checks the ranks wait in.
  const std::set<uint64_t>& identities() const { return m_identities; }

 private:
  bool take_verdict();
  void look();
  void conclude(const std::map<int, ChecksAnswer>& answers);
  const MPI_Comm* m_control;
  int m_rank, m_size;
  CheckWait m_mine;
  uint64_t m_wait_id;
  std::chrono::steady_clock::time_point m_start, m_last_look, m_next_poll, m_next_look;
  std::string m_seen, m_message;  // m_seen: what the last look found (stuck_key)
  std::set<uint64_t> m_identities;
};

bool MismatchWatch::found() {
  if (!m_message.empty()) return true;
  auto now = std::chrono::steady_clock::now();
  if (now < m_next_poll) return false;
  m_next_poll = now + kVerdictPoll;
  // A verdict (taken by the watchdog, or below) may come before this rank's own grace ends:
  // it arrived late, in a check that the others already found waiting with theirs.
  if (take_verdict()) return true;
  if (now >= m_next_look && now < m_last_look) {
    serve_questions();  // answers the others' questions and takes their verdicts
    if (take_verdict()) return true;
    look();
    m_next_look = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(kCheckRecheck));
  }
  return !m_message.empty();
}

bool MismatchWatch::take_verdict() {
  std::string verdict;
  {
    std::lock_guard<std::mutex> lock(g_waits_mutex);
    auto it = g_agreement_waits.find(m_wait_id);
    if (it != g_agreement_waits.end()) verdict = it->second.verdict;
  }
  if (verdict.empty()) return false;
  auto newline = verdict.find('\n');
  std::istringstream identities(verdict.substr(0, newline));
  for (uint64_t identity = 0; identities >> identity;) m_identities.insert(identity);
  m_message = newline == std::string::npos ? verdict : verdict.substr(newline + 1);
  return true;
}

void MismatchWatch::look() {
  auto texts = ask_all(*m_control, m_rank, m_size, kAskChecksTag);
  std::string key;
  if (texts && static_cast<int>(texts->size()) == m_size - 1) {
    std::map<int, ChecksAnswer> answers;
    for (const auto& [r, text] : *texts) answers[r] = parse_checks_answer(text);
    answers[m_rank] = parse_checks_answer(agreement_answer(m_control));
    key = stuck_key(answers, m_rank, m_mine);
    if (!key.empty() && key == m_seen) conclude(answers);
  }
  m_seen = key;
}

void MismatchWatch::conclude(const std::map<int, ChecksAnswer>& answers) {
  m_message = stuck_message(answers, m_rank,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count());
  std::string identities;
  for (const auto& [r, a] : answers)
    for (const auto& w : a.waits)
      if (m_identities.insert(w.identity).second) identities += std::to_string(w.identity) + " ";
  std::lock_guard<std::mutex> lock(g_side_mutex);
  if (g_finalizing) return;
  for (const auto& [r, a] : answers)
    for (const auto& w : a.waits)
      if (r != m_rank)
        send_text(std::make_shared<std::string>(std::to_string(w.identity) + " " + std::to_string(w.call) +
                                                "\n" + identities + "\n" + m_message),
                  *m_control, r, kVerdictTag);
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
  auto asked = ask_all(control, self, size, kAskTag);
  if (!asked) return "";
  const std::map<int, std::string>& answers = *asked;
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
  // Counted at every thread level: an agreement check concludes that ranks wait in different
  // computations only where one call is in flight (no other thread can be about to start the
  // matching one).
  int level = thread_level();
  if (g_calls_in_flight.fetch_add(1) > 0 && level < MPI_THREAD_MULTIPLE) {
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
  if (m_control) {
    std::lock_guard<std::mutex> lock(g_waits_mutex);
    g_checks_entered.erase({m_control.get(), m_identity});
  }
  if (m_parent_family) {
    std::lock_guard<std::mutex> lock(m_parent_family->mutex);
    m_parent_family->gone_checks += get_checks_passed();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After a failure MPI may still write into the exchange's buffers: they stay allocated.
  if (is_broken()) (void)m_exchange.release();
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

void MPICommunicator::agreement_allreduce(const int64_t* in, int64_t* out, size_t count, uint64_t call,
                                          const std::string& what) {
  if (m_size < 2 || !m_control || thread_level() < MPI_THREAD_MULTIPLE) {
    // The other ranks cannot be asked (see survey): the wait is bounded by the timeout only.
    Communicator::agreement_allreduce(in, out, count, call, what);
    return;
  }
  check_usable("AllReduce");
  // MPI may still use these after a wait that was given up (as Communicator::staged keeps).
  auto stage = std::make_shared<std::vector<int64_t>>(2 * count);
  std::copy(in, in + count, stage->begin());
  CheckWait mine{m_identity, call, what};
  AgreementWaitEntry entry(m_control.get(), mine);
  auto op = [count] { return describe("AllReduce", count, element::i64) + " max"; };
  auto request = start_allreduce(stage->data(), stage->data() + count, count, element::i64, ReduceOp::max);
  MismatchWatch watch(m_control.get(), m_rank, m_size, std::move(mine), entry.id(), get_timeout());
  bool ended = poll_until(
      get_timeout(), [&] { return request->test() || watch.found(); }, {},
      [&] { return op() + " on " + m_name; });
  if (ended && watch.message().empty()) {
    std::copy(stage->begin() + static_cast<std::ptrdiff_t>(count), stage->end(), out);
    return;
  }
  m_abandoned_checks.push_back(stage);
  if (!ended) {
    std::string msg = timeout_message(op(), "waiting for the other ranks of " + m_name);
    mark_broken(msg);
    throw DistributedError(msg);
  }
  break_computations(watch.identities(), watch.message());
  throw DistributedError(watch.message());
}

void MPICommunicator::break_computations(const std::set<uint64_t>& identities, const std::string& why) {
  mark_broken(why);
  // Their checks' allreduces stay pending on some ranks: a later call of one on any rank
  // would pair up with them, so every rank marks them all.
  std::vector<std::shared_ptr<MPICommunicator>> involved;
  {
    const auto& family = m_parent_family ? m_parent_family : m_family;
    std::lock_guard<std::mutex> lock(family->mutex);
    for (const auto& child : family->children)
      if (auto c = child.lock(); c && identities.count(c->m_identity)) involved.push_back(c);
  }
  for (const auto& c : involved) c->mark_broken(why);
}

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

bool MPICommunicator::shares_one_node() const {
  // local_size == size on every rank or on none (a node count would differ between ranks on
  // nodes of different sizes).
  return m_topology.made && m_topology.local_size == m_size && shared_memory_enabled();
}

void MPICommunicator::allreduce_compressed(const void* in, void* out, size_t count, element::Type type,
                                           ReduceOp op, const Compression& c) {
  bool sum = op == ReduceOp::sum || op == ReduceOp::mean;
  if (c.wire == Wire::f32 || type != element::f32 || !sum || m_size < 2 || shares_one_node()) {
    allreduce(in, out, count, type, op);
    return;
  }
  check_usable("AllReduce");
  std::string what = describe("AllReduce", count, type) + " " + to_string(op) + " sent as " + to_string(c.wire);
  if (!m_exchange) m_exchange = std::make_unique<CrossNodeExchange>(*this, m_comm);
  float* data = static_cast<float*>(out);
  if (in != out && count) std::memcpy(out, in, count * sizeof(float));
  float* residual = nullptr;
  if (c.residual) {
    size_t need = m_exchange->residual_count(count);
    if (c.residual->size() != need) c.residual->assign(need, 0.0f);
    residual = c.residual->data();
  }
  m_exchange->allreduce_sum(data, count, c.wire, what, residual);
  if (op == ReduceOp::mean) scale<float>(out, count, 1.0 / m_size);
}

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
