#include "ngraph/runtime/cpu/cpu_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
constexpr size_t kAlign = 64;
void apply_num_threads();
}  // namespace

CPUExecutable::CPUExecutable(std::shared_ptr<Function> function, const CompileOptions& options) {
  ExecutionPlan plan = pass::build_plan(function, options, m_call);
  m_function = plan.function;
  m_parameters = m_function->get_parameters();
  m_results = m_function->get_results();
  make_value_slots(plan);
  make_steps(plan);
  make_copies(plan);
  summarise(plan);
  m_slot_of.clear();
  if (m_arena_bytes) {
    m_arena = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(kAlign, m_arena_bytes)),
                                    std::free);
    if (!m_arena) throw std::bad_alloc();
  }
}

// Slots of the values the executable provides itself: parameters, variables, constants.
void CPUExecutable::make_value_slots(const ExecutionPlan& plan) {
  for (const auto& node : plan.ops) {
    const std::string& type = node->get_type_name();
    Slot slot{SlotKind::input, 0};
    if (type == "Parameter") {
      slot.index = m_function->get_parameter_index(static_cast<op::Parameter*>(node.get()));
    } else if (type == "Variable") {
      slot = {SlotKind::variable_read, 0, nullptr, static_cast<op::Variable&>(*node).get_state().get()};
      m_keep_alive.push_back(node);
    } else if (type == "Constant") {
      slot = {SlotKind::constant, 0, static_cast<op::Constant&>(*node).get_data_ptr()};
      m_keep_alive.push_back(node);
    } else if (type == LaidOutConstant::type_name) {
      slot = {SlotKind::constant, 0, static_cast<LaidOutConstant&>(*node).get_data_ptr()};
      m_keep_alive.push_back(node);
    } else {
      continue;
    }
    m_slot_of[node->output(0)] = m_slots.size();
    m_slots.push_back(slot);
  }
}

// The slot a computed value is written to: the caller's result buffer, a variable's buffer,
// or its place in the arena (which moves into shared memory when that is in use).
size_t CPUExecutable::value_slot(const ExecutionPlan& plan, const Output& v) {
  Slot slot{SlotKind::arena, 0};
  auto bound = plan.result_binding.find(v);
  auto update = plan.update_binding.find(v);
  if (bound != plan.result_binding.end()) {
    slot = {SlotKind::output, bound->second};
  } else if (update != plan.update_binding.end()) {
    bool here = plan.in_place.count(update->second) > 0;
    slot = {here ? SlotKind::variable_read : SlotKind::variable_write, 0, nullptr, update->second};
  } else {
    slot.index = plan.arena_offset.at(v);
    auto grouped = plan.group_of.find(v);
    if (grouped != plan.group_of.end() && plan.groups[grouped->second].shared_plan >= 0) {
      const auto& g = plan.groups[grouped->second];
      size_t k = std::find(g.members.begin(), g.members.end(), v) - g.members.begin();
      slot.shared = g.shared_plan;
      slot.shared_offset = g.shared_offset + g.offsets[k];
    }
  }
  m_slot_of[v] = m_slots.size();
  m_slots.push_back(slot);
  return m_slots.size() - 1;
}

void CPUExecutable::make_steps(ExecutionPlan& plan) {
  for (const auto& placement : plan.shared)
    m_shared.push_back({placement.comm, placement.bytes, nullptr, nullptr, placement.node_shared, placement.common});
  for (size_t i = 0; i < m_shared.size(); ++i)
    for (const auto& [state, off] : m_shared[i].node_shared) m_node_shared_plan[state] = i;
  for (auto& planned : plan.steps) {
    const Node& node = *planned.node;
    Step step;
    step.name = node.get_name();
    step.node = planned.node;
    step.kernel = std::move(planned.kernel);
    for (const auto& in : node.input_values()) step.in_slots.push_back(m_slot_of.at(in));
    for (size_t o = 0; o < node.get_output_size(); ++o)
      step.out_slots.push_back(value_slot(plan, planned.node->output(o)));
    for (size_t off : planned.scratch_offset) {
      step.out_slots.push_back(m_slots.size());
      m_slots.push_back({SlotKind::arena, off});
    }
    for (size_t slot : step.out_slots)
      step.updates_variable = step.updates_variable || m_slots[slot].kind == SlotKind::variable_read ||
                              m_slots[slot].kind == SlotKind::variable_write;
    step.in_ptrs.resize(step.in_slots.size());
    step.out_ptrs.resize(step.out_slots.size());
    step.async = planned.overlap;
    step.waits_before = planned.waits_before;
    m_steps.push_back(std::move(step));
  }
}

