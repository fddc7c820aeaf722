// CPU-specific fusion: backend-internal ops and the pass that forms them. They are not
// ops of the core (no Python wrapper, no gradient rule): the pass runs on a compiled copy,
// after autodiff.
#pragma once

#include "ngraph/function.hpp"
#include "ngraph/node.hpp"
#include "ngraph/ops/batch_norm.hpp"
#include "ngraph/ops/collective.hpp"
#include "ngraph/ops/convolution.hpp"
#include "ngraph/ops/pooling.hpp"
#include "ngraph/runtime/cpu/scalar_ops.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// MatMulBias(a, b[, bias]): op(a) . op(b) (+ bias on every row) (then ReLU), with op an
// optional transpose given as strides: one oneDNN matmul with bias and a post-op. a and b may
// have any rank >= 1: each is the row-major matrix of its axes split at a_split (b_split):
// rows = prod(shape[:split]), columns = prod(shape[split:]) (a Dot of an activation
// [batch, length, width] and a weight is one GEMM of [batch * length, width], without a copy).
// The result's shape is op(a)'s row axes followed by op(b)'s column axes (the Dot's shape).
class MatMulBias : public Op<MatMulBias> {
 public:
  static constexpr const char* type_name = "CPUMatMulBias";
  MatMulBias() = default;
  MatMulBias(const Output& a, const Output& b, const Output& bias, bool transpose_a,
             bool transpose_b, bool relu, int64_t a_split = -1, int64_t b_split = -1);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("transpose_a", m_transpose_a);
    v.on("transpose_b", m_transpose_b);
    v.on("relu", m_relu);
    v.on("a_split", m_a_split);
    v.on("b_split", m_b_split);
  }
  bool has_bias() const { return get_input_size() == 3; }
  bool get_transpose_a() const { return m_transpose_a; }
  bool get_transpose_b() const { return m_transpose_b; }
  bool get_relu() const { return m_relu; }
  // The GEMM: op(a) is m x k, op(b) is k x n.
  void get_gemm(size_t& m, size_t& n, size_t& k) const;

 private:
  // Where each operand's axes split into the matrix's rows and columns (-1: before the last).
  size_t split(size_t input) const;
  bool m_transpose_a = false, m_transpose_b = false, m_relu = false;
  int64_t m_a_split = -1, m_b_split = -1;
};

// FusedElementwise(inputs...): a chain of elementwise ops evaluated in one pass over the data,
// block by block, so intermediates never go to memory. Inputs have the result's shape or are
// scalars; boolean inputs are Select conditions. Output 0 is the last instruction's value;
// outputs 1.. are the registers in `extra_outputs`: intermediates that a variable update or
// a result also takes (an optimizer's momentum next to the weights it moves), written in the
// same pass.
class FusedElementwise : public Op<FusedElementwise> {
 public:
  // One code per fusible op, named as the op (scalar_ops.hpp lists them).
  enum class Code {
#define NGRAPH_CPU_CODE(Name) Name,
    NGRAPH_CPU_FUSED_OPS(NGRAPH_CPU_CODE, NGRAPH_CPU_CODE, NGRAPH_CPU_CODE, NGRAPH_CPU_CODE)
#undef NGRAPH_CPU_CODE
  };
  struct Instr {
    Code code;
    int dst, a, b, c;  // registers: inputs first, then one per instruction
  };
  static constexpr const char* type_name = "CPUFusedElementwise";
  FusedElementwise() = default;
  FusedElementwise(const OutputVector& inputs, std::vector<Instr> program, const Shape& shape,
                   element::Type type, std::string description,
                   std::vector<int> extra_outputs = {});
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("program", m_description); }
  const std::vector<Instr>& get_program() const { return m_program; }
  const std::vector<int>& get_extra_outputs() const { return m_extra_outputs; }

 private:
  std::vector<Instr> m_program;
  std::vector<int> m_extra_outputs;
  Shape m_shape;
  element::Type m_type = element::f32;
  std::string m_description;
};

