#include "ngraph/runtime/cpu/program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/layout.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
constexpr size_t kAlign = 64;
}  // namespace

Program::Program(ExecutionPlan& plan) : m_function(plan.function) {
  make_value_slots(plan);
  make_steps(plan);
  make_copies(plan);
  m_slot_of.clear();
  m_arena_bytes = plan.arena_bytes;
  if (m_arena_bytes) {
    m_arena = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(kAlign, m_arena_bytes)), std::free);
    if (!m_arena) throw std::bad_alloc();
  }
}

// Slots of the values the executable provides itself: parameters, variables, constants.
void Program::make_value_slots(const ExecutionPlan& plan) {
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
size_t Program::value_slot(const ExecutionPlan& plan, const Output& v) {
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
      size_t k = static_cast<size_t>(std::find(g.members.begin(), g.members.end(), v) - g.members.begin());
      slot.shared = plan.shared[static_cast<size_t>(g.shared_plan)].binding.get();
      slot.shared_offset = g.shared_offset + g.offsets[k];
    }
  }
  m_slot_of[v] = m_slots.size();
  m_slots.push_back(slot);
  return m_slots.size() - 1;
}

void Program::make_steps(ExecutionPlan& plan) {
  bool sharded = !plan.sharded.empty();
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
    m_steps.push_back(step);
    if (!sharded) continue;
    // A sharded arrive completes inside its kernel.
    if (planned.sharded_kernel) {
      step.kernel = std::move(planned.sharded_kernel);
      step.async = false;
    }
    m_sharded_steps.push_back(std::move(step));
  }
}

// Results and updates that no kernel wrote in place are copied after the last step.
void Program::make_copies(const ExecutionPlan& plan) {
  const auto& results = m_function->get_results();
  for (size_t r = 0; r < results.size(); ++r) {
    Output v = results[r]->input_value(0);
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

void Program::finish_call(void* const* outputs, const void* const* inputs) const {
  for (const auto& c : m_copies)
    if (c.bytes) std::memcpy(slot_ptr(c.to_slot, outputs, inputs), slot_ptr(c.from_slot, outputs, inputs), c.bytes);
  for (auto* state : m_committed) state->commit();
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