// Results and updates that no kernel wrote in place are copied after the last step.
void CPUExecutable::make_copies(const ExecutionPlan& plan) {
  for (size_t r = 0; r < m_results.size(); ++r) {
    Output v = m_results[r]->input_value(0);
    auto bound = plan.result_binding.find(v);
    if (bound != plan.result_binding.end() && bound->second == r) continue;
    m_slots.push_back({SlotKind::output, r});
    m_copies.push_back({m_slot_of.at(v), m_slots.size() - 1, plan.desc(v).bytes()});
  }
  for (const auto& sink : m_function->get_sinks()) {
    auto* assign = dynamic_cast<op::Assign*>(sink.get());
    if (!assign) continue;
    m_updated.push_back(assign->get_state());
    Output v = assign->input_value(0);
    auto bound = plan.update_binding.find(v);
    if (bound != plan.update_binding.end() && bound->second == assign->get_state().get()) continue;
    m_slots.push_back({SlotKind::variable_write, 0, nullptr, assign->get_state().get()});
    m_copies.push_back({m_slot_of.at(v), m_slots.size() - 1, assign->get_state()->byte_size()});
  }
  for (const auto& state : m_updated)
    if (!plan.in_place.count(state.get())) m_committed.push_back(state.get());
  // A layout the variable already has (another executable kept it so) is shared, so calls
  // that alternate between executables find the same object and compare nothing.
  for (const auto& [state, desc] : plan.variable_layouts) {
    auto layout = storage_layout(desc);
    auto current = state->get_layout();
    if (layout && current && current->same_as(*layout)) layout = current;
    m_variable_layouts.emplace_back(state, std::move(layout));
  }
}

void CPUExecutable::summarise(const ExecutionPlan& plan) {
  size_t elements = 0;
  bool communicates = false;
  for (const auto& step : plan.steps) {
    for (const auto& out : step.node->outputs()) elements += plan.desc(out).elements();
    communicates = communicates || dynamic_cast<op::Collective*>(step.node.get()) != nullptr;
  }
  m_lightweight = !communicates && elements <= (1u << 14);
  m_collective_checks = plan.checks;
  m_check_label = "graph '" + (m_function->get_name().empty() ? std::string("unnamed") : m_function->get_name()) + "'";
  m_arena_bytes = plan.arena_bytes;
  m_unshared_bytes = plan.unshared_bytes;
  m_assignments = plan.assignments;
  m_reorders = plan.reorders;
}

void* CPUExecutable::slot_ptr(size_t slot, void* const* outputs, const void* const* inputs) const {
  const Slot& s = m_slots[slot];
  switch (s.kind) {
    case SlotKind::arena:
      if (s.shared >= 0 && m_shared[static_cast<size_t>(s.shared)].base)
        return m_shared[static_cast<size_t>(s.shared)].base + s.shared_offset;
      return m_arena.get() + s.index;
    case SlotKind::constant: return const_cast<void*>(s.constant);
    case SlotKind::input: return const_cast<void*>(inputs[s.index]);
    case SlotKind::output: return outputs[s.index];
    case SlotKind::variable_read: return s.variable->read_buffer();
    case SlotKind::variable_write: return s.variable->write_buffer();
  }
  return nullptr;
}

bool CPUExecutable::check_collectives() {
  auto mode = distributed::get_check_mode();
  if (mode == distributed::CheckMode::never) return false;
  if (mode == distributed::CheckMode::first && m_checked_once) return true;
  for (auto& c : m_collective_checks)
    c.comm->check_same_collectives(c.signature, c.labels, m_check_label);
  m_checked_once = true;
  return true;
}