// Groups chains of elementwise ops (same shape; intermediates used once, or also taken by
// variable updates and results, which become extra outputs) into FusedElementwise nodes.
// Returns the number of groups formed.
size_t fuse_elementwise(Function& f);

// FusedAllReduce(g1, ..., gk): the AllReduce (sum or mean) of several tensors as one
// collective over their bytes laid end to end: one message instead of k (gradient fusion, as
// Horovod's fusion buffer and DDP's buckets). Its kernel only starts the collective; the
// executable waits for it before the first step that reads its outputs, so the rest of the
// backward pass runs meanwhile. The planner lays the inputs and the outputs out contiguously,
// so nothing is copied.
class FusedAllReduce : public Op<FusedAllReduce>, public op::Collective {
 public:
  static constexpr const char* type_name = "CPUFusedAllReduce";
  FusedAllReduce() = default;
  FusedAllReduce(const OutputVector& inputs, distributed::ReduceOp reduce_op,
                 std::shared_ptr<distributed::Communicator> comm);
  // reduce_op by name ("sum" or "mean").
  FusedAllReduce(const OutputVector& inputs, const std::string& reduce_op,
                 std::shared_ptr<distributed::Communicator> comm);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on_enum("reduce_op", m_reduce_op, distributed::reduce_op_from_string);
  }
  bool is_pure() const override { return false; }
  std::string collective_signature() const override;
  distributed::ReduceOp get_reduce_op() const { return m_reduce_op; }

 private:
  distributed::ReduceOp m_reduce_op = distributed::ReduceOp::sum;
};

// Replaces AllReduce nodes (sum or mean) by FusedAllReduce nodes: consecutive ones (in the
// function's order, the same on every rank) with the same communicator, type and reduction
// share one until it holds `threshold_bytes` (0: one each, still asynchronous).
size_t fuse_allreduce(Function& f, size_t threshold_bytes);
// NGRAPH_FUSION_THRESHOLD (bytes) or 64 MiB.
size_t default_fusion_threshold();

// The names of the backend-internal ops (they have kernels but are not in the OpRegistry).
const std::vector<std::string>& internal_op_names();

// ConvolutionBias(x, w, bias[, summand]): a forward convolution (f32, undilated data,
// non-negative padding) plus a bias per output channel (bias has C_out elements), plus a
// summand of the result's shape when given (a residual connection: oneDNN's sum post-op), then
// optionally ReLU: one oneDNN convolution with a bias and post-ops.
class ConvolutionBias : public Op<ConvolutionBias> {
 public:
  static constexpr const char* type_name = "CPUConvolutionBias";
  static constexpr size_t INPUT_SUMMAND = 3;
  ConvolutionBias() = default;
  ConvolutionBias(const Output& x, const Output& w, const Output& bias,
                  const op::ConvolutionWindow& window, bool relu, const Output& summand = {});
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    m_window.visit(v);
    v.on("relu", m_relu);
  }
  const op::ConvolutionWindow& get_window() const { return m_window; }
  bool get_relu() const { return m_relu; }
  bool has_summand() const { return get_input_size() == 4; }

 private:
  op::ConvolutionWindow m_window;
  bool m_relu = false;
};

// True when the CPU backend runs this Convolution (or backprop, or ConvolutionBias) on oneDNN:
// f32, 1-3 spatial axes, undilated data, non-negative padding, no empty tensor
// (convolution_kernels.cpp; the fusions form only what it takes).
bool dnnl_takes_convolution(const Node& node);

// Rewrites Convolution + a per-channel bias Add (+ ReLU) into ConvolutionBias where the
// convolution's and the sum's values have no other use. Returns the number of fusions.
size_t fuse_convolution_bias_relu(Function& f);

