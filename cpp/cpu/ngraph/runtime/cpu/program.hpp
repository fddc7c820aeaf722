// A compiled CPU program: the execution plan materialised as slots (where each value lives
// during a call), steps (a kernel and the slots it reads and writes), the copies made after
// the last step, and the arena. It holds no per-call state beyond the steps' pointer arrays,
// which each call fills in; the runner (runner.hpp) runs its steps.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

class Program {
 public:
  enum class SlotKind { arena, constant, input, output, variable_read, variable_write };
  struct Slot {
    SlotKind kind;
    size_t index;  // arena offset, input index or output index
    const void* constant = nullptr;
    VariableState* variable = nullptr;
    // An arena value planned into shared memory: at `shared_offset` of the region's slot
    // while the executable has the region (RegionBinding::base), else in the arena.
    const RegionBinding* shared = nullptr;
    size_t shared_offset = 0;
  };
  struct Step {
    std::string name;
    std::shared_ptr<Node> node;  // for the instrumented path's StepProbe
    Kernel kernel;
    std::vector<size_t> in_slots, out_slots;  // out_slots: outputs, then scratch buffers
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    bool async = false;                // starts a collective that completes later
    bool updates_variable = false;     // writes a variable's new value (in place or not)
    std::vector<size_t> waits_before;  // async steps to complete before this one runs
  };

  // Takes the plan's kernels.
  explicit Program(ExecutionPlan& plan);

  // The steps of a call: the plain ones, or those of a call that runs the sharded updates
  // (the same steps with the sharded kernels; the plain ones when the plan has none).
  std::vector<Step>& steps(bool sharded) { return sharded && !m_sharded_steps.empty() ? m_sharded_steps : m_steps; }
  const std::vector<Step>& steps() const { return m_steps; }
  const Slot& slot(size_t s) const { return m_slots[s]; }
  void* slot_ptr(size_t slot, void* const* outputs, const void* const* inputs) const {
    const Slot& s = m_slots[slot];
    switch (s.kind) {
      case SlotKind::arena:
        if (s.shared && s.shared->base) return s.shared->base + s.shared_offset;
        return m_arena.get() + s.index;
      case SlotKind::constant: return const_cast<void*>(s.constant);
      case SlotKind::input: return const_cast<void*>(inputs[s.index]);
      case SlotKind::output: return outputs[s.index];
      case SlotKind::variable_read: return s.variable->read_buffer();
      case SlotKind::variable_write: return s.variable->write_buffer();
    }
    return nullptr;
  }

  // Before a call: the variables in the layouts the kernels were compiled for (another
  // executable, or Python's set_value, may have left one otherwise; the values stay).
  void lay_out_variables() const {
    for (const auto& [state, layout] : m_variable_layouts)
      if (state->get_layout() != layout) state->set_layout(layout);
  }
  // After the last step: results and updates no kernel wrote in place are copied, then every
  // update becomes the current value at once (after all reads of the old ones).
  void finish_call(void* const* outputs, const void* const* inputs) const;

  const std::shared_ptr<Function>& function() const { return m_function; }
  // The variables the program updates (kept alive), and the nodes behind constant and
  // variable slots.
  const std::vector<std::shared_ptr<VariableState>>& updated() const { return m_updated; }
  // Every variable the program reads or updates, with the layout it keeps it in.
  const std::vector<std::pair<VariableState*, std::shared_ptr<const StorageLayout>>>& variables() const {
    return m_variable_layouts;
  }
  const std::vector<std::shared_ptr<Node>>& sources() const { return m_keep_alive; }
  size_t arena_bytes() const { return m_arena_bytes; }

 private:
  struct Copy {  // a result (or update) whose value no kernel wrote in place
    size_t from_slot;
    size_t to_slot;
    size_t bytes;
  };
  void make_value_slots(const ExecutionPlan& plan);
  size_t value_slot(const ExecutionPlan& plan, const Output& v);
  void make_steps(ExecutionPlan& plan);
  void make_copies(const ExecutionPlan& plan);

  std::shared_ptr<Function> m_function;
  std::vector<std::shared_ptr<Node>> m_keep_alive;  // constants and variables referenced by slots
  std::map<Output, size_t> m_slot_of;               // during construction only
  std::vector<Slot> m_slots;
  std::vector<Step> m_steps, m_sharded_steps;
  std::vector<Copy> m_copies;
  std::vector<std::shared_ptr<VariableState>> m_updated;  // kept alive
  std::vector<VariableState*> m_committed;  // double-buffered updates, swapped after each call
  // The layout each variable read or updated is kept in (plan.variable_layouts); null: plain.
  std::vector<std::pair<VariableState*, std::shared_ptr<const StorageLayout>>> m_variable_layouts;
  std::shared_ptr<char> m_arena;
  size_t m_arena_bytes = 0;
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
