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
#include "ngraph/pass/manager.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

constexpr size_t kAlign = 64;
// Elements computed between an allreduce's start and its first use for overlapping to pay.
constexpr size_t kOverlapElements = size_t(1) << 18;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// First-fit allocation in one arena; blocks are freed when their last reader has run.
class ArenaPlanner {
 public:
  size_t allocate(size_t bytes) {
    bytes = align_up(std::max<size_t>(bytes, 1));
    for (auto it = m_free.begin(); it != m_free.end(); ++it) {
      if (it->second >= bytes) {
        size_t off = it->first;
        size_t rest = it->second - bytes;
        m_free.erase(it);
        if (rest) m_free[off + bytes] = rest;
        return off;
      }
    }
    // Grow: reuse a free block at the end if there is one.
    if (!m_free.empty()) {
      auto last = std::prev(m_free.end());
      if (last->first + last->second == m_top) {
        size_t off = last->first;
        m_free.erase(last);
        m_top = off + bytes;
        return off;
      }
    }
    size_t off = m_top;
    m_top += bytes;
    return off;
  }
  void release(size_t offset, size_t bytes) {
    bytes = align_up(std::max<size_t>(bytes, 1));
    auto it = m_free.emplace(offset, bytes).first;
    // Merge with neighbours.
    if (it != m_free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        m_free.erase(it);
        it = prev;
      }
    }
    auto next = std::next(it);
    if (next != m_free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      m_free.erase(next);
    }
  }
  size_t size() const { return m_top; }

 private:
  std::map<size_t, size_t> m_free;  // offset -> bytes
  size_t m_top = 0;
};

std::string tensor_name(const Output& o) {
  return o.get_node()->get_name() + ":" + std::to_string(o.get_index());
}

// A topological order that starts every Send as soon as its value is ready and runs every Recv
// as late as possible, so ranks exchanging values in a ring never all block in Recv. Ties keep
// the function's order, so every rank schedules the same graph the same way.
NodeVector schedule_order(const NodeVector& ops) {
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) index[ops[i].get()] = i;
  std::vector<size_t> missing(ops.size(), 0);
  std::vector<std::vector<size_t>> users(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    for (const auto& in : ops[i]->input_values()) {
      size_t j = index.at(in.get_node());
      users[j].push_back(i);
      ++missing[i];
    }
  // Sends and asynchronous allreduces start as early as possible; Recvs and the users of an
  // allreduce's result run as late as possible, so communication overlaps computation.
  // Values of variable updates are computed last too: then they can overwrite the variable
  // in place (no reader of the old value is left).
  std::set<const Node*> update_values;
  for (const auto& node : ops)
    if (node->get_type_name() == "Assign") update_values.insert(node->input_value(0).get_node());
  auto rank_of = [&](size_t i) {
    const std::string& t = ops[i]->get_type_name();
    if (t == "Send" || t == FusedAllReduce::type_name) return 0;
    if (t == "Recv" || update_values.count(ops[i].get())) return 2;
    for (const auto& in : ops[i]->input_values())
      if (in.get_node()->get_type_name() == FusedAllReduce::type_name) return 2;
    return 1;
  };
  std::set<std::pair<int, size_t>> ready;
  for (size_t i = 0; i < ops.size(); ++i)
    if (!missing[i]) ready.emplace(rank_of(i), i);
  NodeVector out;
  while (!ready.empty()) {
    size_t i = ready.begin()->second;
    ready.erase(ready.begin());
    out.push_back(ops[i]);
    for (size_t u : users[i])
      if (--missing[u] == 0) ready.emplace(rank_of(u), u);
  }
  return out;
}

}  // namespace

namespace {
void apply_num_threads();
}  // namespace

bool is_structural_op(const std::string& op) {
  return op == "Parameter" || op == "Constant" || op == "Result" || op == "Variable" ||
         op == "Assign";
}

