// Collectives on the op's communicator, called synchronously (the blocking forms, each wait
// bounded by the communicator's timeout). AllGather and ReduceScatter along an axis other
// than the first go through a rank-major staging buffer. A Send starts when it runs and
// completes at the end of the call, so ranks that exchange values in a ring cannot deadlock.
#include <algorithm>
#include <cstring>
#include <memory>

#include "ngraph/ops/collective.hpp"
#include "ngraph/runtime/interpreter/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {
namespace {

// The blocks of an axis-major value [outer, ranks, block] reordered rank-major [ranks, outer,
// block] (to_rank_major), or back.
void reorder_blocks(const char* src, char* dst, size_t outer, size_t ranks, size_t block,
                    bool to_rank_major) {
  for (size_t o = 0; o < outer; ++o)
    for (size_t r = 0; r < ranks; ++r) {
      size_t axis_major = (o * ranks + r) * block, rank_major = (r * outer + o) * block;
      std::memcpy(dst + (to_rank_major ? rank_major : axis_major),
                  src + (to_rank_major ? axis_major : rank_major), block);
    }
}

// The product of the axes of `shape` before `axis`.
size_t outer_size(const Shape& shape, size_t axis) {
  size_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  return outer;
}

size_t byte_size(const Shape& shape, element::Type t) { return shape_size(shape) * t.size(); }

NGRAPH_INTERPRETER_KERNEL("AllReduce", [](KernelCall& c) {
  auto& op = static_cast<const op::AllReduce&>(c.node);
  if (op.get_compression() != distributed::Wire::f32) {
    distributed::Compression compression{op.get_compression(),
                                         op.get_error_feedback() ? &c.call.residual(&c.node) : nullptr};
    op.get_communicator()->allreduce_compressed(c.in[0], c.out[0], shape_size(op.get_shape()), op.get_element_type(),
                                                op.get_reduce_op(), compression);
    return;
  }
  op.get_communicator()->allreduce(c.in[0], c.out[0], shape_size(op.get_shape()),
                                   op.get_element_type(), op.get_reduce_op());
});

NGRAPH_INTERPRETER_KERNEL("BroadcastDistributed", [](KernelCall& c) {
  auto& op = static_cast<const op::BroadcastDistributed&>(c.node);
  auto& comm = *op.get_communicator();
  size_t bytes = byte_size(op.get_shape(), op.get_element_type());
  if (comm.rank() == op.get_root() && bytes) std::memcpy(c.out[0], c.in[0], bytes);
  comm.broadcast(c.out[0], shape_size(op.get_shape()), op.get_element_type(), op.get_root());
});

NGRAPH_INTERPRETER_KERNEL("AllGather", [](KernelCall& c) {
  auto& op = static_cast<const op::AllGather&>(c.node);
  auto& comm = *op.get_communicator();
  const Shape& in = op.get_input_shape(0);
  element::Type t = op.get_element_type();
  size_t count = shape_size(in), outer = outer_size(in, op.get_axis());
  std::vector<char> staged(byte_size(op.get_shape(), t));
  comm.allgather(c.in[0], staged.data(), count, t);
  if (!staged.empty())
    reorder_blocks(staged.data(), static_cast<char*>(c.out[0]), outer, static_cast<size_t>(comm.size()),
                   count / std::max<size_t>(outer, 1) * t.size(), false);
});

NGRAPH_INTERPRETER_KERNEL("ReduceScatter", [](KernelCall& c) {
  auto& op = static_cast<const op::ReduceScatter&>(c.node);
  auto& comm = *op.get_communicator();
  const Shape& out = op.get_shape();
  element::Type t = op.get_element_type();
  size_t count = shape_size(out), outer = outer_size(out, op.get_axis());
  std::vector<char> staged(byte_size(op.get_input_shape(0), t));
  if (!staged.empty())
    reorder_blocks(static_cast<const char*>(c.in[0]), staged.data(), outer,
                   static_cast<size_t>(comm.size()), count / std::max<size_t>(outer, 1) * t.size(), true);
  comm.reduce_scatter(staged.data(), c.out[0], count, t, op.get_reduce_op());
});

NGRAPH_INTERPRETER_KERNEL("Send", [](KernelCall& c) {
  auto& op = static_cast<const op::Send&>(c.node);
  element::Type t = op.get_input_element_type(0);
  // The message is copied: the value's buffer may be reused before the send completes.
  auto message = std::make_shared<std::vector<char>>(
      static_cast<const char*>(c.in[0]),
      static_cast<const char*>(c.in[0]) + byte_size(op.get_input_shape(0), t));
  std::shared_ptr<distributed::Request> request = op.get_communicator()->start_send(
      message->data(), shape_size(op.get_input_shape(0)), t, op.get_dest(), op.get_tag());
  c.call.defer([request, message] { request->wait(); });
});

NGRAPH_INTERPRETER_KERNEL("Recv", [](KernelCall& c) {
  auto& op = static_cast<const op::Recv&>(c.node);
  op.get_communicator()->recv(c.out[0], shape_size(op.get_shape()), op.get_element_type(),
                              op.get_src(), op.get_tag());
});

}  // namespace
}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
