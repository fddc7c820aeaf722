// The CPU backend: compiles a function once into a linear schedule of kernels over planned
// buffers, then runs it with no graph walk, shape inference or allocation per call. The
// compiler is the pass pipeline of plan.hpp; the executable materialises its plan (slots,
// steps, copies, the arena) and runs it.
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
  size_t get_step_count() const { return m_steps.size(); }
  // One line per step: "Add_3 <- Parameter_1, Parameter_2".
  std::vector<std::string> get_schedule() const;
  // Bytes of the intermediate arena, and what the intermediates would need without reuse.
  size_t get_arena_bytes() const { return m_arena_bytes; }
  size_t get_unshared_bytes() const { return m_unshared_bytes; }
  const std::vector<BufferAssignment>& get_buffer_assignments() const { return m_assignments; }
  // Reorders the layout pass inserted (where a producer's layout differs from a consumer's).
  size_t get_reorder_count() const { return m_reorders; }
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
  bool last_call_sharded() const { return m_last_sharded; }
  std::vector<double> get_step_seconds() const;

 private:
  enum class SlotKind { arena, constant, input, output, variable_read, variable_write };
  struct Slot {
    SlotKind kind;
    size_t index;  // arena offset, input index or output index
    const void* constant = nullptr;
    VariableState* variable = nullptr;
    int shared = -1;  // an arena value that moves into m_shared[shared] when that is in use
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
  struct Copy {  // a result (or update) whose value no kernel wrote in place
    size_t from_slot;
    size_t to_slot;
    size_t bytes;
  };

  // Materialising the plan.
  void make_value_slots(const ExecutionPlan& plan);
  size_t value_slot(const ExecutionPlan& plan, const Output& v);
  void make_steps(ExecutionPlan& plan);
  void make_copies(const ExecutionPlan& plan);
  void summarise(const ExecutionPlan& plan);

  void* slot_ptr(size_t slot, void* const* outputs, const void* const* inputs) const;
  // Probed: the timeline, the numerics check or profiling is on (one branch per call).
  template <bool Probed>
  void run_steps();
  void begin_probe(unsigned bits);
  // The numerics check's copy of the variables step `s` overwrites in place, and putting it back.
  void save_in_place(size_t s);
  void restore_in_place(size_t s);
  std::vector<std::vector<char>> m_saved;
  bool check_collectives();  // true when the ranks are known to agree

  // Fused allreduce buffers (inputs and outputs) placed in memory shared by the node's ranks,
  // one region per communicator, created in the first call whose collectives were checked.
  struct SharedPlan {
    std::shared_ptr<distributed::Communicator> comm;
    size_t bytes = 0;
    std::shared_ptr<distributed::SharedRegion> region;
    char* base = nullptr;  // region->local() while in use
    // A sharded update's variables and their offsets in the region's common memory.
    std::vector<std::pair<VariableState*, size_t>> node_shared;  // kept alive by m_updated
    size_t common = 0;
    uint64_t compared_versions = ~uint64_t{0};  // the variables' versions when last compared
  };
  std::vector<SharedPlan> m_shared;
  std::vector<distributed::SharedRegion*> m_shared_regions;  // those in use, for CallState
  bool m_shared_tried = false;
  bool m_last_sharded = false;
  std::map<VariableState*, size_t> m_node_shared_plan;  // a sharded update's variable -> m_shared index
  void setup_shared();
  void drop_shared();
  // The regions whose sharded updates this call runs (decided with the other ranks).
  std::vector<distributed::SharedRegion*> decide_sharded(bool checking);
  bool share_values(SharedPlan& plan);  // collective: true when every rank's values matched
  static bool shared_in(const SharedPlan& plan, const VariableState& state, size_t offset);
  void unshare_from(SharedPlan& plan);

  CallState m_call;  // kernels keep a pointer to it: declared before anything that builds them
  std::shared_ptr<Function> m_function;
  std::vector<CollectiveCheck> m_collective_checks;
  bool m_checked_once = false;
  std::string m_check_label;  // "graph 'name'", for disagreement messages
  std::vector<std::shared_ptr<Node>> m_keep_alive;  // constants referenced by slots
  std::map<Output, size_t> m_slot_of;               // during materialisation only
  std::vector<Slot> m_slots;
  std::vector<Step> m_steps;
  std::vector<Copy> m_copies;
  std::vector<std::shared_ptr<VariableState>> m_updated;  // kept alive
  std::vector<VariableState*> m_committed;  // double-buffered updates, swapped after each call
  // The layout each variable read or updated is kept in (plan.variable_layouts); null: plain.
  std::vector<std::pair<VariableState*, std::shared_ptr<const StorageLayout>>> m_variable_layouts;
  std::shared_ptr<char> m_arena;
  size_t m_arena_bytes = 0;
  size_t m_unshared_bytes = 0;
  size_t m_reorders = 0;
  std::vector<BufferAssignment> m_assignments;
  std::mutex m_mutex;
  std::vector<std::shared_ptr<distributed::Request>> m_pending;  // per step, during a call
  void* const* m_outputs = nullptr;       // during a call
  const void* const* m_inputs = nullptr;  // during a call
  bool m_profiling = false;
  // The instrumented path's view of the steps and the values read (made on first use).
  std::vector<std::shared_ptr<const StepProbe>> m_step_probes;
  std::vector<std::pair<std::string, std::shared_ptr<Node>>> m_sources;  // parameters, variables
  CallProbe m_probe;
  bool m_probes_made = false;
  bool m_lightweight = false;
  std::vector<double> m_step_seconds;
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
  std::shared_ptr<Executable> compile(std::shared_ptr<Function> function,
                                      const CompileOptions& options);
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
