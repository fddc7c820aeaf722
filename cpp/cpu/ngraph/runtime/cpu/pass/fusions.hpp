// The CPU fusions: graph rewrites that form the backend-internal ops of op/ from the ops they
// stand for. Each runs on a compiled copy of the function, after autodiff, as a named pass of
// the pipeline (plan.hpp; one file each in this folder, run in the order listed here). Each
// returns what it formed, for tests. A Node knows its inputs, not its readers: each rewrite
// builds a Users index of the function at its start.
#pragma once

#include <map>
#include <vector>

#include "ngraph/function.hpp"
#include "ngraph/node.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// Rewrites 2-D Dot/MatMul into MatMulBias, absorbing transposed Reshapes of its inputs, a bias
// Add and a ReLU when the matmul's value has no other use. Returns the number of fusions.
size_t fuse_matmul_bias_relu(Function& f);

// Folds BatchNormInference of a Convolution's result (its only use) into the convolution: with
// s = gamma / sqrt(variance + eps), the filters become w * s (per output channel) and a bias
// beta - mean * s is added, as graph ops (constant folding evaluates them when gamma, beta,
// mean, variance and w are constants; otherwise they run each call, on the filters' size).
// Returns the number of batch norms folded.
size_t fold_batch_norm_into_convolution(Function& f);

// Rewrites Convolution + a per-channel bias Add (+ ReLU) into ConvolutionBias where the
// convolution's and the sum's values have no other use. Returns the number of fusions.
size_t fuse_convolution_bias_relu(Function& f);

// Rewrites ConvolutionBias (without ReLU) + an Add of a value of its result's shape (+ ReLU)
// into ConvolutionBias with that summand (a residual connection) where the convolution's and
// the sum's values have no other use. Returns the number of fusions.
size_t fuse_convolution_sum_relu(Function& f);

// Rewrites BatchNormTraining/BatchNormInference whose normalized output is read only by a ReLU
// into BatchNormRelu; in training, a BatchNormTrainingBackprop of the same data whose delta is
// the ReLU's gradient (Select(Greater(relu, 0), d, 0), used only there) becomes
// BatchNormReluBackprop reading the forward's mask. Returns the number of fusions (forward and
// backward counted apart).
size_t fuse_batch_norm_relu(Function& f);

// Pairs each MaxPoolBackprop with a MaxPool of the same argument and geometry (its ceil_mode
// resolved into padding): the MaxPool becomes a MaxPoolWithWorkspace, the backprop a
// MaxPoolBackpropWithWorkspace reading that workspace. Returns the number of backprops paired.
size_t fuse_max_pool_workspace(Function& f);

// Forms AttentionSoftmax from Softmax over the last axis of (Select(mask, (scores * c), -inf))
// (the Select or the Multiply may be missing, not both; the parts read only by the next), and
// AttentionSoftmaxBackprop from Softmax's gradient rule y * (d - Broadcast(Sum(d * y))), then
// Select(mask, ., 0) and * c as autodiff builds them for the same mask and scale. Returns the
// number of nodes formed.
size_t fuse_attention_softmax(Function& f);

// Groups chains of elementwise ops (same shape; intermediates used once, or also taken by
// variable updates and results, which become extra outputs) into FusedElementwise nodes.
// Returns the number of groups formed.
size_t fuse_elementwise(Function& f);

// Replaces AllReduce nodes (sum or mean) by FusedAllReduce nodes: consecutive ones (in the
// function's order, the same on every rank) with the same communicator, type and reduction
// share one until it holds `threshold_bytes` (0: one each, still asynchronous).
size_t fuse_allreduce(Function& f, size_t threshold_bytes);
// NGRAPH_FUSION_THRESHOLD (bytes) or 64 MiB.
size_t default_fusion_threshold();

namespace pass {

// Whether the fusion passes run: with the graph optimisations and fusion both on.
inline bool fusion_enabled(const ExecutionPlan& plan) {
  return plan.options.optimize && plan.options.fuse;
}

// The nodes reading each value of a function (in the order of the ops it is built from).
class Users {
 public:
  explicit Users(const NodeVector& ops) {
    for (const auto& node : ops)
      for (const auto& in : node->input_values()) m_users[in].push_back(node.get());
  }
  // The readers of v, or nullptr when nothing reads it.
  const std::vector<Node*>* of(const Output& v) const {
    auto it = m_users.find(v);
    return it == m_users.end() ? nullptr : &it->second;
  }
  // The only reader of v, or nullptr.
  Node* single(const Output& v) const {
    auto* u = of(v);
    return u && u->size() == 1 ? (*u)[0] : nullptr;
  }

 private:
  std::map<Output, std::vector<Node*>> m_users;
};

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
