// Collective kernels: run on the op's communicator, with the wait bounded by its timeout.
// AllGather/ReduceScatter on an axis other than 0 pack the blocks rank-major in a scratch
// buffer made at compile time.
#include <cstring>
#include <functional>

#include "ngraph/ops/collective.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

using distributed::Communicator;

// Rank-major blocks <-> axis-major layout: shape [outer, n, block] <-> [n, outer, block].
// Returns a kernel-free copy function (elements of elem_size bytes).
void transpose_blocks(const char* src, char* dst, size_t outer, size_t n, size_t block_bytes,
                      bool to_rank_major) {
  for (size_t o = 0; o < outer; ++o)
    for (size_t r = 0; r < n; ++r) {
      const char* s = to_rank_major ? src + (o * n + r) * block_bytes : src + (r * outer + o) * block_bytes;
      char* d = to_rank_major ? dst + (r * outer + o) * block_bytes : dst + (o * n + r) * block_bytes;
      std::memcpy(d, s, block_bytes);
    }
}

NGRAPH_CPU_KERNEL("AllReduce", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const op::AllReduce&>(node);
  auto comm = op.get_communicator();
  size_t count = ctx.output(0).elements();
  element::Type t = op.get_element_type();
  auto reduce = op.get_reduce_op();
  CallState* call = ctx.call_state();
  return [comm, count, t, reduce, call](const void* const* in, void* const* out) {
    if (call->collectives_verified) comm->allreduce_guarded(in[0], out[0], count, t, reduce);
    else comm->allreduce(in[0], out[0], count, t, reduce);
  };
});

NGRAPH_CPU_KERNEL("BroadcastDistributed", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const op::BroadcastDistributed&>(node);
  auto comm = op.get_communicator();
  size_t count = ctx.output(0).elements();
  element::Type t = op.get_element_type();
  int root = op.get_root();
  return [comm, count, t, root](const void* const* in, void* const* out) {
    if (comm->rank() == root && count) std::memcpy(out[0], in[0], count * t.size());
    comm->broadcast(out[0], count, t, root);
  };
});

NGRAPH_CPU_KERNEL("AllGather", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const op::AllGather&>(node);
  auto comm = op.get_communicator();
  const Shape& in = op.get_input_shape(0);
  size_t axis = op.get_axis();
  element::Type t = op.get_element_type();
  size_t count = ctx.input(0).elements(), n = static_cast<size_t>(comm->size());
  size_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  if (outer == 1)  // rank-major already: gather straight into the output
    return [comm, count, t](const void* const* i, void* const* o) { comm->allgather(i[0], o[0], count, t); };
  size_t block = count / std::max<size_t>(outer, 1) * t.size();
  size_t scratch = ctx.scratch(ctx.output(0).bytes());  // rank-major staging
  return [comm, count, t, scratch, outer, n, block](const void* const* i, void* const* o) {
    char* staged = static_cast<char*>(o[scratch]);
    comm->allgather(i[0], staged, count, t);
    transpose_blocks(staged, static_cast<char*>(o[0]), outer, n, block, false);
  };
});

NGRAPH_CPU_KERNEL("ReduceScatter", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const op::ReduceScatter&>(node);
  auto comm = op.get_communicator();
  const Shape& out = op.get_shape();
  size_t axis = op.get_axis();
  element::Type t = op.get_element_type();
  auto reduce = op.get_reduce_op();
  size_t count = ctx.output(0).elements(), n = static_cast<size_t>(comm->size());
  size_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= out[d];
  if (outer == 1)
    return [comm, count, t, reduce](const void* const* i, void* const* o) {
      comm->reduce_scatter(i[0], o[0], count, t, reduce);
    };
  size_t block = count / std::max<size_t>(outer, 1) * t.size();
  size_t scratch = ctx.scratch(ctx.input(0).bytes());  // rank-major staging
  return [comm, count, t, reduce, scratch, outer, n, block](const void* const* i, void* const* o) {
    char* staged = static_cast<char*>(o[scratch]);
    transpose_blocks(static_cast<const char*>(i[0]), staged, outer, n, block, true);
    comm->reduce_scatter(staged, o[0], count, t, reduce);
  };
});

NGRAPH_CPU_KERNEL("Send", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const op::Send&>(node);
  auto comm = op.get_communicator();
  size_t count = ctx.input(0).elements();
  element::Type t = op.get_input_element_type(0);
  int dest = op.get_dest(), tag = op.get_tag();
  CallState* call = ctx.call_state();
  return [comm, count, t, dest, tag, call](const void* const* in, void* const*) {
    std::shared_ptr<distributed::Request> req = comm->start_send(in[0], count, t, dest, tag);
    call->defer([req] { req->wait(); });
  };
});

