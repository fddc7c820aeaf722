#include "ngraph/runtime/cpu/cpu_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdlib>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
void apply_num_threads();
}  // namespace

CPUExecutable::CPUExecutable(std::shared_ptr<Function> function, const CompileOptions& options) {
  ExecutionPlan plan = pass::build_plan(function, options, m_call);
  m_function = plan.function;
  m_parameters = m_function->get_parameters();
  m_results = m_function->get_results();
  m_distributed = std::move(plan.distributed);
  m_distributed.set_where("graph '" + (m_function->get_name().empty() ? std::string("unnamed") : m_function->get_name()) +
                          "'");
  m_sharing = std::make_unique<NodeSharing>(plan);
  m_program = std::make_unique<Program>(plan);
  m_runner = std::make_unique<Runner>(*m_program, m_call);
  summarise(plan);
}

CPUExecutable::~CPUExecutable() = default;

void CPUExecutable::summarise(const ExecutionPlan& plan) {
  size_t elements = 0;
  bool communicates = false;
  for (const auto& step : plan.steps) {
    for (const auto& out : step.node->outputs()) elements += plan.desc(out).elements();
    communicates = communicates || dynamic_cast<op::Collective*>(step.node.get()) != nullptr;
  }
  m_lightweight = !communicates && elements <= (1u << 14);
  m_unshared_bytes = plan.unshared_bytes;
  m_assignments = plan.assignments;
  m_reorders = plan.reorders;
  m_precision.requested = precision_name(plan.options.precision);
  m_precision.runs = plan.casts ? "bf16" : "f32";
  m_precision.fused_casts = plan.fused_casts;
  m_precision.bf16_values = plan.bf16_values;
  for (const auto& step : plan.steps)
    m_precision.casts += step.node->get_type_name() == std::string(PrecisionCast::type_name) ? 1
                         : step.node->get_type_name() == std::string(PrecisionCastPair::type_name) ? 2
                                                                                                   : 0;
}

// One call: the collectives' protocol (one call at a time where MPI needs it, the agreement
// check), the shared-memory regions made in the first checked call, the ranks' decision to
// run the sharded updates, then the steps of that kind, and the results and updates.
void CPUExecutable::call_raw(void* const* outputs, const void* const* inputs) {
  std::lock_guard<std::mutex> lock(m_mutex);
  // An optimizer state that another computation's sharded update left in shares is not whole
  // here: a computation with collectives (which every rank calls) gathers it first, before its
  // own collectives (the same on every rank: the ranks ran the same calls); one without refuses.
  for (const auto& [state, layout] : m_program->variables())
    if (state->is_scattered() && !m_sharing->holds_shares_of(state)) {
      if (m_distributed.empty())
        throw std::runtime_error(state->scattered_why() + " (read by " + m_distributed.where() + ")");
      state->gather();
    }
  auto started = m_distributed.begin();
  apply_num_threads();
  m_program->lay_out_variables();
  if (started.verified) m_sharing->set_up();
  unsigned bits = instrumentation();
  m_call.reset(started.verified);
  m_last_sharded = false;
  const std::string& where = m_distributed.where();
  try {
    m_last_sharded = started.verified && m_sharing->decide(bits & check_numerics_bit, where);
    m_sharing->keep_private(m_program->updated(), m_last_sharded);
    m_call.rng_step = next_rng_step();
    m_runner->run(m_program->steps(m_last_sharded), outputs, inputs, bits, m_distributed);
    if (m_last_sharded) m_sharing->arrive_after_update(where);
  } catch (...) {
    // A rank that failed part-way is out of step with the others' shared-memory arrivals.
    m_sharing->drop();
    m_runner->abandon();
    distributed::DistributedCall::settle({[&] { m_call.finish(); }});  // started sends complete
    throw;
  }
  m_call.finish();
  // A NaN or Inf found by the numerics check is raised here, after every collective of the
  // call completed (the other ranks are not left waiting), before results are copied and
  // double-buffered updates committed.
  m_runner->end_probe(bits);
  m_program->finish_call(outputs, inputs);
}

size_t CPUExecutable::get_node_shared_variables() const { return m_sharing->node_shared_variables(); }

size_t CPUExecutable::get_shared_bytes() const { return m_sharing->bytes(); }

size_t CPUExecutable::get_sharded_update_bytes() const { return m_sharing->sharded_update_bytes(); }

size_t CPUExecutable::get_optimizer_state_bytes() const { return m_sharing->optimizer_state_bytes(); }

std::vector<std::string> CPUExecutable::get_shared_memory() const { return m_sharing->describe(); }

void CPUExecutable::set_profiling(bool on) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_runner->set_profiling(on);
}

std::vector<double> CPUExecutable::get_step_seconds() const { return m_runner->step_seconds(); }

bool CompileOptions::default_fuse() { return settings::flag("NGRAPH_CPU_FUSION"); }

bool CompileOptions::default_variable_layouts() { return settings::flag("NGRAPH_CPU_VARIABLE_LAYOUTS"); }
bool CompileOptions::default_cast_pairs() { return settings::flag("NGRAPH_CPU_CAST_PAIRS"); }

namespace {
std::atomic<int> g_num_threads{0};

int default_num_threads() {
  if (int n = static_cast<int>(settings::integer("NGRAPH_NUM_THREADS")); n > 0) return n;
  if (auto env = settings::environment("OMP_NUM_THREADS")) {
    int n = std::atoi(env->c_str());
    if (n > 0) return n;
  }
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int local = 1;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_NTASKS_PER_NODE"})
    if (auto env = settings::environment(var)) {
      local = std::max(1, std::atoi(env->c_str()));
      break;
    }
  return std::max(1, cores / local);
}

// OpenMP's thread count is per calling thread: apply it in every thread that runs kernels.
void apply_num_threads() {
  thread_local int applied = 0;
  int n = get_num_threads();
  if (applied != n) {
    omp_set_num_threads(n);
    applied = n;
  }
}
}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("[CPU] number of threads must be >= 1, got " + std::to_string(n));
  g_num_threads = n;
}

int get_num_threads() {
  int n = g_num_threads.load();
  if (n == 0) {
    int d = default_num_threads();
    g_num_threads.compare_exchange_strong(n, d);
    n = g_num_threads.load();
  }
  return n;
}

std::vector<std::string> CPUExecutable::get_schedule() const {
  std::vector<std::string> out;
  for (const auto& step : m_program->steps()) out.push_back(step.name);
  return out;
}

std::shared_ptr<Executable> CPUBackend::compile(std::shared_ptr<Function> function) {
  return compile(std::move(function), CompileOptions{});
}

std::shared_ptr<Executable> CPUBackend::compile(std::shared_ptr<Function> function, Precision precision) {
  CompileOptions options;
  options.precision = precision;
  return compile(std::move(function), options);
}

std::shared_ptr<Executable> CPUBackend::compile(std::shared_ptr<Function> function,
                                                const CompileOptions& options) {
  if (!function) throw std::invalid_argument("[CPU] compile: function is null");
  return std::make_shared<CPUExecutable>(std::move(function), options);
}

namespace {
const bool registered = [] {
  Backend::register_backend("CPU", [] { return std::make_shared<CPUBackend>(); });
  return true;
}();
}  // namespace

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
