// Memory planning: every value a kernel computes that is not bound to a result or an update,
// and every scratch buffer a kernel asked for, gets an offset in one arena. Blocks are placed
// first-fit and freed after the last step that reads them, so values that are never alive
// together share bytes; a contiguous group is one block, freed with its last member.
//
// A group planned into shared memory (pass/shared_memory_placement.cpp) is written in the
// arena only in calls that go over MPI (before the region is made, without checked
// collectives, after a failure): its block goes after everything else instead of among the
// values. Among them, reserved from the first gradient to the update and never touched while
// the region serves, it moved the values alive meanwhile (the backward's) onto other bytes
// than one rank's plan gives them, bytes no recent step had touched (the small CNN on two
// ranks: its first max pooling backward took 0.31 ms per step against 0.16 ms for the same
// step without the allreduce, in lockstep). Apart, the values sit where one rank has them.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign; }

class ArenaPlanner {
 public:
  size_t allocate(size_t bytes) {
    bytes = align_up(bytes);
    for (auto it = m_free.begin(); it != m_free.end(); ++it) {
      if (it->second >= bytes) {
        size_t off = it->first, rest = it->second - bytes;
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
    auto it = m_free.emplace(offset, align_up(bytes)).first;
    if (it != m_free.begin()) {  // merge with neighbours
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
  // A block past every other, never reused.
  size_t append(size_t bytes) {
    size_t off = m_top;
    m_top += align_up(bytes);
    return off;
  }
  size_t size() const { return m_top; }

 private:
  std::map<size_t, size_t> m_free;  // offset -> bytes
  size_t m_top = 0;
};

std::string tensor_name(const Output& o) {
  return o.get_node()->get_name() + ":" + std::to_string(o.get_index());
}

// The last step reading each value. Results and updates that no kernel writes in place are
// copied out after the last step, and a Send completes at the end of the call (MPI may read
// its buffer until then): their buffers outlive every step.
void find_last_uses(ExecutionPlan& plan) {
  size_t n = plan.steps.size();
  auto hold = [&](const Output& v, size_t s) { plan.last_use[v] = std::max(plan.last_use[v], s); };
  for (const auto& [value, readers] : plan.readers) hold(value, readers.back());
  for (const auto& r : plan.function->get_results())
    if (!plan.result_binding.count(r->input_value(0))) hold(r->input_value(0), n);
  for (const auto& sink : plan.function->get_sinks())
    if (auto* assign = dynamic_cast<op::Assign*>(sink.get()))
      if (!plan.update_binding.count(assign->input_value(0))) hold(assign->input_value(0), n);
  for (const auto& step : plan.steps)
    if (step.node->get_type_name() == "Send")
      for (const auto& in : step.node->input_values()) hold(in, n - 1);
}

// The members of groups planned into shared memory (with the steps computing them): each
// group's block past everything placed so far.
void place_apart(ExecutionPlan& plan, ArenaPlanner& arena, const std::vector<std::pair<Output, size_t>>& apart) {
  std::map<size_t, size_t> base;  // group -> offset
  for (const auto& [v, s] : apart) {
    size_t g = plan.group_of.at(v);
    const auto& group = plan.groups[g];
    if (!base.count(g)) base[g] = arena.append(group.bytes);  // its first member: the block
    size_t k = std::find(group.members.begin(), group.members.end(), v) - group.members.begin();
    size_t offset = base[g] + group.offsets[k], bytes = plan.desc(v).bytes();
    plan.arena_offset[v] = offset;
    auto lu = plan.last_use.find(v);
    plan.assignments.push_back({tensor_name(v), offset, bytes, s, lu != plan.last_use.end() ? lu->second : s});
    plan.unshared_bytes += align_up(bytes);
  }
}

}  // namespace

void plan_memory(ExecutionPlan& plan) {
  find_last_uses(plan);
  ArenaPlanner arena;
  struct Live {
    size_t last;
    Output value;
  };
  std::vector<Live> live;
  std::vector<size_t> group_base(plan.groups.size()), group_live(plan.groups.size(), 0);
  std::vector<std::pair<Output, size_t>> apart;  // members of shared groups, and their steps
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    auto& step = plan.steps[s];
    for (const auto& v : step.node->outputs()) {
      if (!plan.is_arena_value(v)) continue;
      size_t bytes = plan.desc(v).bytes(), offset;
      auto grouped = plan.group_of.find(v);
      if (grouped != plan.group_of.end() && plan.groups[grouped->second].shared_plan >= 0) {
        apart.emplace_back(v, s);
        continue;
      }
      if (grouped != plan.group_of.end()) {  // laid out with the other members of its group
        const auto& g = plan.groups[grouped->second];
        if (group_live[grouped->second] == 0) {
          group_base[grouped->second] = arena.allocate(g.bytes);
          group_live[grouped->second] = g.members.size();
        }
        size_t k = std::find(g.members.begin(), g.members.end(), v) - g.members.begin();
        offset = group_base[grouped->second] + g.offsets[k];
      } else {
        offset = arena.allocate(bytes);
      }
      plan.arena_offset[v] = offset;
      auto lu = plan.last_use.find(v);
      size_t last = lu != plan.last_use.end() ? lu->second : s;
      plan.assignments.push_back({tensor_name(v), offset, bytes, s, last});
      plan.unshared_bytes += align_up(bytes);
      live.push_back({last, v});
    }
    // Scratch lives during this step only; placed after the outputs, so it overlaps neither
    // them nor the inputs.
    for (size_t k = 0; k < step.scratch_bytes.size(); ++k) {
      size_t off = arena.allocate(step.scratch_bytes[k]);
      step.scratch_offset.push_back(off);
      plan.assignments.push_back({step.node->get_name() + ":scratch" + std::to_string(k), off,
                                  step.scratch_bytes[k], s, s});
      plan.unshared_bytes += align_up(step.scratch_bytes[k]);
    }
    for (size_t k = 0; k < step.scratch_bytes.size(); ++k)
      arena.release(step.scratch_offset[k], step.scratch_bytes[k]);
    // Free what this step read for the last time (after its outputs were placed, so an
    // output never overlaps an input of the same step).
    for (auto it = live.begin(); it != live.end();) {
      if (it->last > s) {
        ++it;
        continue;
      }
      auto grouped = plan.group_of.find(it->value);
      if (grouped == plan.group_of.end()) {
        arena.release(plan.arena_offset.at(it->value), plan.desc(it->value).bytes());
      } else if (--group_live[grouped->second] == 0) {  // the block goes with its last member
        arena.release(group_base[grouped->second], plan.groups[grouped->second].bytes);
      }
      it = live.erase(it);
    }
  }
  place_apart(plan, arena, apart);
  plan.arena_bytes = arena.size();
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
