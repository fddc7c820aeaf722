// Per-call instrumentation shared by the backends: the timeline (one Chrome-trace event per
// kernel, collective wait and call) and the numerics check (the first kernel output, argument
// or variable holding NaN or Inf). Both are off by default. An executable reads
// instrumentation() once per call and runs its plain loop when it is 0, so the off path costs
// one predictable branch per call.
#pragma once

#include <atomic>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "ngraph/element_type.hpp"
#include "ngraph/except.hpp"
#include "ngraph/node.hpp"

namespace ngraph {
namespace runtime {

enum Instrumentation : unsigned { timeline_bit = 1u, check_numerics_bit = 2u };

namespace detail {
extern std::atomic<unsigned> g_instrumentation;
}
// The Instrumentation bits in force (relaxed: a call sees a switch made before it started).
inline unsigned instrumentation() { return detail::g_instrumentation.load(std::memory_order_relaxed); }

// A value that is NaN or Inf where the numerics check is on: names the op (or argument, or
// variable), output index, shape, element and, in a distributed graph, the rank.
class NumericsError : public ngraph_error {
 public:
  using ngraph_error::ngraph_error;
};

// Numerics check: on from NGRAPH_CHECK_NUMERICS=1 at start-up, or set here.
void set_check_numerics(bool on);
bool get_check_numerics();

// Monotonic nanoseconds (steady_clock), the clock of every trace event.
int64_t now_ns();

// What the instrumented path needs about one step, computed once per executable.
struct StepProbe {
  std::string name, type, category;  // category: "kernel", "fused" or "collective"
  std::string args;                  // JSON: shapes, dtypes, bytes, what a fused kernel holds
  std::string contains;              // a fused kernel's ops ("" otherwise)
  std::vector<std::pair<element::Type, Shape>> outputs;
};
std::shared_ptr<const StepProbe> make_probe(const Node& node);

// One complete ("X") event of the Chrome trace format: a step's kernel, the wait for an
// overlapped collective, or a whole call. It shares its step's probe (recording copies no
// strings).
struct TraceEvent {
  std::shared_ptr<const StepProbe> step;  // null for a call
  std::string call;                       // a call's graph name
  bool wait = false;
  int64_t start_ns = 0, dur_ns = 0;
  int tid = 0;
  std::string name() const { return step ? step->name + (wait ? " (wait)" : "") : call; }
  std::string type() const { return step ? step->type : "call"; }
  std::string category() const { return step ? (wait ? "wait" : step->category) : "call"; }
  std::string args() const { return step ? step->args : "{}"; }
};

// The timeline: events are collected in memory from start until stop, which returns them.
// Starting while started clears nothing and returns false.
bool timeline_start();
std::vector<TraceEvent> timeline_stop();
bool timeline_active();
void timeline_record(TraceEvent event);
// A small number per thread (0 for the first thread that records), for the trace's rows.
int timeline_thread_id();

// Index of the first NaN or Inf among `count` values of `type` at `data`, or -1 (and -1 for
// types that cannot hold them).
int64_t first_non_finite(element::Type type, const void* data, size_t count);

// The message of a NumericsError for value `index` of `data` (shape `shape`, `type`), found
// in `what` ("output 0 of Log 'Log_3'" ...). `where` names the graph, `rank` is -1 outside
// distributed runs.
std::string numerics_message(const std::string& what, element::Type type, const Shape& shape,
                             const void* data, int64_t index, const std::string& where, int rank,
                             int size);

// Records the events of a call's steps and checks their outputs: one per executable, used by
// both backends' instrumented loops.
class CallProbe {
 public:
  // Starts a call of graph `where` with the bits `bits` (a "call" span when the timeline is on).
  void begin(unsigned bits, const std::string& where, int rank, int size);
  bool timing() const { return m_bits & timeline_bit; }
  bool checking() const { return m_bits & check_numerics_bit; }
  // Checks an argument's or variable's value (`what`: "argument 0 (x)", "variable 'w'").
  void check_value(const std::string& what, element::Type type, const Shape& shape,
                   const void* data);
  // After a step ran from `t0` (now_ns()): records its event (the wait for an overlapped
  // collective when `wait`) and checks its outputs unless `check` is false.
  void step_done(const std::shared_ptr<const StepProbe>& p, int64_t t0, void* const* outputs,
                 bool check = true, bool wait = false);
  // Checks the outputs of a step whose values became ready later (an overlapped collective).
  void check_outputs(const StepProbe& p, void* const* outputs);
  // Ends the call: records its span, then throws the first NumericsError found, if any.
  void end();
  bool found() const { return !m_first.empty(); }

 private:
  unsigned m_bits = 0;
  std::string m_where;
  int m_rank = -1, m_size = 1;
  int64_t m_start = 0;
  std::string m_first;  // the first anomaly's message
};

}  // namespace runtime
}  // namespace ngraph
