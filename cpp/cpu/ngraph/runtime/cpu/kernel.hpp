// CPU kernels: one builder per op, looked up by op name when a function is compiled. A builder
// sees the node once, at compile time, and returns a kernel that only moves data at call time
// (no graph walk, no shape inference, no allocation).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/node.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// in[i]: data of the node's input i; out[j]: data of its output j (row-major).
using Kernel = std::function<void(const void* const* in, void* const* out)>;
using KernelBuilder = std::function<Kernel(const Node& node)>;

class KernelRegistry {
 public:
  static KernelRegistry& get();
  void add(const std::string& op, KernelBuilder builder);
  const KernelBuilder* find(const std::string& op) const;
  bool contains(const std::string& op) const { return find(op) != nullptr; }
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, KernelBuilder>> m_builders;
};

// The call being run on this thread: kernels that start work which must finish by the end of
// the call (a Send) hand its completion here.
class CallContext {
 public:
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
  // The executable's shared-memory regions in use for this call (gradients planned into
  // memory the node's ranks share; see SharedRegion). The region holding [p, p + bytes), or
  // nullptr.
  const std::vector<distributed::SharedRegion*>* shared_regions = nullptr;
  distributed::SharedRegion* shared_region_for(const void* p, size_t bytes) const {
    if (shared_regions)
      for (auto* r : *shared_regions)
        if (r->contains(p, bytes)) return r;
    return nullptr;
  }
  // Runs the deferred completions in order; all of them run even if one throws (the first
  // exception is rethrown).
  void finish();
  static CallContext* current();

 private:
  friend class CallScope;
  std::vector<std::function<void()>> m_deferred;
  std::shared_ptr<distributed::Request> m_last_started;
};

// Makes `ctx` current on this thread for its lifetime.
class CallScope {
 public:
  explicit CallScope(CallContext& ctx);
  ~CallScope();

 private:
  CallContext* m_previous;
};

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
