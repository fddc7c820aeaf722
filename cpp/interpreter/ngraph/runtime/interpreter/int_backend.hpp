// The INTERPRETER backend: a reference executor. Compiling keeps a copy of the function and
// looks up one kernel per op; a call walks the ops in topological order and runs each kernel
// on plain row-major buffers (a std::vector per output). No graph passes, fusion, oneDNN,
// layouts or memory planning: its results define what every op computes, and the CPU backend
// is tested against it (Backend::create("INTERPRETER"), ng.runtime("INTERPRETER")).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ngraph/distributed/call.hpp"
#include "ngraph/ops/collective.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/instrument.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {

class INTExecutable : public Executable {
 public:
  explicit INTExecutable(std::shared_ptr<Function> function, Precision precision = Precision::f32);
  void call_raw(void* const* outputs, const void* const* inputs) override;

  // The compiled copy of the function, and the names of the nodes run, in order.
  const std::shared_ptr<Function>& get_function() const { return m_function; }
  std::vector<std::string> get_schedule() const;

 private:
  enum class Source { computed, input, constant, variable };
  struct Value {
    Source source = Source::computed;
    size_t index = 0;  // input index or step output slot
    const void* data = nullptr;  // constant data, or the variable's state
    VariableState* variable = nullptr;
  };
  struct Step {
    std::shared_ptr<Node> node;
    const Kernel* kernel;
    std::shared_ptr<const Kernel> own;  // a kernel made for this step (bf16 operands widened)
    std::vector<Output> inputs;
    std::vector<size_t> outputs;  // slots in m_buffers
  };

  const void* value_ptr(const Output& v, const void* const* inputs) const;
  // The steps with the timeline or the numerics check on (instrumentation() != 0).
  void run_probed(unsigned bits, const void* const* inputs);

  std::shared_ptr<Function> m_function;
  std::map<Output, Value> m_values;
  std::vector<VariableState*> m_variables;  // read or updated (each kept alive by its node)
  std::vector<std::vector<char>> m_buffers;
  std::vector<Step> m_steps;
  std::vector<std::shared_ptr<op::Assign>> m_updates;
  distributed::DistributedCall m_distributed;  // the collectives, for the per-call protocol
  CallState m_call;
  std::vector<std::shared_ptr<const StepProbe>> m_step_probes;  // made on the first instrumented call
  CallProbe m_probe;
  std::mutex m_mutex;
};

class INTBackend : public Backend {
 public:
  std::shared_ptr<Executable> compile(std::shared_ptr<Function> function) override;
  // bf16: the reference of mixed precision. The matrix operands of f32 products and
  // convolutions are rounded to bf16 by Convert (to nearest even), and the products of the
  // rounded values are summed in double.
  std::shared_ptr<Executable> compile(std::shared_ptr<Function> function, Precision precision) override;
  std::string name() const override { return "INTERPRETER"; }
};

}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