NGRAPH_CPU_KERNEL("Recv", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const op::Recv&>(node);
  auto comm = op.get_communicator();
  size_t count = ctx.output(0).elements();
  element::Type t = op.get_element_type();
  int src = op.get_src(), tag = op.get_tag();
  return [comm, count, t, src, tag](const void* const*, void* const* out) {
    comm->recv(out[0], count, t, src, tag);
  };
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

// Several requests completed together.
class RequestGroup : public distributed::Request {
 public:
  explicit RequestGroup(std::vector<std::shared_ptr<distributed::Request>> parts)
      : m_parts(std::move(parts)) {}
  void wait() override {
    for (auto& p : m_parts) p->wait();
  }
  bool test() override {
    bool done = true;
    for (auto& p : m_parts) done = p->test() && done;
    return done;
  }

 private:
  std::vector<std::shared_ptr<distributed::Request>> m_parts;
};

NGRAPH_CPU_KERNEL("CPUFusedAllReduce", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& op = static_cast<const FusedAllReduce&>(node);
  auto comm = op.get_communicator();
  element::Type t = op.get_input_element_type(0);
  auto reduce = op.get_reduce_op();
  size_t k = op.get_input_size(), es = t.size();
  std::vector<size_t> offset(k + 1, 0);  // bytes
  for (size_t i = 0; i < k; ++i) offset[i + 1] = offset[i] + ctx.input(i).bytes();
  size_t total = offset[k] / es;
  bool overlap = ctx.overlap();
  CallState* call = ctx.call_state();
  bool sharded = ctx.sharded();
  // Byte ranges of outputs other steps read whole (adjacent members joined): reduced in place.
  std::vector<std::pair<size_t, size_t>> whole;
  for (size_t i : ctx.reduced_whole) {
    if (!whole.empty() && whole.back().first + whole.back().second == offset[i])
      whole.back().second += offset[i + 1] - offset[i];
    else
      whole.emplace_back(offset[i], offset[i + 1] - offset[i]);
  }
  std::string what = "[AllReduce] " + std::to_string(total) + " x " + t.get_type_name() + " " +
                     to_string(reduce) + " in shared memory, summed by the sharded update";
  return [comm, t, reduce, k, offset, total, es, overlap, call, sharded, whole, what](const void* const* in,
                                                                                    void* const* out) {
    auto contiguous = [&](const void* const* p) {
      for (size_t i = 1; i < k; ++i)
        if (static_cast<const char*>(p[i]) != static_cast<const char*>(p[0]) + offset[i]) return false;
      return true;
    };
    bool one = contiguous(in) && contiguous(out);
    if (one && call->collectives_verified) {
      // Planned into memory the node's ranks share: reduced there, nothing copied.
      size_t bytes = total * es;
      if (auto* region = call->shared_region_for(in[0], bytes)) {
        if (region->contains(out[0], bytes)) {
          const char* base = region->local();
          if (sharded && call->is_sharded(region)) {
            // Every rank's gradients are written: the update kernels sum them piece by piece.
            region->arrive(what, "before the sharded update");
            size_t at = static_cast<size_t>(static_cast<const char*>(in[0]) - base);
            for (const auto& [off, n] : whole) region->allreduce(at + off, at + off, n / es, t, reduce);
            CallState::SummedWhereRead r{static_cast<const char*>(out[0]), bytes, {},
                                         reduce == distributed::ReduceOp::mean ? 1.0 / region->local_size() : 1.0,
                                         region};
            for (int l = 0; l < region->local_size(); ++l) r.slots.push_back(region->slot(l) + at);
            call->summed_where_read.push_back(std::move(r));
            return;
          }
          region->allreduce(static_cast<size_t>(static_cast<const char*>(in[0]) - base),
                            static_cast<size_t>(static_cast<const char*>(out[0]) - base), total, t,
                            reduce);
          return;
        }
      }
    }
    if (!overlap) {  // nothing to overlap with: complete it here
      // Ranks known to agree: MPI's blocking collective (the fastest), watchdog-guarded.
      bool fast = call->collectives_verified;
      auto run = [&](const void* src, void* dst, size_t n) {
        if (fast) comm->allreduce_guarded(src, dst, n, t, reduce);
        else comm->allreduce(src, dst, n, t, reduce);
      };
      if (one) {
        run(in[0], out[0], total);
      } else {
        for (size_t i = 0; i < k; ++i) run(in[i], out[i], (offset[i + 1] - offset[i]) / es);
      }
      return;
    }
    std::shared_ptr<distributed::Request> req;
    if (one) {
      // The planner laid the tensors out end to end: one collective, no copies.
      req = comm->start_allreduce(in[0], out[0], total, t, reduce);
    } else {
      // Parameters or results (placed by the caller): one collective per tensor, still no
      // copies.
      std::vector<std::shared_ptr<distributed::Request>> parts;
      for (size_t i = 0; i < k; ++i)
        parts.push_back(comm->start_allreduce(in[i], out[i], (offset[i + 1] - offset[i]) / es, t, reduce));
      req = std::make_shared<RequestGroup>(std::move(parts));
    }
    call->start_async(req);
  };
}, [](LayoutContext& ctx) {
  // Elementwise across ranks, so any layout passes through (zeros in padding stay zero for
  // every reduction). The ranks' layouts must agree: the agreement check compares them.
  if (!ctx.across_ranks) return;
  for (size_t i = 0; i < ctx.produced.size(); ++i) ctx.wanted[i] = ctx.outputs[i] = ctx.produced[i];
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