// Rewrites ConvolutionBias (without ReLU) + an Add of a value of its result's shape (+ ReLU)
// into ConvolutionBias with that summand (a residual connection) where the convolution's and
// the sum's values have no other use. Returns the number of fusions.
size_t fuse_convolution_sum_relu(Function& f);

// Folds BatchNormInference of a Convolution's result (its only use) into the convolution: with
// s = gamma / sqrt(variance + eps), the filters become w * s (per output channel) and a bias
// beta - mean * s is added, as graph ops (constant folding evaluates them when gamma, beta,
// mean, variance and w are constants; otherwise they run each call, on the filters' size).
// Returns the number of batch norms folded.
size_t fold_batch_norm_into_convolution(Function& f);

// BatchNormRelu: BatchNormTraining or BatchNormInference (same inputs and outputs) with ReLU
// applied to the normalized output: oneDNN's fuse_norm_relu. Formed where ReLU is the only use
// of the normalized value (ReLU's gradient reads its output, so nothing else needs the value
// before it). In training, when the ReLU's gradient feeds a BatchNormTrainingBackprop of the same
// data, a fourth output is the ReLU's mask for BatchNormReluBackprop: typed u8 with the data's
// shape; its bytes and layout are the primitive's workspace (a bit per element for oneDNN's
// fast implementations), or one byte per element, plain, where the reference loops run.
class BatchNormRelu : public Op<BatchNormRelu>, public op::BatchNormBase {
 public:
  static constexpr const char* type_name = "CPUBatchNormRelu";
  static constexpr size_t OUTPUT_MASK = 3;
  BatchNormRelu() = default;
  // `bn` is a BatchNormTraining or BatchNormInference; the new node reads its inputs.
  BatchNormRelu(const Node& bn, bool mask);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("epsilon", m_epsilon);
    v.on("training", m_training);
    v.on("mask", m_mask);
  }
  bool is_training() const { return m_training; }
  bool has_mask() const { return m_mask; }

 private:
  bool m_training = false;
  bool m_mask = false;
};

// BatchNormReluBackprop(gamma, beta, input, mean, variance, delta, mask): the gradient of
// BatchNormRelu's training output: BatchNormTrainingBackprop of delta where the mask (the
// forward's output 3) says the normalized value was positive, zero elsewhere. ReLU's gradient
// (Select(y > 0, delta, 0)) runs inside oneDNN's backward pass instead of as a pass of its own
// over three tensors. Outputs as BatchNormTrainingBackprop's.
class BatchNormReluBackprop : public Op<BatchNormReluBackprop>, public op::BatchNormBase {
 public:
  static constexpr const char* type_name = "CPUBatchNormReluBackprop";
  static constexpr size_t INPUT_MASK = 6;
  BatchNormReluBackprop() = default;
  // `backprop` is a BatchNormTrainingBackprop; its delta is replaced by `delta` (before the
  // ReLU's gradient) and `mask`.
  BatchNormReluBackprop(const Node& backprop, const Output& delta, const Output& mask);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("epsilon", m_epsilon); }
};

// Rewrites BatchNormTraining/BatchNormInference whose normalized output is read only by a ReLU
// into BatchNormRelu; in training, a BatchNormTrainingBackprop of the same data whose delta is
// the ReLU's gradient (Select(Greater(relu, 0), d, 0), used only there) becomes
// BatchNormReluBackprop reading the forward's mask. Returns the number of fusions (forward and
// backward counted apart).
size_t fuse_batch_norm_relu(Function& f);

// Rewrites 2-D Dot/MatMul into MatMulBias, absorbing transposed Reshapes of its inputs, a bias
// Add and a ReLU when the matmul's value has no other use. Returns the number of fusions.
size_t fuse_matmul_bias_relu(Function& f);

