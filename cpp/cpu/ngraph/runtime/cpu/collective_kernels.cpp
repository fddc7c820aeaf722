// Collective kernels: run on the op's communicator, with the wait bounded by its timeout.
// AllGather/ReduceScatter on an axis other than 0 pack the blocks rank-major in a scratch
// buffer made at compile time.
#include <cstring>
#include <functional>

#include "ngraph/ops/collective.hpp"
#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

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

NGRAPH_CPU_KERNEL("AllReduce", [](const Node& node) -> Kernel {
  auto& op = static_cast<const op::AllReduce&>(node);
  auto comm = op.get_communicator();
  size_t count = shape_size(op.get_shape());
  element::Type t = op.get_element_type();
  auto reduce = op.get_reduce_op();
  return [comm, count, t, reduce](const void* const* in, void* const* out) {
    comm->allreduce(in[0], out[0], count, t, reduce);
  };
});

NGRAPH_CPU_KERNEL("BroadcastDistributed", [](const Node& node) -> Kernel {
  auto& op = static_cast<const op::BroadcastDistributed&>(node);
  auto comm = op.get_communicator();
  size_t count = shape_size(op.get_shape());
  element::Type t = op.get_element_type();
  int root = op.get_root();
  return [comm, count, t, root](const void* const* in, void* const* out) {
    if (comm->rank() == root && count) std::memcpy(out[0], in[0], count * t.size());
    comm->broadcast(out[0], count, t, root);
  };
});

NGRAPH_CPU_KERNEL("AllGather", [](const Node& node) -> Kernel {
  auto& op = static_cast<const op::AllGather&>(node);
  auto comm = op.get_communicator();
  const Shape& in = op.get_input_shape(0);
  size_t axis = op.get_axis();
  element::Type t = op.get_element_type();
  size_t count = shape_size(in), n = static_cast<size_t>(comm->size());
  size_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= in[d];
  if (outer == 1)  // rank-major already: gather straight into the output
    return [comm, count, t](const void* const* i, void* const* o) { comm->allgather(i[0], o[0], count, t); };
  size_t block = count / std::max<size_t>(outer, 1) * t.size();
  auto scratch = std::make_shared<std::vector<char>>(count * n * t.size());
  return [comm, count, t, scratch, outer, n, block](const void* const* i, void* const* o) {
    comm->allgather(i[0], scratch->data(), count, t);
    transpose_blocks(scratch->data(), static_cast<char*>(o[0]), outer, n, block, false);
  };
});

NGRAPH_CPU_KERNEL("ReduceScatter", [](const Node& node) -> Kernel {
  auto& op = static_cast<const op::ReduceScatter&>(node);
  auto comm = op.get_communicator();
  const Shape& out = op.get_shape();
  size_t axis = op.get_axis();
  element::Type t = op.get_element_type();
  auto reduce = op.get_reduce_op();
  size_t count = shape_size(out), n = static_cast<size_t>(comm->size());
  size_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= out[d];
  if (outer == 1)
    return [comm, count, t, reduce](const void* const* i, void* const* o) {
      comm->reduce_scatter(i[0], o[0], count, t, reduce);
    };
  size_t block = count / std::max<size_t>(outer, 1) * t.size();
  auto scratch = std::make_shared<std::vector<char>>(count * n * t.size());
  return [comm, count, t, reduce, scratch, outer, n, block](const void* const* i, void* const* o) {
    transpose_blocks(static_cast<const char*>(i[0]), scratch->data(), outer, n, block, true);
    comm->reduce_scatter(scratch->data(), o[0], count, t, reduce);
  };
});

NGRAPH_CPU_KERNEL("Send", [](const Node& node) -> Kernel {
  auto& op = static_cast<const op::Send&>(node);
  auto comm = op.get_communicator();
  size_t count = shape_size(op.get_input_shape(0));
  element::Type t = op.get_input_element_type(0);
  int dest = op.get_dest(), tag = op.get_tag();
  return [comm, count, t, dest, tag](const void* const* in, void* const*) {
    std::shared_ptr<distributed::Request> req = comm->start_send(in[0], count, t, dest, tag);
    if (auto* ctx = CallContext::current()) ctx->defer([req] { req->wait(); });
    else req->wait();
  };
});

NGRAPH_CPU_KERNEL("Recv", [](const Node& node) -> Kernel {
  auto& op = static_cast<const op::Recv&>(node);
  auto comm = op.get_communicator();
  size_t count = shape_size(op.get_shape());
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

// Completes `inner`, then copies the packed result out (when the outputs were not laid out
// contiguously).
class UnpackRequest : public distributed::Request {
 public:
  UnpackRequest(std::shared_ptr<distributed::Request> inner, std::function<void()> unpack)
      : m_inner(std::move(inner)), m_unpack(std::move(unpack)) {}
  void wait() override {
    m_inner->wait();
    finish();
  }
  bool test() override {
    if (!m_inner->test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (m_unpack) m_unpack();
    m_unpack = nullptr;
  }
  std::shared_ptr<distributed::Request> m_inner;
  std::function<void()> m_unpack;
};

NGRAPH_CPU_KERNEL("CPUFusedAllReduce", [](const Node& node) -> Kernel {
  auto& op = static_cast<const FusedAllReduce&>(node);
  auto comm = op.get_communicator();
  element::Type t = op.get_input_element_type(0);
  auto reduce = op.get_reduce_op();
  size_t k = op.get_input_size(), es = t.size();
  std::vector<size_t> offset(k + 1, 0);  // bytes
  for (size_t i = 0; i < k; ++i) offset[i + 1] = offset[i] + shape_size(op.get_input_shape(i)) * es;
  size_t total = offset[k] / es;
  auto in_scratch = std::make_shared<std::vector<char>>();
  auto out_scratch = std::make_shared<std::vector<char>>();
  return [comm, t, reduce, k, offset, total, in_scratch, out_scratch](const void* const* in,
                                                                       void* const* out) {
    auto contiguous = [&](const void* const* p) {
      for (size_t i = 1; i < k; ++i)
        if (static_cast<const char*>(p[i]) != static_cast<const char*>(p[0]) + offset[i]) return false;
      return true;
    };
    const void* src = in[0];
    if (!contiguous(in)) {  // pack (the planner normally makes this unnecessary)
      in_scratch->resize(offset[k]);
      for (size_t i = 0; i < k; ++i)
        std::memcpy(in_scratch->data() + offset[i], in[i], offset[i + 1] - offset[i]);
      src = in_scratch->data();
    }
    void* dst = out[0];
    std::function<void()> unpack;
    if (!contiguous(out)) {
      out_scratch->resize(offset[k]);
      dst = out_scratch->data();
      std::vector<void*> outs(out, out + k);
      unpack = [outs, out_scratch, offset, k] {
        for (size_t i = 0; i < k; ++i)
          std::memcpy(outs[i], out_scratch->data() + offset[i], offset[i + 1] - offset[i]);
      };
    }
    std::shared_ptr<distributed::Request> req = comm->start_allreduce(src, dst, total, t, reduce);
    if (unpack) req = std::make_shared<UnpackRequest>(req, unpack);
    if (auto* ctx = CallContext::current()) ctx->start_async(req);
    else req->wait();
  };
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
