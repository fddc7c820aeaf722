#include "ngraph/runtime/cpu/runner.hpp"

#include <cstring>

#include "ngraph/ops.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

void Runner::run(std::vector<Program::Step>& steps, void* const* outputs, const void* const* inputs, unsigned bits,
                 const distributed::DistributedCall& call) {
  m_outputs = outputs;
  m_inputs = inputs;
  m_pending.assign(steps.size(), nullptr);
  if (bits || m_profiling) {
    begin_probe(bits, call);
    run_steps<true>(steps);
  } else {
    run_steps<false>(steps);
  }
}

void Runner::end_probe(unsigned bits) {
  if (bits || m_profiling) m_probe.end();
}

void Runner::abandon() noexcept {
  for (auto& p : m_pending)
    if (p) try {
        auto r = std::move(p);
        r->wait();
      } catch (...) {
      }
}

void Runner::begin_probe(unsigned bits, const distributed::DistributedCall& call) {
  const auto& parameters = m_program.function()->get_parameters();
  if (!m_probes_made) {
    m_probes_made = true;
    for (const auto& step : m_program.steps()) m_step_probes.push_back(make_probe(*step.node));
    for (size_t i = 0; i < parameters.size(); ++i)
      m_sources.emplace_back("argument " + std::to_string(i) + " (" + parameters[i]->get_name() + ")", parameters[i]);
    for (const auto& node : m_program.sources())
      if (node->get_type_name() == std::string("Variable"))
        m_sources.emplace_back("variable '" + node->get_name() + "'", node);
  }
  m_probe.begin(bits, call.where(), call.rank(), call.size());
  if (!m_probe.checking()) return;
  for (size_t i = 0; i < m_sources.size(); ++i) {
    const auto& [what, node] = m_sources[i];
    const void* data =
        i < parameters.size() ? m_inputs[i] : static_cast<op::Variable&>(*node).get_state()->read_buffer();
    m_probe.check_value(what, node->get_output_element_type(0), node->get_output_shape(0), data);
  }
}

template <bool Probed>
void Runner::run_steps(std::vector<Program::Step>& steps) {
  size_t pending = 0;
  auto complete = [&](size_t s) {
    auto r = std::move(m_pending[s]);
    m_pending[s] = nullptr;
    if (!r) return;
    --pending;
    if constexpr (Probed) {
      int64_t t0 = now_ns();
      r->wait();
      m_probe.step_done(m_step_probes[s], t0, steps[s].out_ptrs.data(), true, true);
    } else {
      r->wait();
    }
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    auto& step = steps[s];
    for (size_t w : step.waits_before) complete(w);
    for (size_t i = 0; i < step.in_slots.size(); ++i)
      step.in_ptrs[i] = m_program.slot_ptr(step.in_slots[i], m_outputs, m_inputs);
    for (size_t i = 0; i < step.out_slots.size(); ++i)
      step.out_ptrs[i] = m_program.slot_ptr(step.out_slots[i], m_outputs, m_inputs);
    if constexpr (Probed) {
      // After a NaN or Inf was found, the call goes on for its collectives (the other ranks
      // wait for them) but writes no variable: the error leaves the weights as they were.
      if (step.updates_variable && m_probe.found()) continue;
      // A kernel that writes a variable in place is checked on a copy of the old value,
      // put back when the new one holds a NaN or Inf.
      bool restore = step.updates_variable && m_probe.checking();
      if (restore) save_in_place(step, s);
      int64_t t0 = now_ns();
      step.kernel(step.in_ptrs.data(), step.out_ptrs.data());
      if (m_profiling) m_step_seconds[s] += static_cast<double>(now_ns() - t0) * 1e-9;
      m_probe.step_done(m_step_probes[s], t0, step.out_ptrs.data(), !step.async);
      if (restore && m_probe.found()) restore_in_place(step, s);
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
  for (size_t s = 0; s < steps.size(); ++s) complete(s);
}

void Runner::save_in_place(const Program::Step& step, size_t s) {
  m_saved.clear();
  for (size_t o = 0; o < m_step_probes[s]->outputs.size(); ++o)
    if (m_program.slot(step.out_slots[o]).kind == Program::SlotKind::variable_read) {
      const auto& [type, shape] = m_step_probes[s]->outputs[o];
      auto* p = static_cast<const char*>(step.out_ptrs[o]);
      m_saved.emplace_back(p, p + shape_size(shape) * type.size());
    }
}

void Runner::restore_in_place(const Program::Step& step, size_t s) {
  size_t k = 0;
  for (size_t o = 0; o < m_step_probes[s]->outputs.size(); ++o)
    if (m_program.slot(step.out_slots[o]).kind == Program::SlotKind::variable_read) {
      const auto& saved = m_saved[k++];
      std::memcpy(step.out_ptrs[o], saved.data(), saved.size());
    }
}

void Runner::set_profiling(bool on) {
  m_profiling = on;
  m_step_seconds.assign(m_program.steps().size(), 0.0);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
