// The CPU backend: compiles a function once into a linear schedule of kernels over planned
// buffers, then runs it with no graph walk, shape inference or allocation per call. The
// compiler is the pass pipeline of plan.hpp. The executable puts together what the plan
// becomes: the program (program.hpp: slots, steps, copies, the arena), the runner that runs
// its steps (runner.hpp), the shared-memory regions and the per-call decision to run the
// sharded updates (shared_memory.hpp), and the per-call protocol of its collectives
// (distributed/call.hpp, shared with the INTERPRETER).
#pragma once

#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ngraph/ops/collective.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/instrument.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/plan.hpp"
#include "ngraph/runtime/cpu/program.hpp"
#include "ngraph/runtime/cpu/runner.hpp"
#include "ngraph/runtime/cpu/shared_memory.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

class CPUExecutable : public Executable {
 public:
  CPUExecutable(std::shared_ptr<Function> function, const CompileOptions& options);
  ~CPUExecutable() override;
  void call_raw(void* const* outputs, const void* const* inputs) override;

  // The optimised function that was scheduled.
  const std::shared_ptr<Function>& get_function() const { return m_function; }
  size_t get_step_count() const { return m_program->steps().size(); }
  // One line per step: "Add_3 <- Parameter_1, Parameter_2".
  std::vector<std::string> get_schedule() const;
  // Bytes of the intermediate arena, and what the intermediates would need without reuse.
  size_t get_arena_bytes() const { return m_program->arena_bytes(); }
  size_t get_unshared_bytes() const { return m_unshared_bytes; }
  const std::vector<BufferAssignment>& get_buffer_assignments() const { return m_assignments; }
  // Reorders the layout pass inserted (where a producer's layout differs from a consumer's).
  size_t get_reorder_count() const { return m_reorders; }
  // Mixed precision: the precision asked for, the one that runs ("f32" where the CPU has no
  // bf16 instructions), the bf16 casts the program runs (one per source value; a cast that
  // also re-lays out counts once) and how many of them the layout pass made convert and
  // re-lay out in one reorder.
  struct PrecisionSummary {
    std::string requested, runs;
    size_t casts = 0, fused_casts = 0, bf16_values = 0;
  };
  const PrecisionSummary& get_precision() const { return m_precision; }
  // Small enough that releasing Python's GIL would cost more than running it: no
  // communication and few elements in all.
  bool is_lightweight() const { return m_lightweight; }
  // Per-step timing: when on, each call adds every step's seconds to get_step_seconds().
  void set_profiling(bool on);
  // Bytes per rank of the fused gradient buffers planned into shared memory (0: none), and
  // one description per region in use (empty until the first checked call creates them, and
  // when shared memory cannot be used: see Communicator::create_shared_region).
  size_t get_shared_bytes() const;
  std::vector<std::string> get_shared_memory() const;
  // Variables a sharded update keeps once per node (planned; 0: none), and whether the last
  // call ran it sharded (the ranks decide that together per call; see docs/distributed.md).
  size_t get_node_shared_variables() const;
  size_t get_sharded_update_bytes() const;
  size_t get_optimizer_state_bytes() const;
  bool last_call_sharded() const { return m_last_sharded; }
  std::vector<double> get_step_seconds() const;

 private:
  void summarise(const ExecutionPlan& plan);

  CallState m_call;  // kernels keep a pointer to it: declared before anything that builds them
  std::shared_ptr<Function> m_function;
  distributed::DistributedCall m_distributed;  // the per-call protocol of the collectives
  std::unique_ptr<NodeSharing> m_sharing;      // shared-memory regions, sharded updates
  std::unique_ptr<Program> m_program;          // slots, steps, copies, arena
  std::unique_ptr<Runner> m_runner;
  size_t m_unshared_bytes = 0;
  size_t m_reorders = 0;
  PrecisionSummary m_precision;
  std::vector<BufferAssignment> m_assignments;
  bool m_lightweight = false;
  bool m_last_sharded = false;
  std::mutex m_mutex;
};

// Threads per rank for kernels (oneDNN's OpenMP). Default: $NGRAPH_NUM_THREADS, else
// $OMP_NUM_THREADS, else this node's cores divided by the MPI ranks on it
// (OMPI_COMM_WORLD_LOCAL_SIZE and the like), so `mpirun -np 2` on 2 cores does not
// oversubscribe.
void set_num_threads(int n);
int get_num_threads();

class CPUBackend : public Backend {
 public:
  std::shared_ptr<Executable> compile(std::shared_ptr<Function> function) override;
  std::shared_ptr<Executable> compile(std::shared_ptr<Function> function, Precision precision) override;
  std::shared_ptr<Executable> compile(std::shared_ptr<Function> function,
                                      const CompileOptions& options);
  std::string name() const override { return "CPU"; }
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
