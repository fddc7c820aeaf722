// CPU kernels: one builder per op, looked up by op name when a function is compiled. A builder
// is a small compiler: it reads what it needs from its KernelContext once (the node, the
// descriptors of its values, the plan's decisions), and returns a kernel that only moves data
// at call time (no graph walk, no shape inference, no allocation, no thread-local look-up).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ngraph/distributed/node_memory.hpp"
#include "ngraph/node.hpp"
#include "ngraph/runtime/cpu/tensor_desc.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

class TensorDesc;
struct LayoutContext;

// in[i]: data of the node's input i; out[j]: data of its output j, then the scratch buffers
// the builder asked for (KernelContext::scratch), in the layouts the plan gave them.
using Kernel = std::function<void(const void* const* in, void* const* out)>;

// The call in progress, owned by the executable (one call at a time): kernels built for an
// executable keep a pointer to it, set at compile time.
class CallState {
 public:
  // Kernels that start work which must finish by the end of the call (a Send) hand its
  // completion here.
  void defer(std::function<void()> finish) { m_deferred.push_back(std::move(finish)); }
  // An asynchronous kernel (a started allreduce) hands its request here; the executable waits
  // for it before the first step that reads its outputs, and at the end of the call.
  void start_async(std::shared_ptr<distributed::Request> request) {
    m_last_started = std::move(request);
  }
  std::shared_ptr<distributed::Request> take_started() { return std::move(m_last_started); }
  // True when the ranks were checked to agree on this executable's collectives (the check
  // mode is "always", or "first" and it passed): kernels may then use MPI's faster blocking
  // collectives, guarded by a watchdog that ends the job. Otherwise they use polled waits
  // that raise DistributedError after the timeout.
  bool collectives_verified = false;
  // The step random ops draw with in this call (Executable::get_rng_step).
  uint64_t rng_step = 0;
  // Starts a call: nothing deferred or started.
  void reset(bool verified);
  // Runs the deferred completions in order; all of them run even if one throws (the first
  // exception is rethrown).
  void finish();

 private:
  std::vector<std::function<void()>> m_deferred;
  std::shared_ptr<distributed::Request> m_last_started;
};

// The executable's use of one communicator's shared-memory region, as the kernels planned
// into it see it: filled in when the region is made (in the first call whose collectives were
// checked) and cleared when it is given up (after a failure, or when shared memory cannot
// serve the communicator: region stays null and the kernels run their collectives on the
// communicator).
struct RegionBinding {
  distributed::SharedRegion* region = nullptr;
  char* base = nullptr;               // region->local()
  std::vector<const char*> slots;     // region->slot(l) for each local rank l
  int local_rank = 0, local_size = 1;
  int node = 0, nodes = 1;            // region->node(), region->nodes()
  // With error feedback, the carried rounding errors of the compressed exchanges between nodes
  // over this region, by (byte offset in the slot, floats): a compressed fused allreduce and a
  // sharded update's compressed reduce-scatter over the same range share one (the region
  // lays them out alike), so calls that go sharded and calls that do not carry the same
  // errors. Zero on first use; reset with the binding.
  using ResidualKey = std::pair<size_t, size_t>;
  std::shared_ptr<std::map<ResidualKey, std::vector<float>>> residuals =
      std::make_shared<std::map<ResidualKey, std::vector<float>>>();
  std::vector<float>* residual(size_t offset, size_t count) const { return &(*residuals)[{offset, count}]; }
};

// Where the plan put a fused allreduce's buffers (pass/collective_placement.cpp and
// pass/shared_memory_placement.cpp).
struct CollectiveBuffers {
  // Inputs laid out end to end, and outputs: one collective over each range.
  bool contiguous = false;
  // Both ranges in a region's slot, at these byte offsets (null: in the arena).
  std::shared_ptr<const RegionBinding> shared;
  size_t in_offset = 0, out_offset = 0;
};

// What a kernel builder is given, once, at compile time: the node, the descriptors of its
// inputs and outputs (layout and byte size), the plan's decisions for it, and a way to ask
// for scratch memory that the memory planner places in the arena (alive during this step).
class KernelContext {
 public:
  KernelContext(const Node& n, std::vector<const TensorDesc*> inputs,
                std::vector<const TensorDesc*> outputs, CallState& call, bool overlap)
      : node(n), m_inputs(std::move(inputs)), m_outputs(std::move(outputs)), m_call(call),
        m_overlap(overlap) {}
  const Node& node;
  const TensorDesc& input(size_t i) const { return *m_inputs.at(i); }
  const TensorDesc& output(size_t i) const { return *m_outputs.at(i); }
  // A scratch buffer of `bytes` (64-byte aligned) for this step; returns the index of its
  // pointer in the kernel's `out` array (after the outputs).
  size_t scratch(size_t bytes) {
    m_scratch.push_back(bytes);
    return m_outputs.size() + m_scratch.size() - 1;
  }
  const std::vector<size_t>& scratch_bytes() const { return m_scratch; }
  // The executable's call state (see CallState): kernels keep the pointer.
  CallState* call_state() const { return &m_call; }
  // An asynchronous collective may return before it completes (the plan found enough work to
  // overlap it with); otherwise it completes inside the kernel.
  bool overlap() const { return m_overlap; }
  // A fused allreduce's buffers, as the plan placed them.
  CollectiveBuffers collective;
  // Whether some op or result reads output i (kernel selection fills `read`; empty: all are).
  // A kernel may skip writing an output nobody reads (Dropout's mask).
  std::vector<bool> read;
  bool output_read(size_t i) const { return read.empty() || read.at(i); }