void CPUExecutable::call_raw(void* const* outputs, const void* const* inputs) {
  std::lock_guard<std::mutex> lock(m_mutex);
  // Refuses a second thread's distributed call where MPI cannot take it.
  auto in_call = m_collective_checks.empty() ? nullptr : m_collective_checks[0].comm->begin_call(m_check_label);
  apply_num_threads();
  // Variables in the layouts the kernels were compiled for (another executable, or Python's
  // set_value, may have left one otherwise): the values stay the same.
  for (const auto& [state, layout] : m_variable_layouts)
    if (state->get_layout() != layout) state->set_layout(layout);
  bool verified = !m_collective_checks.empty() && check_collectives();
  if (verified && !m_shared_tried) setup_shared();
  unsigned bits = instrumentation();
  bool probed = bits || m_profiling;
  m_outputs = outputs;
  m_inputs = inputs;
  m_pending.assign(m_steps.size(), nullptr);
  m_call.reset(verified, nullptr);
  m_last_sharded = false;
  try {
    std::vector<distributed::SharedRegion*> sharded;
    if (verified && !m_shared_regions.empty()) sharded = decide_sharded(bits & check_numerics_bit);
    m_last_sharded = !sharded.empty();
    // A variable this call writes whose value a sharded update keeps once per node (this
    // executable's, in a call that does not run it, or another's): a private copy first.
    for (const auto& state : m_updated)
      if (state->is_shared()) {
        auto it = m_node_shared_plan.find(state.get());
        bool mine = it != m_node_shared_plan.end() &&
                    std::find(sharded.begin(), sharded.end(), m_shared[it->second].region.get()) != sharded.end();
        if (!mine) state->unshare();
      }
    m_call.reset(verified, verified ? &m_shared_regions : nullptr, std::move(sharded));
    m_call.rng_step = next_rng_step();
    if (probed) {
      begin_probe(bits);
      run_steps<true>();
    } else {
      run_steps<false>();
    }
    // Every rank's pieces are written before any rank reads the variables again (the next
    // call's forward, another executable, get_value) or writes its gradients over what the
    // others still sum.
    for (auto* region : m_call.sharded_regions)
      region->arrive("[AllReduce] sharded update of " + m_check_label, "after the update");
  } catch (...) {
    // A rank that failed part-way is out of step with the others' shared-memory arrivals.
    drop_shared();
    for (auto& p : m_pending)
      if (p) try {
          auto r = std::move(p);
          r->wait();
        } catch (...) {
        }
    try {
      m_call.finish();  // started sends must not be abandoned
    } catch (...) {
    }
    throw;
  }
  m_call.finish();
  // A NaN or Inf found by the numerics check is raised here, after every collective of the
  // call completed (the other ranks are not left waiting), before results are copied and
  // double-buffered updates committed.
  if (probed) m_probe.end();
  for (const auto& c : m_copies)
    if (c.bytes)
      std::memcpy(slot_ptr(c.to_slot, outputs, inputs), slot_ptr(c.from_slot, outputs, inputs),
                  c.bytes);
  // Every update becomes the current value at once, after all reads of the old ones.
  for (auto* state : m_committed) state->commit();
}

void CPUExecutable::begin_probe(unsigned bits) {
  if (!m_probes_made) {
    m_probes_made = true;
    for (const auto& step : m_steps) m_step_probes.push_back(make_probe(*step.node));
    for (size_t i = 0; i < m_parameters.size(); ++i)
      m_sources.emplace_back("argument " + std::to_string(i) + " (" + m_parameters[i]->get_name() + ")",
                             m_parameters[i]);
    for (const auto& node : m_keep_alive)
      if (node->get_type_name() == std::string("Variable"))
        m_sources.emplace_back("variable '" + node->get_name() + "'", node);
  }
  int rank = -1, size = 1;
  if (!m_collective_checks.empty()) {
    rank = m_collective_checks[0].comm->rank();
    size = m_collective_checks[0].comm->size();
  }
  m_probe.begin(bits, m_check_label, rank, size);
  if (!m_probe.checking()) return;
  for (size_t i = 0; i < m_sources.size(); ++i) {
    const auto& [what, node] = m_sources[i];
    const void* data = i < m_parameters.size()
                           ? m_inputs[i]
                           : static_cast<op::Variable&>(*node).get_state()->read_buffer();
    m_probe.check_value(what, node->get_output_element_type(0), node->get_output_shape(0), data);
  }
}

