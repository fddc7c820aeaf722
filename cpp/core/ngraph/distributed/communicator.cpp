#include "ngraph/distributed/communicator.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "ngraph/settings.hpp"

namespace ngraph {
namespace distributed {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::prod: return "prod";
  }
  return "?";
}

ReduceOp reduce_op_from_string(const std::string& name) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "mean") return ReduceOp::mean;
  if (name == "max") return ReduceOp::max;
  if (name == "min") return ReduceOp::min;
  if (name == "prod") return ReduceOp::prod;
  throw std::invalid_argument("unknown reduce_op '" + name +
                              "' (expected sum, mean, max, min or prod)");
}

const char* to_string(Wire wire) {
  switch (wire) {
    case Wire::f32: return "none";
    case Wire::bf16: return "bf16";
    case Wire::fp16: return "fp16";
  }
  return "none";
}

Wire wire_from_string(const std::string& name) {
  if (name == "none") return Wire::f32;
  if (name == "bf16") return Wire::bf16;
  if (name == "fp16") return Wire::fp16;
  throw std::invalid_argument("unknown compression '" + name + "' (expected none, bf16 or fp16)");
}

namespace {
// The settings' default, or the error to raise when it is used: a bad value must not fail
// the library's loading.
struct CompressionState {
  DefaultCompression value;
  std::string error;
};
CompressionState initial_default_compression() {
  CompressionState c;
  std::string name = settings::text("NGRAPH_DIST_COMPRESSION");
  try {
    c.value.wire = wire_from_string(name);
  } catch (const std::invalid_argument&) {
    c.error = "NGRAPH_DIST_COMPRESSION is '" + name + "': expected none, bf16 or fp16";
  }
  c.value.error_feedback = c.value.wire != Wire::f32 && settings::flag("NGRAPH_DIST_ERROR_FEEDBACK");
  return c;
}
std::mutex g_compression_mutex;
CompressionState g_default_compression = initial_default_compression();
const bool g_compression_registered = [] {
  settings::set_effective("NGRAPH_DIST_COMPRESSION", [] {
    std::lock_guard<std::mutex> lock(g_compression_mutex);
    return g_default_compression.error.empty() ? std::string(to_string(g_default_compression.value.wire))
                                               : settings::text("NGRAPH_DIST_COMPRESSION");
  });
  settings::set_effective("NGRAPH_DIST_ERROR_FEEDBACK", [] {
    std::lock_guard<std::mutex> lock(g_compression_mutex);
    return std::string(g_default_compression.value.error_feedback ? "on" : "0 (off)");
  });
  return true;
}();
}  // namespace

DefaultCompression get_default_compression() {
  std::lock_guard<std::mutex> lock(g_compression_mutex);
  if (!g_default_compression.error.empty()) throw std::invalid_argument("[compression] " + g_default_compression.error);
  return g_default_compression.value;
}

void set_default_compression(DefaultCompression c) {
  if (c.error_feedback && c.wire == Wire::f32)
    throw std::invalid_argument("[compression] error_feedback needs a 16-bit compression (bf16 or fp16)");
  std::lock_guard<std::mutex> lock(g_compression_mutex);
  g_default_compression = {c, ""};
}

