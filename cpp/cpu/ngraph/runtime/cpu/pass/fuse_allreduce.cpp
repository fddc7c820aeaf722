// Gradient fusion: consecutive AllReduces (sum or mean) of one communicator, type,
// reduction and compression become one FusedAllReduce, one collective over their bytes laid end to end, up to
// a size threshold.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "ngraph/settings.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/fused_allreduce.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

size_t default_fusion_threshold() { return static_cast<size_t>(settings::integer("NGRAPH_FUSION_THRESHOLD")); }

namespace {

// AllReduces that become one FusedAllReduce.
struct Bucket {
  std::shared_ptr<distributed::Communicator> comm;
  element::Type type;
  std::string op;
  distributed::Wire compression;
  bool error_feedback;
  std::vector<Node*> members;
  size_t bytes = 0;
};

// The AllReduces each node depends on: an AllReduce whose input needs another one's result
// cannot share its collective (that would be a cycle).
std::map<const Node*, std::set<const Node*>> allreduces_upstream(const NodeVector& ops) {
  std::map<const Node*, std::set<const Node*>> upstream;
  for (const auto& node : ops) {
    std::set<const Node*> up;
    for (const auto& in : node->input_values()) {
      const auto& u = upstream[in.get_node()];
      up.insert(u.begin(), u.end());
      if (dynamic_cast<const op::AllReduce*>(in.get_node())) up.insert(in.get_node());
    }
    upstream[node.get()] = std::move(up);
  }
  return upstream;
}

// The AllReduces (sum or mean) of `ops` in buckets, in the order the buckets close.
std::vector<Bucket> bucket_allreduces(const NodeVector& ops, size_t threshold_bytes) {
  std::vector<Bucket> done;
  std::vector<Bucket> open;  // at most one open bucket per (comm, type, op, compression)
  auto upstream = allreduces_upstream(ops);
  for (const auto& node : ops) {
    auto* ar = dynamic_cast<op::AllReduce*>(node.get());
    if (!ar) continue;
    auto r = ar->get_reduce_op();
    if (r != distributed::ReduceOp::sum && r != distributed::ReduceOp::mean) continue;
    std::string op = distributed::to_string(r);
    size_t bytes = shape_size(ar->get_shape()) * ar->get_element_type().size();
    auto it = std::find_if(open.begin(), open.end(), [&](const Bucket& b) {
      return b.comm == ar->get_communicator() && b.type == ar->get_element_type() && b.op == op &&
             b.compression == ar->get_compression() && b.error_feedback == ar->get_error_feedback();
    });
    bool depends = false;
    if (it != open.end())
      for (Node* m : it->members) depends = depends || upstream[ar].count(m);
    if (it != open.end() &&
        (depends || it->bytes + bytes > threshold_bytes || threshold_bytes == 0)) {
      done.push_back(std::move(*it));
      open.erase(it);
      it = open.end();
    }
    if (it == open.end()) {
      open.push_back(Bucket{ar->get_communicator(), ar->get_element_type(), op, ar->get_compression(),
                            ar->get_error_feedback(), {}, 0});
      it = std::prev(open.end());
    }
    it->members.push_back(ar);
    it->bytes += bytes;
  }
  for (auto& b : open) done.push_back(std::move(b));
  return done;
}

}  // namespace

size_t fuse_allreduce(Function& f, size_t threshold_bytes) {
  std::vector<Bucket> buckets = bucket_allreduces(f.get_ordered_ops(), threshold_bytes);
  std::map<Output, Output> replacements;
  for (const auto& b : buckets) {
    OutputVector inputs;
    for (Node* m : b.members) inputs.push_back(m->input_value(0));
    auto fused = std::make_shared<FusedAllReduce>(inputs, b.op, b.comm);
    fused->set_compression(b.compression, b.error_feedback);
    std::string names;
    for (Node* m : b.members) names += (names.empty() ? "" : "+") + m->get_name();
    fused->set_friendly_name(names);
    for (size_t i = 0; i < b.members.size(); ++i)
      replacements[b.members[i]->output(0)] = fused->output(i);
  }
  replace_outputs(f, replacements);
  return buckets.size();
}

namespace pass {

void fuse_allreduce(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_allreduce(*plan.function, default_fusion_threshold());
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