CPUExecutable::CPUExecutable(std::shared_ptr<Function> function, const CompileOptions& options) {
  // Passes rewrite nodes in place: work on a copy so the caller's graph is untouched.
  m_function = function->clone();
  if (options.optimize) {
    pass::Manager manager;
    manager.register_pass<pass::ConstantFolding>([](const std::shared_ptr<Node>& node) {
      auto fn = std::make_shared<Function>(OutputVector{node->output(0)}, ParameterVector{});
      CPUExecutable exe(fn, CompileOptions{false});
      auto c = std::make_shared<op::Constant>(node->get_element_type(), node->get_shape(),
                                              std::vector<int64_t>{0});
      void* out = const_cast<void*>(c->get_data_ptr());
      exe.call_raw(&out, nullptr);
      return c;
    });
    manager.register_pass<pass::DeadNodeElimination>();
    manager.register_pass<pass::CommonSubexpressionElimination>();
    manager.run_passes(m_function);
    if (options.fuse) {
      fuse_matmul_bias_relu(*m_function);
      fuse_elementwise(*m_function);
      fuse_allreduce(*m_function, default_fusion_threshold());
    }
  }
  m_parameters = m_function->get_parameters();
  m_results = m_function->get_results();
  // A Result used inside the graph (not only as an output) passes its value through.
  {
    std::map<Output, Output> through;
    for (const auto& node : m_function->get_ordered_ops())
      if (node->get_type_name() == "Result") through[node->output(0)] = node->input_value(0);
    replace_outputs(*m_function, through);
  }

  NodeVector ops = schedule_order(m_function->get_ordered_ops());
  std::unordered_map<const Node*, size_t> param_index;
  for (size_t i = 0; i < m_parameters.size(); ++i) param_index[m_parameters[i].get()] = i;

  // 1. Slots for every value. Results write straight into the caller's output buffer when
  //    the value is computed by a kernel and not claimed by an earlier result.
  //    Except the inputs and outputs of fused allreduces: those stay in the executable's
  //    buffers (laid out end to end, maybe in shared memory) so the collective is one
  //    operation that nothing outside can touch; a result is copied out at the end.
  std::map<Output, size_t> slot_of;
  std::set<Output> collective_buffers;
  for (const auto& node : ops)
    if (node->get_type_name() == FusedAllReduce::type_name) {
      for (const auto& v : node->input_values()) collective_buffers.insert(v);
      for (const auto& v : node->outputs()) collective_buffers.insert(v);
    }
  std::map<Output, size_t> result_binding;  // value -> output index
  for (size_t r = 0; r < m_results.size(); ++r) {
    Output v = m_results[r]->input_value(0);
    if (is_structural_op(v.get_node()->get_type_name()) || result_binding.count(v) ||
        collective_buffers.count(v))
      continue;
    result_binding[v] = r;
  }
  // Updates write straight into the variable's next buffer the same way.
  std::map<Output, VariableState*> update_binding;
  for (const auto& sink : m_function->get_sinks()) {
    auto* as_assign = dynamic_cast<op::Assign*>(sink.get());
    if (!as_assign) continue;
    auto& assign = *as_assign;
    m_updated.push_back(assign.get_state());
    Output v = assign.input_value(0);
    if (is_structural_op(v.get_node()->get_type_name()) || result_binding.count(v) ||
        update_binding.count(v) || collective_buffers.count(v))
      continue;
    update_binding[v] = assign.get_state().get();
  }

  // Uses: the last step that reads each value.
  std::map<Output, size_t> last_use;
  std::vector<std::shared_ptr<Node>> compute;
  for (const auto& node : ops)
    if (!is_structural_op(node->get_type_name())) compute.push_back(node);
  for (size_t s = 0; s < compute.size(); ++s)
    for (const auto& in : compute[s]->input_values()) last_use[in] = s;
  // Results and updates that no kernel writes in place are copied out after the last step:
  // their buffers must outlive every step.
  for (const auto& r : m_results)
    if (!result_binding.count(r->input_value(0))) last_use[r->input_value(0)] = compute.size();
  for (const auto& sink : m_function->get_sinks())
    if (auto* assign = dynamic_cast<op::Assign*>(sink.get()))
      if (!update_binding.count(assign->input_value(0))) last_use[assign->input_value(0)] = compute.size();
  // A Send completes at the end of the call (CallContext::finish), and MPI may read its
  // buffer until then: no later step may take that buffer over.
  for (const auto& node : compute)
    if (node->get_type_name() == "Send")
      for (const auto& in : node->input_values()) last_use[in] = compute.size() - 1;
  // In-place updates: an update computed by a fused elementwise kernel that reads the variable
  // (w - lr * g) may write into the variable's own buffer - element i is read before it is
  // written - when it runs after every other reader of the old value and nothing that could
  // fail runs after it (a failed call must leave the variables as they were). Then the
  // variable keeps one buffer: less memory, and the update reads and writes the same lines.
  std::set<VariableState*> in_place;
  {
    std::map<VariableState*, const Node*> var_node;  // the Variable node of each state
    for (const auto& node : ops)
      if (auto* v = dynamic_cast<op::Variable*>(node.get())) var_node[v->get_state().get()] = v;
    std::set<const Node*> read_at_end;  // values results or Sends read after the steps
    for (const auto& r : m_results) read_at_end.insert(r->input_value(0).get_node());
    for (size_t s = compute.size(); s-- > 0;) {
      const auto& node = compute[s];
      if (node->get_output_size() != 1) break;
      auto bound = update_binding.find(node->output(0));
      if (node->get_type_name() != FusedElementwise::type_name || bound == update_binding.end())
        break;
      VariableState* state = bound->second;
      auto vn = var_node.find(state);
      bool reads_it = false, ok = vn != var_node.end() && !read_at_end.count(vn->second);
      for (const auto& in : node->input_values()) reads_it = reads_it || (ok && in.get_node() == vn->second);
      for (size_t t = s + 1; ok && t < compute.size(); ++t)  // later steps must not read it
        for (const auto& in : compute[t]->input_values()) ok = ok && in.get_node() != vn->second;
      for (const auto& other : compute)  // nor may a Send or collective hold it
        if (ok && (other->get_type_name() == "Send" || other->get_type_name() == FusedAllReduce::type_name))
          for (const auto& in : other->input_values()) ok = ok && in.get_node() != vn->second;
      if (ok && reads_it) in_place.insert(state);
    }
  }

  // An asynchronous allreduce reads its inputs and writes its outputs until the executable
  // waits for it: before the first step that reads an output, else at the end of the call.
  std::vector<std::vector<size_t>> waits_before(compute.size());
  std::vector<bool> async(compute.size(), false);
  std::map<Output, size_t> group_of;  // value -> group, for contiguous layout
  struct Group {
    std::vector<Output> members;
    std::vector<size_t> offsets;  // bytes from the group's start
    size_t bytes = 0, base = 0, live = 0;
    bool allocated = false;
  };
  std::vector<Group> groups;
  auto try_group = [&](const std::vector<Output>& values) {
    for (const auto& v : values)
      if (group_of.count(v) || result_binding.count(v) || update_binding.count(v) ||
          is_structural_op(v.get_node()->get_type_name()))
        return;
    if (std::set<Output>(values.begin(), values.end()).size() != values.size()) return;
    Group g;
    for (const auto& v : values) {
      size_t es = v.get_element_type().size();
      g.bytes = (g.bytes + es - 1) / es * es;
      g.offsets.push_back(g.bytes);
      g.bytes += shape_size(v.get_shape()) * es;
      g.members.push_back(v);
      group_of[v] = groups.size();
    }
    groups.push_back(std::move(g));
  };
  // Where both of a fused allreduce's groups formed, they can live in shared memory instead
  // of the arena (decided per call: see setup_shared).
  std::map<size_t, std::pair<int, size_t>> shared_place;  // group -> (plan, byte offset)
  bool shm_allowed = distributed::shared_memory_enabled();
  auto plan_shared = [&](FusedAllReduce& op) {
    auto comm = op.get_communicator();
    if (!shm_allowed || !comm || comm->size() < 2) return;
    auto whole_group = [&](const std::vector<Output>& values) -> long {
      auto it = group_of.find(values.at(0));
      if (it == group_of.end() || groups[it->second].members != values) return -1;
      return static_cast<long>(it->second);
    };
    long gin = whole_group(op.input_values()), gout = whole_group(op.outputs());
    if (gin < 0 || gout < 0) return;
    auto plan = std::find_if(m_shared.begin(), m_shared.end(),
                             [&](const SharedPlan& p) { return p.comm == comm; });
    if (plan == m_shared.end()) plan = m_shared.insert(m_shared.end(), SharedPlan{comm, 0, nullptr, nullptr});
    for (long g : {gin, gout}) {
      size_t off = align_up(plan->bytes);
      shared_place[static_cast<size_t>(g)] = {static_cast<int>(plan - m_shared.begin()), off};
      plan->bytes = off + groups[static_cast<size_t>(g)].bytes;
    }
  };
  for (size_t s = 0; s < compute.size(); ++s) {
    if (compute[s]->get_type_name() != FusedAllReduce::type_name) continue;
    size_t w = compute.size();
    for (size_t t = s + 1; t < compute.size() && w == compute.size(); ++t)
      for (const auto& in : compute[t]->input_values())
        if (in.get_node() == compute[s].get()) w = t;
    // Overlap only pays when enough work runs before the result is needed: Open MPI's
    // non-blocking allreduce is slower than its blocking one.
    size_t between = 0;
    for (size_t t = s + 1; t < w && t < compute.size(); ++t)
      for (size_t o = 0; o < compute[t]->get_output_size(); ++o)
        between += shape_size(compute[t]->get_output_shape(o));
    bool overlap = between >= kOverlapElements;
    static_cast<FusedAllReduce&>(*compute[s]).set_overlap(overlap);
    try_group(compute[s]->input_values());
    try_group(compute[s]->outputs());
    plan_shared(static_cast<FusedAllReduce&>(*compute[s]));
    if (!overlap) continue;
    async[s] = true;
    if (w < compute.size()) waits_before[w].push_back(s);
    size_t hold = std::min(w, compute.size() - 1);
    for (const auto& in : compute[s]->input_values()) last_use[in] = std::max(last_use[in], hold);
  }

  for (const auto& node : ops) {
    const std::string& type = node->get_type_name();
    if (type == "Parameter") {
      slot_of[node->output(0)] = m_slots.size();
      m_slots.push_back({SlotKind::input, param_index.at(node.get())});
    } else if (type == "Variable") {
      slot_of[node->output(0)] = m_slots.size();
      m_slots.push_back({SlotKind::variable_read, 0, nullptr,
                         static_cast<op::Variable&>(*node).get_state().get()});
      m_keep_alive.push_back(node);
    } else if (type == "Constant") {
      slot_of[node->output(0)] = m_slots.size();
      m_slots.push_back(
          {SlotKind::constant, 0, static_cast<op::Constant&>(*node).get_data_ptr()});
      m_keep_alive.push_back(node);
    }
  }

  ArenaPlanner planner;
  std::vector<std::pair<size_t, Output>> to_release;  // (after step, value)
  for (size_t s = 0; s < compute.size(); ++s) {
    const auto& node = compute[s];
    const KernelBuilder* builder = KernelRegistry::get().find(node->get_type_name());
    if (!builder)
      throw ngraph_error("[CPU] no kernel for op " + node->get_type_name() + " (node " +
                         node->get_name() + ")");
    if (auto* coll = dynamic_cast<op::Collective*>(node.get())) {
      std::string sig = coll->collective_signature();
      if (!sig.empty()) {
        auto it = std::find_if(m_collective_checks.begin(), m_collective_checks.end(),
                               [&](const CollectiveCheck& c) { return c.comm == coll->get_communicator(); });
        if (it == m_collective_checks.end()) {
          m_collective_checks.push_back({coll->get_communicator(), {}, {}});
          it = std::prev(m_collective_checks.end());
        }
        it->signature.push_back(sig);
        it->labels.push_back(node->get_name());
      }
    }
    Step step;
    step.name = node->get_name();
    step.kernel = (*builder)(*node);
    for (const auto& in : node->input_values()) step.in_slots.push_back(slot_of.at(in));
    for (size_t o = 0; o < node->get_output_size(); ++o) {
      Output v = node->output(o);
      size_t bytes = shape_size(v.get_shape()) * v.get_element_type().size();
      auto bound = result_binding.find(v);
      auto update = update_binding.find(v);
      slot_of[v] = m_slots.size();
      if (bound != result_binding.end()) {
        m_slots.push_back({SlotKind::output, bound->second});
      } else if (update != update_binding.end()) {
        bool here = in_place.count(update->second) > 0;
        m_slots.push_back({here ? SlotKind::variable_read : SlotKind::variable_write, 0, nullptr,
                           update->second});
      } else {
        size_t off;
        Slot slot{SlotKind::arena, 0};
        auto grouped = group_of.find(v);
        if (grouped != group_of.end()) {  // laid out with the other members of its group
          Group& g = groups[grouped->second];
          if (!g.allocated) {
            g.base = planner.allocate(g.bytes);
            g.allocated = true;
            g.live = g.members.size();
          }
          size_t k = std::find(g.members.begin(), g.members.end(), v) - g.members.begin();
          off = g.base + g.offsets[k];
          auto place = shared_place.find(grouped->second);
          if (place != shared_place.end()) {
            slot.shared = place->second.first;
            slot.shared_offset = place->second.second + g.offsets[k];
          }
        } else {
          off = planner.allocate(bytes);
        }
        slot.index = off;
        m_slots.push_back(slot);
        size_t last = last_use.count(v) ? last_use[v] : s;
        m_assignments.push_back({tensor_name(v), off, bytes, s, last});
        m_unshared_bytes += align_up(std::max<size_t>(bytes, 1));
        to_release.emplace_back(last, v);
      }
      step.out_slots.push_back(slot_of[v]);
    }
    // Free what this step read for the last time (after its outputs were placed, so an
    // output never overlaps an input of the same step).
    for (auto it = to_release.begin(); it != to_release.end();) {
      if (it->first <= s) {
        auto grouped = group_of.find(it->second);
        if (grouped != group_of.end()) {  // the group's block goes when its last member does
          Group& g = groups[grouped->second];
          if (--g.live == 0) planner.release(g.base, g.bytes);
        } else {
          const auto& slot = m_slots[slot_of.at(it->second)];
          size_t bytes = shape_size(it->second.get_shape()) * it->second.get_element_type().size();
          planner.release(slot.index, bytes);
        }
        it = to_release.erase(it);
      } else {
        ++it;
      }
    }
    step.in_ptrs.resize(step.in_slots.size());
    step.out_ptrs.resize(step.out_slots.size());
    step.async = async[s];
    step.waits_before = waits_before[s];
    m_steps.push_back(std::move(step));
  }

  for (size_t r = 0; r < m_results.size(); ++r) {
    Output v = m_results[r]->input_value(0);
    auto bound = result_binding.find(v);
    if (bound != result_binding.end() && bound->second == r) continue;
    m_slots.push_back({SlotKind::output, r});
    m_copies.push_back({slot_of.at(v), m_slots.size() - 1,
                        shape_size(v.get_shape()) * v.get_element_type().size()});
  }
  for (const auto& sink : m_function->get_sinks()) {
    auto* as_assign = dynamic_cast<op::Assign*>(sink.get());
    if (!as_assign) continue;
    auto& assign = *as_assign;
    Output v = assign.input_value(0);
    auto bound = update_binding.find(v);
    if (bound != update_binding.end() && bound->second == assign.get_state().get()) continue;
    m_slots.push_back({SlotKind::variable_write, 0, nullptr, assign.get_state().get()});
    m_copies.push_back({slot_of.at(v), m_slots.size() - 1, assign.get_state()->byte_size()});
  }

  for (const auto& state : m_updated)
    if (!in_place.count(state.get())) m_committed.push_back(state.get());

  size_t elements = 0;
  bool communicates = false;
  for (const auto& node : compute) {
    for (size_t o = 0; o < node->get_output_size(); ++o) elements += shape_size(node->get_output_shape(o));
    communicates = communicates || dynamic_cast<op::Collective*>(node.get()) != nullptr;
  }
  m_lightweight = !communicates && elements <= (1u << 14);
  m_check_label = "graph '" + (m_function->get_name().empty() ? std::string("unnamed") : m_function->get_name()) + "'";

  m_arena_bytes = planner.size();
  if (m_arena_bytes) {
    m_arena = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(kAlign, m_arena_bytes)),
                                    std::free);
    if (!m_arena) throw std::bad_alloc();
  }
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
  apply_num_threads();
  bool verified = !m_collective_checks.empty() && check_collectives();
  CallContext ctx;
  ctx.collectives_verified = verified;
  if (verified) {
    if (!m_shared_tried) setup_shared();
    ctx.shared_regions = &m_shared_regions;
  }
  CallScope scope(ctx);
  m_pending.assign(m_steps.size(), nullptr);
  size_t pending = 0;
  auto wait_all = [&] {
    for (auto& p : m_pending)
      if (p) {
        auto r = std::move(p);
        p = nullptr;
        r->wait();
      }
  };
  try {
    for (size_t s = 0; s < m_steps.size(); ++s) {
      auto& step = m_steps[s];
      for (size_t w : step.waits_before)
        if (m_pending[w]) {
          auto r = std::move(m_pending[w]);
          m_pending[w] = nullptr;
          --pending;
          r->wait();
        }
      for (size_t i = 0; i < step.in_slots.size(); ++i)
        step.in_ptrs[i] = slot_ptr(step.in_slots[i], outputs, inputs);
      for (size_t i = 0; i < step.out_slots.size(); ++i)
        step.out_ptrs[i] = slot_ptr(step.out_slots[i], outputs, inputs);
      if (m_profiling) {
        auto t0 = std::chrono::steady_clock::now();
        step.kernel(step.in_ptrs.data(), step.out_ptrs.data());
        m_step_seconds[s] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } else {
        step.kernel(step.in_ptrs.data(), step.out_ptrs.data());
      }
      if (step.async) {
        m_pending[s] = ctx.take_started();
        if (m_pending[s]) ++pending;
      }
      // Give started collectives a chance to advance while later steps compute.
      if (pending)
        for (auto& p : m_pending)
          if (p) p->test();
    }
    wait_all();
  } catch (...) {
    // A rank that failed part-way is out of step with the others' shared-memory arrivals.
    drop_shared();
    try {
      wait_all();
    } catch (...) {
    }
    try {
      ctx.finish();  // started sends must not be abandoned
    } catch (...) {
    }
    throw;
  }
  ctx.finish();
  for (const auto& c : m_copies)
    if (c.bytes)
      std::memcpy(slot_ptr(c.to_slot, outputs, inputs), slot_ptr(c.from_slot, outputs, inputs),
                  c.bytes);
  // Every update becomes the current value at once, after all reads of the old ones.
  for (const auto* state : m_committed) const_cast<VariableState*>(state)->commit();
}

void CPUExecutable::setup_shared() {
  m_shared_tried = true;
  for (auto& plan : m_shared) {
    plan.region = plan.comm->create_shared_region(plan.bytes);  // collective
    plan.base = plan.region ? plan.region->local() : nullptr;
    if (plan.region) m_shared_regions.push_back(plan.region.get());
  }
}

void CPUExecutable::drop_shared() {
  m_shared_regions.clear();
  for (auto& plan : m_shared) {
    plan.base = nullptr;
    plan.region.reset();
  }
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

bool CompileOptions::default_fuse() {
  const char* env = std::getenv("NGRAPH_CPU_FUSION");
  return !(env && std::string(env) == "0");
}

namespace {
std::atomic<int> g_num_threads{0};

int default_num_threads() {
  for (const char* var : {"NGRAPH_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char* env = std::getenv(var)) {
      int n = std::atoi(env);
      if (n > 0) return n;
    }
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int local = 1;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_NTASKS_PER_NODE"})
    if (const char* env = std::getenv(var)) {
      local = std::max(1, std::atoi(env));
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