// MaxPoolWithWorkspace(x): MaxPool(x, ...) whose oneDNN primitive also writes its workspace
// (where each maximum is) as output 1, for MaxPoolBackpropWithWorkspace to read instead of
// running the forward again. Output 1 is typed i32 with the result's shape; its bytes and
// layout are the primitive's (the layout rule gives it the primitive's workspace_desc()).
class MaxPoolWithWorkspace : public Op<MaxPoolWithWorkspace>, public op::PoolingAttributes {
 public:
  static constexpr const char* type_name = "CPUMaxPoolWithWorkspace";
  MaxPoolWithWorkspace() = default;
  explicit MaxPoolWithWorkspace(const op::MaxPool& pool);  // on pool's input
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { visit_geometry(v, true); }
};

// MaxPoolBackpropWithWorkspace(arg_forward, delta, workspace): MaxPoolBackprop reading the
// workspace of the MaxPoolWithWorkspace on arg_forward with the same geometry. arg_forward is
// kept as an input (nGraph's MaxPoolWithIndicesBackprop does too): its layout fixes the
// forward primitive, and the loops, for what oneDNN rejects, read it.
class MaxPoolBackpropWithWorkspace : public Op<MaxPoolBackpropWithWorkspace>,
                                     public op::PoolingAttributes {
 public:
  static constexpr const char* type_name = "CPUMaxPoolBackpropWithWorkspace";
  MaxPoolBackpropWithWorkspace() = default;
  MaxPoolBackpropWithWorkspace(const op::MaxPoolBackprop& backprop, const Output& workspace);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { visit_geometry(v, false); }
};

// Whether a MaxPool has the oneDNN primitives (f32, forward with a workspace and backward) that
// pairing it with its backprop needs (pooling_kernels.cpp).
bool max_pool_workspace_supported(const Node& max_pool);

// Pairs each MaxPoolBackprop with a MaxPool of the same argument and geometry (its ceil_mode
// resolved into padding): the MaxPool becomes a MaxPoolWithWorkspace, the backprop a
// MaxPoolBackpropWithWorkspace reading that workspace. Returns the number of backprops paired.
size_t fuse_max_pool_workspace(Function& f);

// AttentionSoftmax(scores[, mask]): softmax over the last axis of
// select(mask, scores * scale, -inf), row by row in one pass over the data (attention's
// probabilities: QK^T scaled, causally masked, normalised). mask is boolean and broadcasts
// NumPy-style to scores. A row whose values are all masked or -inf is NaN, and a NaN makes its
// row NaN, as in the composition it replaces.
class AttentionSoftmax : public Op<AttentionSoftmax> {
 public:
  static constexpr const char* type_name = "CPUAttentionSoftmax";
  AttentionSoftmax() = default;
  AttentionSoftmax(const Output& scores, const Output& mask, double scale);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("scale", m_scale); }
  bool has_mask() const { return get_input_size() == 2; }
  double get_scale() const { return m_scale; }

 private:
  double m_scale = 1.0;
};

// AttentionSoftmaxBackprop(delta, y[, mask]): the gradient of AttentionSoftmax's scores given
// its output y and the incoming gradient delta: scale * select(mask, y * (delta -
// sum(delta * y over the last axis)), 0).
class AttentionSoftmaxBackprop : public Op<AttentionSoftmaxBackprop> {
 public:
  static constexpr const char* type_name = "CPUAttentionSoftmaxBackprop";
  AttentionSoftmaxBackprop() = default;
  AttentionSoftmaxBackprop(const Output& delta, const Output& y, const Output& mask, double scale);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("scale", m_scale); }
  bool has_mask() const { return get_input_size() == 3; }
  double get_scale() const { return m_scale; }

 private:
  double m_scale = 1.0;
};

// Forms AttentionSoftmax from Softmax over the last axis of (Select(mask, (scores * c), -inf))
// (the Select or the Multiply may be missing, not both; the parts read only by the next), and AttentionSoftmaxBackprop from
// Softmax's gradient rule y * (d - Broadcast(Sum(d * y))), then Select(mask, ., 0) and * c as
// autodiff builds them for the same mask and scale. Returns the number of nodes formed.
size_t fuse_attention_softmax(Function& f);

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
