#include "ngraph/settings.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace ngraph {
namespace settings {

namespace {

const char* const kEachCompile = "each compile";

// Appends a setting to `table`; the caller sets its other fields on the result.
Setting& add(std::vector<Setting>& table, const char* name, Type type, const char* default_value,
             const char* read, bool agree, const char* doc) {
  table.emplace_back();
  Setting& s = table.back();
  s.name = name;
  s.type = type;
  s.default_value = default_value;
  s.read = read;
  s.agree = agree;
  s.doc = doc;
  return s;
}

// First the settings the ranks must agree on (the agreement check compares them in this order).
void add_distributed(std::vector<Setting>& t) {
  add(t, "NGRAPH_SHM", Type::flag, "1", "each compile of a distributed computation, each shared-memory region",
      true, "shared memory for the collectives of the ranks on one node; 0: MPI only (as between hosts)");
  add(t, "NGRAPH_SHM_NODE_SIZE", Type::integer, "0", "a communicator's node topology (its first shared-memory set-up)",
      true,
      "k > 0 treats every k consecutive ranks as a node (to test the multi-node path on one machine); otherwise "
      "a node is the ranks that share memory");
  add(t, "NGRAPH_SHM_SHARDED_UPDATE", Type::flag, "1", kEachCompile, true,
      "with shared memory, each rank of a node updates its piece of the variables after the fused allreduce; 0: "
      "every rank updates all of them");
  add(t, "NGRAPH_SHM_SHARDED_ACROSS_NODES", Type::flag, "1", kEachCompile, true,
      "the sharded update also runs across nodes (each rank updates its 1/N share; the weights' shares are gathered "
      "back, the optimizer state's stay with their owners: gather them with ng.checkpoint.consolidate on every "
      "rank); 0: across nodes every rank updates all its variables");
  add(t, "NGRAPH_SHM_SHARDED_COMPRESSED", Type::flag, "0", kEachCompile, true,
      "with a bf16 or fp16 gradient exchange, the sharded update also runs across nodes (with "
      "NGRAPH_SHM_SHARDED_ACROSS_NODES): 16-bit reduce-scatter of the gradients, f32 allgather of the weights, "
      "1.5x the bytes of the compressed allreduce for 1/N of the optimizer state per rank (not with error feedback "
      "when a member of the fused gradients is reduced whole: that update stays unsharded across nodes); 0: a "
      "compressed exchange runs the update unsharded across nodes");
  Setting& check = add(t, "NGRAPH_DIST_CHECK", Type::choice, "always",
                       "load of the library, once per process; ngraph.distributed.init(check=...) replaces it", true,
                       "when the ranks check that they run the same collectives: before every call, the first call "
                       "of each computation, or never (another value: always)");
  check.choices = {"always", "first", "never"};
  check.label = "the check mode (NGRAPH_DIST_CHECK, ngraph.distributed.init(check=...))";
  Setting& compression =
      add(t, "NGRAPH_DIST_COMPRESSION", Type::choice, "none",
          "load of the library, once per process; ngraph.distributed.init(compression=...) replaces it", true,
          "the default compression of f32 sum and mean allreduces (ngraph.allreduce(compression=None)): values "
          "on the network step in bfloat16 or IEEE half, summed in f32; never in shared memory (another value is "
          "an error when a default is needed)");
  compression.choices = {"none", "bf16", "fp16"};
  compression.label = "the default compression (NGRAPH_DIST_COMPRESSION, ngraph.distributed.init(compression=...))";
  add(t, "NGRAPH_DIST_ERROR_FEEDBACK", Type::flag, "0",
      "load of the library, once per process; ngraph.distributed.init(error_feedback=...) replaces it", true,
      "with a default compression, each rank carries the rounding error of what it sent into its next send")
      .label = "the default error feedback (NGRAPH_DIST_ERROR_FEEDBACK, ngraph.distributed.init(error_feedback=...))";
  add(t, "NGRAPH_DIST_TIMEOUT", Type::real, "60",
      "each communicator's creation; ngraph.distributed.init(timeout=...) replaces it", false,
      "seconds a rank waits for the others (collectives, set-up) before it raises DistributedError; inf: no limit")
      .positive = true;
  Setting& backend = add(
      t, "NGRAPH_DIST_BACKEND", Type::choice, "mpi",
      "Python: ngraph.distributed.init and backend(); C++ (a oneCCL build): the default communicator's creation",
      false,
      "the backend of MPI communicators: Open MPI or oneCCL (built with -DNGRAPH_DISTRIBUTED='mpi;ccl'); Python "
      "refuses another value, C++ reads it as mpi");
  backend.choices = {"mpi", "ccl"};
  backend.owner = Owner::both;
}

void add_cpu(std::vector<Setting>& t) {
  add(t, "NGRAPH_CPU_FUSION", Type::flag, "1", kEachCompile, true,
      "fused CPU kernels and fused gradient allreduces; 0: off, for comparisons");
  add(t, "NGRAPH_FUSION_THRESHOLD", Type::integer, "67108864", kEachCompile, true,
      "bytes of gradients per fused allreduce (a bucket)");
  add(t, "NGRAPH_PRECISION", Type::choice, "f32", "each compile; Runtime.computation(precision=...) replaces it", true,
      "the default precision of computations: f32, or bf16 (mixed precision: convolutions and matrix products "
      "read bf16 and accumulate in f32 where the CPU has bf16 instructions; another value is an error)")
      .choices = {"f32", "bf16"};
  add(t, "NGRAPH_CPU_VARIABLE_LAYOUTS", Type::flag, "1", kEachCompile, false,
      "f32 variables stay in the layout their first reader wants (a convolution's blocked weights) between "
      "calls; 0: row-major (set 0 on every rank where the ranks' CPUs differ)");
  add(t, "NGRAPH_CPU_CAST_PAIRS", Type::flag, "1", kEachCompile, false,
      "bf16: a convolution's weights cast to the forward's and the backward data's layouts in one pass (read "
      "once, the backward data's copy held from the forward on); 0: two casts, for comparisons");
  add(t, "NGRAPH_CPU_POOL", Type::choice, "own", kEachCompile, false,
      "max pooling by ngraph's loops or by oneDNN (dnnl: pools no longer store bf16 under "
      "precision=\"bf16\"; another value is an error)")
      .choices = {"own", "dnnl"};
  add(t, "NGRAPH_CPU_ISA", Type::choice, "auto", "first use, once per process", false,
      "auto: the AVX2 and FMA twins of ngraph's loops on CPUs that have them (and the AVX-512 twins where the CPU "
      "has AVX-512); avx2: the AVX2 twins, never the AVX-512 ones; baseline: the portable loops only, for "
      "comparisons (in any case; another value: auto). ngraph's bf16 kernels without a twin (casts to blocked "
      "layouts, filter-gradient tiles) follow oneDNN's instruction set, as the bf16 path does: with "
      "ONEDNN_MAX_CPU_ISA=AVX2 and avx2, a portable build runs on an AVX-512 CPU the code an AVX2 CPU runs")
      .choices = {"auto", "avx2", "baseline"};
  add(t, "NGRAPH_NUM_THREADS", Type::integer, "0", "first use, once per process; ngraph.set_num_threads replaces it",
      false,
      "threads of each rank's kernels; default: $OMP_NUM_THREADS, else the node's cores divided by its ranks")
      .positive = true;
  add(t, "NGRAPH_CHECK_NUMERICS", Type::flag, "0",
      "load of the library, once per process; ngraph.set_check_numerics replaces it", false,
      "check every kernel output, argument and variable of floating type for NaN and Inf");
}

void add_python(std::vector<Setting>& t) {
  add(t, "NGRAPH_TIMELINE", Type::text, "", "Python: import ngraph", false,
      "a path: record the timeline from import and write it there at exit (with several ranks rank 0 writes "
      "every rank's events)")
      .owner = Owner::python;
  add(t, "NGRAPH_ELASTIC_CHECKPOINT_DIR", Type::text, "", "Python: each ngraph.elastic call", false,
      "where an elastic job checkpoints (set by python -m ngraph.launch); set, the job checkpoints and stops on "
      "SIGUSR1/SIGTERM")
      .owner = Owner::python;
  add(t, "NGRAPH_ELASTIC_RESTART", Type::integer, "0", "Python: ngraph.elastic.restart()", false,
      "how many times python -m ngraph.launch relaunched the job (another value than an integer >= 0 is an "
      "error)")
      .owner = Owner::python;
}

std::vector<Setting> make_registry() {
  std::vector<Setting> table;
  add_distributed(table);
  add_cpu(table);
  add_python(table);
  return table;
}

struct Registry {
  std::vector<Setting> table = make_registry();
  std::map<std::string, size_t> index;
  std::mutex mutex;  // readers of effective values
  std::map<std::string, std::function<std::string()>> effective;
  Registry() {
    for (size_t i = 0; i < table.size(); ++i) index.emplace(table[i].name, i);
  }
};

// Built on first use (settings are read during static initialisation: the check mode) and never
// destroyed (nor read after its destruction by code that runs at exit).
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

const Setting& typed(const std::string& name, Type type, const char* getter) {
  const Setting& s = find(name);
  bool ok = s.type == type || (type == Type::text && s.type == Type::choice);
  if (!ok)
    throw std::logic_error(std::string("[settings] ") + name + " is a setting of type " + to_string(s.type) +
                           ", not read with settings::" + getter);
  return s;
}

// The environment's value, or the default when it is unset or empty.
std::string raw_or_default(const Setting& s) {
  const char* v = std::getenv(s.name.c_str());
  return v && *v ? std::string(v) : s.default_value;
}

bool parse_flag(const std::string& v) { return v != "0"; }

long long parse_integer(const Setting& s, const std::string& v) {
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || (s.positive && n <= 0)) return std::strtoll(s.default_value.c_str(), nullptr, 10);
  return n;
}

double parse_real(const Setting& s, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || (s.positive && !(x > 0))) return std::strtod(s.default_value.c_str(), nullptr);
  return x;
}

}  // namespace