 private:
  std::vector<const TensorDesc*> m_inputs, m_outputs;
  std::vector<size_t> m_scratch;
  CallState& m_call;
  bool m_overlap;
};

using KernelBuilder = std::function<Kernel(KernelContext& ctx)>;

// Whether loops compiled twice (for the build's instruction set and, in portable x86-64
// builds, for AVX2+FMA with target attributes) should run their AVX2 twin: the CPU has AVX2
// and FMA and NGRAPH_CPU_ISA is not "baseline". Read once.
bool use_avx2_twins();
// Whether the AVX-512 twins (16 lanes) should run: use_avx2_twins(), the CPU has AVX-512
// F, DQ, BW and VL (and BMI2), and NGRAPH_CPU_ISA is not "avx2". Read once.
bool use_avx512_twins();
// Which loops the fused kernels run: "avx512" or "avx2" (the twins), "baseline" (a portable
// build's own) or "native" (a build compiled for its machine, NGRAPH_NATIVE_ARCH: its own
// loops are that machine's). ng.cpu_features()["loops"].
std::string loops_in_use();
// A kernel's layout rule (see LayoutContext in layout.hpp): the layouts it wants for its
// inputs and gives its outputs. Kernels without one take and give plain row-major data.
using LayoutRule = std::function<void(LayoutContext& ctx)>;

class KernelRegistry {
 public:
  static KernelRegistry& get();
  void add(const std::string& op, KernelBuilder builder, LayoutRule layout = nullptr);
  void remove(const std::string& op);
  const KernelBuilder* find(const std::string& op) const;
  const LayoutRule* find_layout(const std::string& op) const;
  bool contains(const std::string& op) const { return find(op) != nullptr; }
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::string op;
    KernelBuilder build;
    LayoutRule layout;
  };
  const Entry* entry(const std::string& op) const;
  std::vector<Entry> m_entries;
};

// f(begin, end) over [0, n), split into one contiguous range per thread of the backend's
// OpenMP pool (set_num_threads; the calling thread's count), with at least `grain` items per
// range: on the calling thread alone when n < 2 * grain or one thread is set. For kernels'
// own loops (oneDNN's primitives share the same pool).
void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& f);

// Whether a sum over `axes` of data of shape `in` is a column sum (the leading axes reduced,
// at least two rows): the Sum kernel's loop that also reads bf16 data (mixed precision).
bool column_sum_takes(const Shape& in, const AxisSet& axes);

// Ops whose values the executable provides itself (no kernel runs for them).
bool is_structural_op(const std::string& op);

#define NGRAPH_CPU_KERNEL(OpName, ...)                                       \
  static const bool NGRAPH_CONCAT(ngraph_cpu_kernel_, __COUNTER__) = [] {    \
    ::ngraph::runtime::cpu::KernelRegistry::get().add(OpName, __VA_ARGS__); \
    return true;                                                             \
  }()

// A walk over an index space shared by several operands, each with its own element strides
// (0 repeats a value; negative walks backwards). Dimensions are coalesced at build time.
class StridedLoop {
 public:
  // shape: the index space; strides[k][d]: stride of operand k along axis d.
  StridedLoop(const Shape& shape, const std::vector<std::vector<std::ptrdiff_t>>& strides);
  // f(offsets, n, inner) for each innermost row: operand k's elements are at
  // offsets[k] + i * inner[k] for i in [0, n).
  template <typename F>
  void run(F&& f) const {
    size_t nops = m_inner.size();
    std::array<std::ptrdiff_t, 4> off{};
    if (m_count == 0) return;
    if (m_outer.empty()) {
      f(off.data(), m_n, m_inner.data());
      return;
    }
    std::vector<size_t> idx(m_outer.size(), 0);
    for (;;) {
      f(off.data(), m_n, m_inner.data());
      size_t d = m_outer.size();
      while (d-- > 0) {
        for (size_t k = 0; k < nops; ++k) off[k] += m_strides[d][k];
        if (++idx[d] < m_outer[d]) break;
        for (size_t k = 0; k < nops; ++k) off[k] -= m_strides[d][k] * static_cast<std::ptrdiff_t>(m_outer[d]);
        idx[d] = 0;
        if (d == 0) return;
      }
    }
  }
  size_t count() const { return m_count; }

 private:
  std::vector<size_t> m_outer;                       // sizes of the outer axes
  std::vector<std::array<std::ptrdiff_t, 4>> m_strides;  // per outer axis, per operand
  size_t m_n = 0;                                    // innermost extent
  std::vector<std::ptrdiff_t> m_inner;               // innermost stride per operand
  size_t m_count = 0;
};

// Strides of `in` (row-major) as seen from an output of rank out_rank under NumPy
// broadcasting: right-aligned, 0 where in has size 1 (or no axis) and out does not.
std::vector<std::ptrdiff_t> broadcast_strides(const Shape& in, const Shape& out);
std::vector<std::ptrdiff_t> to_signed(const Strides& s);

// A kernel copying elements of `elem_size` bytes from in[0] at `offset` + strides, laid out
// row-major over `shape` into out[0]. Broadcast, Reshape, Slice and Reverse are such views.
Kernel make_view_copy(const Shape& shape, std::vector<std::ptrdiff_t> strides,
                      std::ptrdiff_t offset, size_t elem_size);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