template <bool Probed>
void CPUExecutable::run_steps() {
  size_t pending = 0;
  auto complete = [&](size_t s) {
    auto r = std::move(m_pending[s]);
    m_pending[s] = nullptr;
    if (!r) return;
    --pending;
    if constexpr (Probed) {
      int64_t t0 = now_ns();
      r->wait();
      m_probe.step_done(m_step_probes[s], t0, m_steps[s].out_ptrs.data(), true, true);
    } else {
      r->wait();
    }
  };
  for (size_t s = 0; s < m_steps.size(); ++s) {
    auto& step = m_steps[s];
    for (size_t w : step.waits_before) complete(w);
    for (size_t i = 0; i < step.in_slots.size(); ++i)
      step.in_ptrs[i] = slot_ptr(step.in_slots[i], m_outputs, m_inputs);
    for (size_t i = 0; i < step.out_slots.size(); ++i)
      step.out_ptrs[i] = slot_ptr(step.out_slots[i], m_outputs, m_inputs);
    if constexpr (Probed) {
      // After a NaN or Inf was found, the call goes on for its collectives (the other ranks
      // wait for them) but writes no variable: the error leaves the weights as they were.
      if (step.updates_variable && m_probe.found()) continue;
      // A kernel that writes a variable in place is checked on a copy of the old value,
      // put back when the new one holds a NaN or Inf.
      bool restore = step.updates_variable && m_probe.checking();
      if (restore) save_in_place(s);
      int64_t t0 = now_ns();
      step.kernel(step.in_ptrs.data(), step.out_ptrs.data());
      if (m_profiling) m_step_seconds[s] += static_cast<double>(now_ns() - t0) * 1e-9;
      m_probe.step_done(m_step_probes[s], t0, step.out_ptrs.data(), !step.async);
      if (restore && m_probe.found()) restore_in_place(s);
    } else {
      step.kernel(step.in_ptrs.data(), step.out_ptrs.data());
    }
    if (step.async) {
      m_pending[s] = m_call.take_started();
      if (m_pending[s])
        ++pending;
      else if constexpr (Probed)
        m_probe.check_outputs(*m_step_probes[s], step.out_ptrs.data());  // it finished at once
    }
    // Give started collectives a chance to advance while later steps compute.
    if (pending)
      for (auto& p : m_pending)
        if (p) p->test();
  }
  for (size_t s = 0; s < m_steps.size(); ++s) complete(s);
}

void CPUExecutable::save_in_place(size_t s) {
  const Step& step = m_steps[s];
  m_saved.clear();
  for (size_t o = 0; o < m_step_probes[s]->outputs.size(); ++o)
    if (m_slots[step.out_slots[o]].kind == SlotKind::variable_read) {
      const auto& [type, shape] = m_step_probes[s]->outputs[o];
      auto* p = static_cast<const char*>(step.out_ptrs[o]);
      m_saved.emplace_back(p, p + shape_size(shape) * type.size());
    }
}

void CPUExecutable::restore_in_place(size_t s) {
  const Step& step = m_steps[s];
  size_t k = 0;
  for (size_t o = 0; o < m_step_probes[s]->outputs.size(); ++o)
    if (m_slots[step.out_slots[o]].kind == SlotKind::variable_read) {
      const auto& saved = m_saved[k++];
      std::memcpy(step.out_ptrs[o], saved.data(), saved.size());
    }
}

void CPUExecutable::setup_shared() {
  m_shared_tried = true;
  for (auto& plan : m_shared) {
    plan.region = plan.comm->create_shared_region(plan.bytes, plan.common);  // collective
    plan.base = plan.region ? plan.region->local() : nullptr;
    if (plan.region) m_shared_regions.push_back(plan.region.get());
  }
}

void CPUExecutable::drop_shared() {
  m_shared_regions.clear();
  for (auto& plan : m_shared) {
    unshare_from(plan);  // the values stay (as far as the update got), privately
    plan.base = nullptr;
    plan.region.reset();
  }
}

CPUExecutable::~CPUExecutable() {
  for (auto& plan : m_shared) unshare_from(plan);
}

bool CPUExecutable::shared_in(const SharedPlan& plan, const VariableState& state, size_t offset) {
  return plan.region && plan.region->common() && state.is_shared() &&
         state.read_buffer() == plan.region->common() + offset;
}