const std::vector<Setting>& all() { return registry().table; }

const Setting& find(const std::string& name) {
  const Registry& r = registry();
  auto it = r.index.find(name);
  if (it == r.index.end())
    throw std::logic_error("[settings] " + name + " is not a registered setting (cpp/core/ngraph/settings.cpp)");
  return r.table[it->second];
}

bool flag(const std::string& name) { return parse_flag(raw_or_default(typed(name, Type::flag, "flag"))); }

long long integer(const std::string& name) {
  const Setting& s = typed(name, Type::integer, "integer");
  return parse_integer(s, raw_or_default(s));
}

double real(const std::string& name) {
  const Setting& s = typed(name, Type::real, "real");
  return parse_real(s, raw_or_default(s));
}

std::string text(const std::string& name) { return raw_or_default(typed(name, Type::text, "text")); }

std::optional<std::string> value(const std::string& name) {
  const char* v = std::getenv(find(name).name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> environment(const std::string& name) {
  if (name.rfind("NGRAPH_", 0) == 0)
    throw std::logic_error("[settings] " + name +
                           " is ngraph's setting: read it with its typed getter (settings::flag, ...)");
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string effective(const std::string& name) {
  const Setting& s = find(name);
  std::function<std::string()> reader;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.effective.find(name);
    if (it != r.effective.end()) reader = it->second;
  }
  if (reader) return reader();
  std::string v = raw_or_default(s);
  switch (s.type) {
    case Type::flag: return parse_flag(v) ? "on" : "0 (off)";
    case Type::integer: return std::to_string(parse_integer(s, v));
    case Type::real: {
      std::ostringstream out;
      out << parse_real(s, v);
      return out.str();
    }
    case Type::text:
    case Type::choice: break;
  }
  return v;
}

void set_effective(const std::string& name, std::function<std::string()> reader) {
  find(name);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.effective[name] = std::move(reader);
}

const char* to_string(Type type) {
  switch (type) {
    case Type::flag: return "flag";
    case Type::integer: return "integer";
    case Type::real: return "real";
    case Type::text: return "text";
    case Type::choice: return "choice";
  }
  return "?";
}

const char* to_string(Owner owner) {
  switch (owner) {
    case Owner::cpp: return "C++";
    case Owner::python: return "Python";
    case Owner::both: return "C++ and Python";
  }
  return "?";
}

}  // namespace settings
}  // namespace ngraph
