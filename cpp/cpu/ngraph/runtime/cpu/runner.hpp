// Runs a program's steps for one call: fills in each step's pointers, runs its kernel, and
// completes overlapped collectives where the plan waits for them. The instrumented path (the
// timeline, the numerics check, profiling) is a second instantiation of the same loop, chosen
// once per call.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ngraph/distributed/call.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/program.hpp"
#include "ngraph/runtime/instrument.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

class Runner {
 public:
  Runner(Program& program, CallState& call) : m_program(program), m_call(call) {}

  // Runs `steps` (one of the program's lists) with the caller's buffers. `bits`: the
  // instrumentation of this call (see instrument.hpp); `call` names it for the probe.
  void run(std::vector<Program::Step>& steps, void* const* outputs, const void* const* inputs, unsigned bits,
           const distributed::DistributedCall& call);
  // After a failure part-way: completes the collectives still in flight, ignoring their errors.
  void abandon() noexcept;
  // Throws the first NaN or Inf the numerics check found (after every collective of the
  // call completed, before any result is copied or update committed).
  void end_probe(unsigned bits);

  void set_profiling(bool on);
  bool profiling() const { return m_profiling; }
  const std::vector<double>& step_seconds() const { return m_step_seconds; }

 private:
  template <bool Probed>
  void run_steps(std::vector<Program::Step>& steps);
  void begin_probe(unsigned bits, const distributed::DistributedCall& call);
  // The numerics check's copy of the variables step `s` overwrites in place, and putting it back.
  void save_in_place(const Program::Step& step, size_t s);
  void restore_in_place(const Program::Step& step, size_t s);

  Program& m_program;
  CallState& m_call;
  void* const* m_outputs = nullptr;       // during a call
  const void* const* m_inputs = nullptr;  // during a call
  std::vector<std::shared_ptr<distributed::Request>> m_pending;  // per step, during a call
  bool m_profiling = false;
  std::vector<double> m_step_seconds;
  // The instrumented path's view of the steps and the values read (made on first use).
  std::vector<std::shared_ptr<const StepProbe>> m_step_probes;
  std::vector<std::pair<std::string, std::shared_ptr<Node>>> m_sources;  // parameters, variables
  CallProbe m_probe;
  bool m_probes_made = false;
  std::vector<std::vector<char>> m_saved;
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