std::chrono::steady_clock::time_point deadline_after(double seconds) {
  using clock = std::chrono::steady_clock;
  auto now = clock::now();
  // What is left of the clock's range, in seconds (double: no overflow in the comparison).
  double room = std::chrono::duration<double>(clock::time_point::max() - now).count();
  if (!(seconds < room)) return clock::time_point::max();
  return now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

std::string timeout_text(double seconds) {
  if (std::isinf(seconds)) return "no limit";
  std::ostringstream out;
  out << seconds << " s";
  return out.str();
}

namespace {
double default_timeout() { return settings::real("NGRAPH_DIST_TIMEOUT"); }

// FNV-1a: the same on every rank, whatever the standard library.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class DoneRequest : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

Communicator::Communicator() : m_timeout(std::make_shared<std::atomic<double>>(default_timeout())) {}

void Communicator::set_timeout(double seconds) {
  if (!(seconds > 0)) throw std::invalid_argument("timeout must be > 0 seconds");
  m_timeout->store(seconds);
}

void Communicator::check_rank(int r, const char* what) const {
  if (r < 0 || r >= size())
    throw std::invalid_argument(std::string(what) + " rank " + std::to_string(r) +
                                " is out of range for a communicator of size " +
                                std::to_string(size()));
}

namespace {
// One rank's gathered signature: its computation line ("computation <identity> call <n>", a
// tab, "graph 'g' (computation #1), call #1"), then its collectives (description, node label).
struct RankSignature {
  std::string header;
  std::vector<std::pair<std::string, std::string>> collectives;
};

std::vector<RankSignature> parse_signatures(const std::vector<int64_t>& all, size_t words, int n) {
  std::vector<RankSignature> out(static_cast<size_t>(n));
  for (size_t r = 0; r < out.size(); ++r) {
    std::istringstream lines(std::string(reinterpret_cast<const char*>(all.data() + r * words)));
    std::string line;
    for (bool first = true; std::getline(lines, line); first = false) {
      auto tab = line.find('\t');
      std::string tail = tab == std::string::npos ? "" : line.substr(tab + 1);
      if (first) out[r].header = line.substr(0, tab) + "\t" + tail;
      else out[r].collectives.emplace_back(line.substr(0, tab), tail);
    }
  }
  return out;
}

// " rank 2 runs " / " ranks 0,1 run ".
void put_ranks(std::ostringstream& msg, const std::vector<int>& ranks) {
  msg << (ranks.size() == 1 ? " rank " : " ranks ");
  for (size_t k = 0; k < ranks.size(); ++k) msg << (k ? "," : "") << ranks[k];
  msg << (ranks.size() == 1 ? " runs " : " run ");
}

// The ranks grouped by what they run at collective #i.
std::map<std::string, std::vector<int>> group_at(const std::vector<RankSignature>& per_rank, size_t i) {
  std::map<std::string, std::vector<int>> groups;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const auto& c = per_rank[r].collectives;
    groups[i < c.size() ? c[i].first : std::string("(no collective)")].push_back(static_cast<int>(r));
  }
  return groups;
}

std::string difference_message(const std::vector<RankSignature>& per_rank,
                               const std::map<std::string, std::vector<int>>& groups, size_t i,
                               const std::string& where) {
  // The op, from the first rank that has a collective here.
  std::string op;
  for (size_t r = 0; r < per_rank.size() && op.empty(); ++r)
    if (i < per_rank[r].collectives.size()) {
      const std::string& desc = per_rank[r].collectives[i].first;
      op = desc.substr(0, desc.find(' '));
    }
  std::ostringstream msg;
  msg << "[" << (op.empty() ? "collective" : op) << "] ranks disagree on collective #" << i << " of "
      << where << ":";
  for (const auto& [desc, ranks] : groups) {
    put_ranks(msg, ranks);
    msg << desc;
    const auto& v = per_rank[static_cast<size_t>(ranks[0])].collectives;
    if (i < v.size() && !v[i].second.empty()) msg << " (" << v[i].second << ")";
    msg << ";";
  }
  msg << " every rank must run the same collectives in the same order";
  return msg.str();
}

// The message naming the first collective that some rank runs differently; empty when every
// rank runs the same ones.
std::string first_difference(const std::vector<RankSignature>& per_rank, const std::string& where) {
  size_t longest = 0;
  for (const auto& v : per_rank) longest = std::max(longest, v.collectives.size());
  for (size_t i = 0; i <= longest; ++i) {
    auto groups = group_at(per_rank, i);
    if (groups.size() > 1) return difference_message(per_rank, groups, i, where);
  }
  return "";
}

// The same collectives, but different computations (or calls of one).
std::string different_computations(const std::vector<RankSignature>& per_rank) {
  std::map<std::string, std::vector<int>> groups;
  for (size_t r = 0; r < per_rank.size(); ++r) groups[per_rank[r].header].push_back(static_cast<int>(r));
  std::ostringstream msg;
  msg << "[collective] ranks run different computations (or different calls of one) on one "
         "communicator:";
  for (const auto& [line, ranks] : groups) {
    put_ranks(msg, ranks);
    msg << line.substr(line.find('\t') + 1) << ";";
  }
  msg << " every rank must compile the same computations in the same order (compiling one "
         "with collectives is collective) and call them in the same order";
  return msg.str();
}
}  // namespace

void Communicator::agreement_allreduce(const int64_t* in, int64_t* out, size_t count, uint64_t call,
                                       const std::string& what) {
  (void)call;
  (void)what;
  allreduce(in, out, count, element::i64, ReduceOp::max);
}

void Communicator::check_same_collectives(const std::vector<std::string>& signature,
                                          const std::vector<std::string>& labels,
                                          const std::string& where) {
  int n = size();
  if (n == 1) return;
  // Which computation and which of its calls, then its collectives.
  uint64_t call = ++m_check_calls;
  std::string header = "computation " + std::to_string(m_identity) + " call " + std::to_string(call);
  std::string computation = where + (m_label.empty() ? "" : " (" + m_label + ")") + ", call #" +
                            std::to_string(call);
  std::string text = header + "\n";
  for (const auto& s : signature) text += s + "\n";
  // Cheap path: one allreduce of {h, -h} with max; all hashes agree iff max(h) == -max(-h).
  auto h = static_cast<int64_t>(fnv1a(text) >> 2);  // 62 bits: negation cannot overflow
  // The buffers belong to the communicator, not to this frame: a check abandoned by a
  // timeout leaves its MPI operation pending, and ranks that arrive late complete it.
  m_check_send.assign({h, -h});
  m_check_recv.assign(2, 0);
  agreement_allreduce(m_check_send.data(), m_check_recv.data(), 2, call, computation);
  if (m_check_recv[0] == -m_check_recv[1]) {
    ++m_checks_passed;
    return;
  }
  // They differ: gather everyone's signature (padded to the longest) and explain.
  std::string mine = header + "\t" + computation + "\n";
  for (size_t i = 0; i < signature.size(); ++i)
    mine += signature[i] + "\t" + (i < labels.size() ? labels[i] : "") + "\n";
  m_check_send.assign(1, static_cast<int64_t>(mine.size()));
  m_check_recv.assign(1, 0);
  allreduce(m_check_send.data(), m_check_recv.data(), 1, element::i64, ReduceOp::max);
  std::vector<char> padded(static_cast<size_t>(m_check_recv[0]) + 1, '\0');
  std::memcpy(padded.data(), mine.data(), mine.size());
  // Gather as i64 words to stay within the interface's types.
  size_t words = (padded.size() + 7) / 8;
  m_check_send.assign(words, 0);
  m_check_recv.assign(words * static_cast<size_t>(n), 0);
  std::memcpy(m_check_send.data(), padded.data(), padded.size());
  allgather(m_check_send.data(), m_check_recv.data(), words, element::i64);
  auto per_rank = parse_signatures(m_check_recv, words, n);
  std::string difference = first_difference(per_rank, where);
  throw DistributedError(difference.empty() ? different_computations(per_rank) : difference);
}

// ---------------------------------------------------------------------- blocking forms

void Communicator::staged(const void* in, size_t in_bytes, void* out, size_t out_bytes,
                          const std::function<std::unique_ptr<Request>(const void*, void*)>& start,
                          bool in_place) {
  if (size() == 1) {  // nothing can be left pending
    start(in, out)->wait();
    return;
  }
  auto in_stage = std::make_shared<std::vector<char>>(static_cast<const char*>(in),
                                                      static_cast<const char*>(in) + in_bytes);
  auto out_stage = in_place ? in_stage : std::make_shared<std::vector<char>>(out_bytes);
  auto request = start(in_stage->data(), out_stage->data());
  try {
    request->wait();
  } catch (...) {
    std::lock_guard<std::mutex> lock(m_abandoned_mutex);
    m_abandoned.push_back(in_stage);
    m_abandoned.push_back(out_stage);
    throw;
  }
  if (out && out_bytes) std::memcpy(out, out_stage->data(), out_bytes);
}

void Communicator::allreduce(const void* in, void* out, size_t count, element::Type type, ReduceOp op) {
  size_t bytes = count * type.size();
  staged(in, bytes, out, bytes, [&](const void* i, void* o) { return start_allreduce(i, o, count, type, op); });
}

void Communicator::broadcast(void* buffer, size_t count, element::Type type, int root) {
  size_t bytes = count * type.size();
  staged(buffer, bytes, buffer, bytes,
         [&](const void*, void* b) { return start_broadcast(b, count, type, root); }, true);
}

void Communicator::allgather(const void* in, void* out, size_t count, element::Type type) {
  size_t bytes = count * type.size();
  staged(in, bytes, out, bytes * static_cast<size_t>(size()),
         [&](const void* i, void* o) { return start_allgather(i, o, count, type); });
}

void Communicator::reduce_scatter(const void* in, void* out, size_t count, element::Type type,
                                  ReduceOp op) {
  size_t bytes = count * type.size();
  staged(in, bytes * static_cast<size_t>(size()), out, bytes,
         [&](const void* i, void* o) { return start_reduce_scatter(i, o, count, type, op); });
}

void Communicator::send(const void* buffer, size_t count, element::Type type, int dest, int tag) {
  staged(buffer, count * type.size(), nullptr, 0,
         [&](const void* b, void*) { return start_send(b, count, type, dest, tag); });
}

void Communicator::recv(void* buffer, size_t count, element::Type type, int source, int tag) {
  staged(nullptr, 0, buffer, count * type.size(),
         [&](const void*, void* b) { return start_recv(b, count, type, source, tag); });
}

// ------------------------------------------------------------------------------ local

namespace {
void copy(const void* in, void* out, size_t count, element::Type type) {
  if (in != out && count) std::memcpy(out, in, count * type.size());
}
}  // namespace

std::unique_ptr<Request> LocalCommunicator::start_allreduce(const void* in, void* out, size_t count,
                                                            element::Type type, ReduceOp) {
  copy(in, out, count, type);
  return std::make_unique<DoneRequest>();
}
std::unique_ptr<Request> LocalCommunicator::start_broadcast(void*, size_t, element::Type, int root) {
  check_rank(root, "broadcast root");
  return std::make_unique<DoneRequest>();
}
std::unique_ptr<Request> LocalCommunicator::start_allgather(const void* in, void* out, size_t count,
                                                            element::Type type) {
  copy(in, out, count, type);
  return std::make_unique<DoneRequest>();
}
std::unique_ptr<Request> LocalCommunicator::start_reduce_scatter(const void* in, void* out,
                                                                 size_t count, element::Type type,
                                                                 ReduceOp) {
  copy(in, out, count, type);
  return std::make_unique<DoneRequest>();
}
std::unique_ptr<Request> LocalCommunicator::start_send(const void*, size_t, element::Type, int dest,
                                                       int) {
  check_rank(dest, "send destination");
  throw DistributedError("[Send] a one-process communicator cannot send to itself");
}
std::unique_ptr<Request> LocalCommunicator::start_recv(void*, size_t, element::Type, int source, int) {
  check_rank(source, "recv source");
  throw DistributedError("[Recv] a one-process communicator cannot receive from itself");
}

// ---------------------------------------------------------------------------- default

namespace {
std::mutex g_mutex;
std::shared_ptr<Communicator> g_default;
// The MPI world's factory, set by ngraph_distributed's static initialiser. A function-local
// static is constructed on first use; a namespace-scope global would be safe only while this
// library happens to be initialised first (not so when linked statically), and
// AddressSanitizer's strict_init_order check reports it (tools/sanitize.sh).
std::function<std::shared_ptr<Communicator>()>& world_factory() {
  static std::function<std::shared_ptr<Communicator>()> factory;
  return factory;
}
}  // namespace

namespace {
CheckMode initial_check_mode() {
  std::string v = settings::text("NGRAPH_DIST_CHECK");
  if (v == "first") return CheckMode::first;
  if (v == "never") return CheckMode::never;
  return CheckMode::always;
}
CheckMode g_check_mode = initial_check_mode();
// The ranks must agree on the mode in effect, which init(check=...) may have replaced.
const bool g_check_mode_registered = [] {
  settings::set_effective("NGRAPH_DIST_CHECK", [] {
    CheckMode mode = get_check_mode();
    return std::string(mode == CheckMode::first ? "first" : mode == CheckMode::never ? "never" : "always");
  });
  return true;
}();
}  // namespace

CheckMode get_check_mode() { return g_check_mode; }
namespace {
std::atomic<bool> g_abort_on_error{true};
}
bool get_abort_on_error() { return g_abort_on_error; }
void set_abort_on_error(bool abort) { g_abort_on_error = abort; }
void set_check_mode(CheckMode mode) { g_check_mode = mode; }

bool shared_memory_enabled() { return settings::flag("NGRAPH_SHM"); }

bool launched_with_several_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE",
                          "SLURM_NTASKS"}) {
    if (auto v = settings::environment(var)) return std::atoi(v->c_str()) > 1;
  }
  return false;
}

std::shared_ptr<Communicator> get_default_communicator() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_default) {
    if (launched_with_several_ranks()) {
      if (!world_factory())
        throw DistributedError(
            "this process was started by an MPI launcher with several ranks, but ngraph's MPI "
            "library (libngraph_distributed, which needs Open MPI) is not loaded");
      g_default = world_factory()();
    } else {
      g_default = std::make_shared<LocalCommunicator>();
    }
  }
  return g_default;
}

void set_default_communicator(std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_default = std::move(comm);
}

void register_world_factory(std::function<std::shared_ptr<Communicator>()> factory) {
  std::lock_guard<std::mutex> lock(g_mutex);
  world_factory() = std::move(factory);
}

}  // namespace distributed
}  // namespace ngraph