void CPUExecutable::unshare_from(SharedPlan& plan) {
  for (const auto& [state, off] : plan.node_shared)
    if (shared_in(plan, *state, off)) state->unshare();
}

// Per call, for each region with a sharded update: every rank says (through
// SharedRegion::max_over_node) whether its variables are still the node's shared ones (nothing
// wrote one privately: set_value, another executable, the numerics check's call). All yes:
// this call runs sharded. Otherwise every rank takes
// private copies and, when some rank's values changed since they were last compared (a
// checkpoint loaded, set_value on every rank), the ranks compare them again and share them
// when they match.
std::vector<distributed::SharedRegion*> CPUExecutable::decide_sharded(bool checking) {
  std::vector<distributed::SharedRegion*> out;
  for (auto& plan : m_shared) {
    if (plan.node_shared.empty() || !plan.region || !plan.region->single_node() || !plan.region->common())
      continue;
    bool attached = true;
    uint64_t versions = 0;
    for (const auto& [state, off] : plan.node_shared) {
      attached = attached && shared_in(plan, *state, off);
      versions += state->version();
    }
    // Through the region, not MPI: a rank that stopped using it (after a failure) is named
    // after the timeout instead of meeting a collective it never calls.
    int64_t all[3] = {attached && !checking ? 0 : 1, !attached && versions != plan.compared_versions ? 1 : 0,
                      checking ? 1 : 0};
    plan.region->max_over_node(all, 3, "[AllReduce] sharded update of " + m_check_label + ": deciding");
    if (all[0] == 0) {
      out.push_back(plan.region.get());
      continue;
    }
    unshare_from(plan);
    if (all[1] && !all[2] && share_values(plan)) out.push_back(plan.region.get());
  }
  return out;
}

// Collective over the region's node (one node): local rank 0 writes its values into the
// common memory, every rank compares its own with them, and all share them if all match.
bool CPUExecutable::share_values(SharedPlan& plan) {
  auto& region = *plan.region;
  char* common = region.common();
  const std::string what = "[AllReduce] sharded update of " + m_check_label + ": sharing the variables";
  // Every rank has taken its private copies (unshare_from) before the common memory changes.
  region.arrive(what, "before local rank 0 writes its values");
  if (region.local_rank() == 0)
    for (const auto& [state, off] : plan.node_shared)
      std::memcpy(common + off, state->read_buffer(), state->byte_size());
  region.arrive(what, "after local rank 0 wrote its values");
  int64_t differ = 0;
  uint64_t versions = 0;
  for (const auto& [state, off] : plan.node_shared) {
    differ = differ || std::memcmp(common + off, state->read_buffer(), state->byte_size()) != 0;
    versions += state->version();
  }
  region.max_over_node(&differ, 1, what);
  plan.compared_versions = versions;
  if (differ) return false;
  for (const auto& [state, off] : plan.node_shared) state->share(common + off, plan.region);
  return true;
}

size_t CPUExecutable::get_node_shared_variables() const {
  size_t n = 0;
  for (const auto& plan : m_shared) n += plan.node_shared.size();
  return n;
}

size_t CPUExecutable::get_shared_bytes() const {
  size_t n = 0;
  for (const auto& plan : m_shared) n += plan.bytes;
  return n;
}

std::vector<std::string> CPUExecutable::get_shared_memory() const {
  std::vector<std::string> out;
  for (const auto& plan : m_shared)
    if (plan.base) out.push_back(plan.region->describe());
  return out;
}

void CPUExecutable::set_profiling(bool on) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_profiling = on;
  m_step_seconds.assign(m_steps.size(), 0.0);
}

std::vector<double> CPUExecutable::get_step_seconds() const { return m_step_seconds; }

bool CompileOptions::default_fuse() { return settings::flag("NGRAPH_CPU_FUSION"); }

bool CompileOptions::default_variable_layouts() { return settings::flag("NGRAPH_CPU_VARIABLE_LAYOUTS"); }

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
  for (const auto& step : m_steps) out.push_back(step.name);
  return out;
}

std::shared_ptr<Executable> CPUBackend::compile(std::shared_ptr<Function> function) {
  return compile(std::move(function), CompileOptions{});
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
