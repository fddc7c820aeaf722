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
  if (op.get_compression() != distributed::Wire::f32) {
    // Error feedback's carried rounding error: this collective's, kept by the executable
    // (transient: set_value and checkpoints leave it alone).
    auto residual = op.get_error_feedback() ? std::make_shared<std::vector<float>>() : nullptr;
    distributed::Wire wire = op.get_compression();
    return [comm, count, t, reduce, wire, residual](const void* const* in, void* const* out) {
      comm->allreduce_compressed(in[0], out[0], count, t, reduce, {wire, residual.get()});
    };
  }
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

// Error feedback's carried rounding errors of one fused allreduce, kept by the executable
// between calls (transient state: set_value and checkpoints leave them alone): one per
// collective it runs over MPI (the whole range, or each tensor). The shared region's is the
// region binding's (RegionBinding::residual), which a sharded update's reduce-scatter of the
// same range shares.
struct Residuals {
  std::vector<std::vector<float>> mpi;
};

// How a fused allreduce runs on the communicator: blocking when nothing overlaps it, else
// started here and completed by the executable; one collective over each range when the
// plan laid the tensors out end to end (no copies), else one per tensor (parameters or
// results placed by the caller; still no copies). A compressed one runs blocking (the
// exchange adds the pieces itself), overlapping nothing.
struct FusedOnCommunicator {
  std::shared_ptr<distributed::Communicator> comm;
  element::Type t;
  distributed::ReduceOp reduce;
  std::vector<size_t> offset;  // bytes: tensor i is [offset[i], offset[i + 1])
  bool contiguous, overlap;
  CallState* call;
  distributed::Wire wire = distributed::Wire::f32;
  std::shared_ptr<Residuals> residuals;  // null without error feedback

  size_t count(size_t i) const { return (offset[i + 1] - offset[i]) / t.size(); }
  distributed::Compression compression(size_t i) const {
    return {wire, residuals ? &residuals->mpi[i] : nullptr};
  }
  void run(const void* const* in, void* const* out) const {
    size_t k = offset.size() - 1;
    if (wire != distributed::Wire::f32) {
      if (contiguous) comm->allreduce_compressed(in[0], out[0], offset[k] / t.size(), t, reduce, compression(0));
      else
        for (size_t i = 0; i < k; ++i) comm->allreduce_compressed(in[i], out[i], count(i), t, reduce, compression(i));
      return;
    }
    if (!overlap) {  // nothing to overlap with: complete it here
      // Ranks known to agree: MPI's blocking collective (the fastest), watchdog-guarded.
      bool fast = call->collectives_verified;
      auto run = [&](const void* src, void* dst, size_t n) {
        if (fast) comm->allreduce_guarded(src, dst, n, t, reduce);
        else comm->allreduce(src, dst, n, t, reduce);
      };
      if (contiguous) run(in[0], out[0], offset[k] / t.size());
      else
        for (size_t i = 0; i < k; ++i) run(in[i], out[i], count(i));
      return;
    }
    if (contiguous) {
      call->start_async(comm->start_allreduce(in[0], out[0], offset[k] / t.size(), t, reduce));
      return;
    }
    std::vector<std::shared_ptr<distributed::Request>> parts;
    for (size_t i = 0; i < k; ++i) parts.push_back(comm->start_allreduce(in[i], out[i], count(i), t, reduce));
    call->start_async(std::make_shared<RequestGroup>(std::move(parts)));
  }
};

NGRAPH_CPU_KERNEL("CPUFusedAllReduce", [](KernelContext& ctx) -> Kernel {
  auto& op = static_cast<const FusedAllReduce&>(ctx.node);
  size_t k = op.get_input_size();
  FusedOnCommunicator mpi{op.get_communicator(), op.get_input_element_type(0), op.get_reduce_op(),
                          std::vector<size_t>(k + 1, 0), ctx.collective.contiguous, ctx.overlap(),
                          ctx.call_state(), op.get_compression(), nullptr};
  for (size_t i = 0; i < k; ++i) mpi.offset[i + 1] = mpi.offset[i] + ctx.input(i).bytes();
  if (op.get_error_feedback()) {
    mpi.residuals = std::make_shared<Residuals>();
    mpi.residuals->mpi.resize(k);
  }
  const CollectiveBuffers& buffers = ctx.collective;
  if (!buffers.shared) return [mpi](const void* const* in, void* const* out) { mpi.run(in, out); };
  // Planned into memory the node's ranks share: reduced there, nothing copied, while the
  // executable has the region and the ranks were checked to agree (else over MPI, in place).
  // Compressed, only the region's step between nodes is.
  auto binding = buffers.shared;
  size_t in_at = buffers.in_offset, out_at = buffers.out_offset, total = mpi.offset[k] / mpi.t.size();
  return [mpi, binding, in_at, out_at, total](const void* const* in, void* const* out) {
    if (binding->region && mpi.call->collectives_verified) {
      if (mpi.wire == distributed::Wire::f32)
        binding->region->allreduce(in_at, out_at, total, mpi.t, mpi.reduce);
      else
        binding->region->allreduce_compressed(in_at, out_at, total, mpi.t, mpi.reduce,
                                              {mpi.wire, mpi.residuals ? binding->residual(out_at, total) : nullptr});
    } else {
      mpi.run(in, out);
    }
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
