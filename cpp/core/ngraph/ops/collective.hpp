// Collective ops: data-parallel communication inside the graph, run natively by the backend
// on the communicator the graph was built with. They are never merged or folded (not pure).
#pragma once

#include <memory>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/node.hpp"

namespace ngraph {
class Function;
namespace op {

// What every collective shares: its communicator (the default one when none is given) and
// a one-line signature that all ranks must agree on before running the graph.
class Collective {
 public:
  virtual ~Collective() = default;
  const std::shared_ptr<distributed::Communicator>& get_communicator() const { return m_comm; }
  void set_communicator(std::shared_ptr<distributed::Communicator> comm) { m_comm = std::move(comm); }
  // "AllReduce f32{784,600} sum"; empty for point-to-point ops (Send/Recv pair up per rank).
  virtual std::string collective_signature() const = 0;

 protected:
  // Fills in the default communicator; returns it.
  distributed::Communicator& communicator();
  std::shared_ptr<distributed::Communicator> m_comm;
};

// Gives the collectives of `f` (a backend's compiled copy of a graph) communicators of their
// own: one Communicator::duplicate of each communicator their ops run on, made in the order
// the ops come in, so every call of the compiled computation has its traffic to itself
// (concurrent calls of different computations cannot match each other's messages). The
// identity given to each duplicate hashes the graph's structure (op types, element types,
// shapes, edges; not names), so ranks that pair up different computations find out at the
// first call. Collective over the ranks of each communicator when the graph has
// collectives; point-to-point ops (Send/Recv, paired by tag) keep their communicator.
void use_private_communicators(Function& f);

// AllReduce(x, reduce_op): every rank gets the elementwise reduction of all ranks' x.
// reduce_op: sum, mean (floating-point only), max, min, prod.
// Gradient (for the global objective, the sum of every rank's loss): sum -> the sum over
// ranks of the incoming gradients (an AllReduce sum); mean -> their mean; max/min -> that sum,
// shared by the ranks whose value is the extreme; prod -> that sum times the product of the
// other ranks' values (computed without dividing by zero).
// compression (f32 sum and mean only; anything else with compression fails naming the op):
// "bf16" or "fp16" sends the values of the network step in 16 bits, summed in f32 (never in
// shared memory); error_feedback carries each rank's rounding error into its next send
// (needs compression). The gradient's AllReduce inherits both.
class AllReduce : public Op<AllReduce>, public Collective {
 public:
  static constexpr const char* type_name = "AllReduce";
  AllReduce() = default;
  // nGraph's spelling: AllReduce(x) sums.
  explicit AllReduce(const Output& x, distributed::ReduceOp reduce_op = distributed::ReduceOp::sum,
                     std::shared_ptr<distributed::Communicator> comm = nullptr);
  // reduce_op by name ("sum", ...); an unknown name fails naming the op and the value.
  AllReduce(const Output& x, const std::string& reduce_op,
            std::shared_ptr<distributed::Communicator> comm = nullptr);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on_enum("reduce_op", m_reduce_op, distributed::reduce_op_from_string);
    v.on_enum("compression", m_compression, distributed::wire_from_string);
    v.on("error_feedback", m_error_feedback);
  }
  bool is_pure() const override { return false; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::string collective_signature() const override;
  distributed::ReduceOp get_reduce_op() const { return m_reduce_op; }
  distributed::Wire get_compression() const { return m_compression; }
  bool get_error_feedback() const { return m_error_feedback; }
  // Validates again (compression needs an f32 sum or mean).
  void set_compression(distributed::Wire wire, bool error_feedback = false);

 private:
  distributed::ReduceOp m_reduce_op = distributed::ReduceOp::sum;
  distributed::Wire m_compression = distributed::Wire::f32;
  bool m_error_feedback = false;
};

// " compression=bf16" / " compression=fp16+error_feedback" for agreement signatures; "" for none.
std::string compression_signature(distributed::Wire wire, bool error_feedback);
// Fails on `node` unless `wire` is f32 or the type is f32 and the reduction sum or mean, and
// unless error feedback comes with a 16-bit wire.
void check_compression(const Node& node, distributed::Wire wire, bool error_feedback, element::Type type,
                       distributed::ReduceOp op);

// BroadcastDistributed(x, root): every rank gets root's x.
// Gradient: the sum over ranks of the incoming gradients goes to root's x; other ranks' x get 0
// (their value is not used).
class BroadcastDistributed : public Op<BroadcastDistributed>, public Collective {
 public:
  static constexpr const char* type_name = "BroadcastDistributed";
  BroadcastDistributed() = default;
  BroadcastDistributed(const Output& x, int64_t root = 0,
                       std::shared_ptr<distributed::Communicator> comm = nullptr);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("root", m_root); }
  bool is_pure() const override { return false; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::string collective_signature() const override;
  int get_root() const { return static_cast<int>(m_root); }

 private:
  int64_t m_root = 0;
};

// AllGather(x, axis): the ranks' x concatenated along axis, in rank order.
// Gradient: rank r gets its slice of the sum over ranks of the incoming gradients
// (ReduceScatter sum).
class AllGather : public Op<AllGather>, public Collective {
 public:
  static constexpr const char* type_name = "AllGather";
  AllGather() = default;
  AllGather(const Output& x, int64_t axis = 0, std::shared_ptr<distributed::Communicator> comm = nullptr);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("axis", m_axis); }
  bool is_pure() const override { return false; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::string collective_signature() const override;
  size_t get_axis() const { return static_cast<size_t>(m_axis); }

 private:
  int64_t m_axis = 0;
};

// ReduceScatter(x, reduce_op, axis): the reduction of all ranks' x, split along axis (whose
// size must divide by the number of ranks); rank r keeps part r.
// Gradient: sum -> AllGather of the incoming gradients; mean -> the same divided by the
// number of ranks; max/min/prod have no rule.
class ReduceScatter : public Op<ReduceScatter>, public Collective {
 public:
  static constexpr const char* type_name = "ReduceScatter";
  ReduceScatter() = default;
  explicit ReduceScatter(const Output& x,
                         distributed::ReduceOp reduce_op = distributed::ReduceOp::sum,
                         int64_t axis = 0, std::shared_ptr<distributed::Communicator> comm = nullptr);
  // reduce_op by name ("sum", ...); an unknown name fails naming the op and the value.
  ReduceScatter(const Output& x, const std::string& reduce_op, int64_t axis = 0,
                std::shared_ptr<distributed::Communicator> comm = nullptr);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on_enum("reduce_op", m_reduce_op, distributed::reduce_op_from_string);
    v.on("axis", m_axis);
  }
  bool is_pure() const override { return false; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::string collective_signature() const override;
  distributed::ReduceOp get_reduce_op() const { return m_reduce_op; }
  size_t get_axis() const { return static_cast<size_t>(m_axis); }

 private:
  distributed::ReduceOp m_reduce_op = distributed::ReduceOp::sum;
  int64_t m_axis = 0;
};

// Send(x, dest, tag): a sink (no outputs) that sends x to rank dest. It starts when x is
// ready and completes by the end of the call, so a ring of Send/Recv cannot deadlock.
// No gradient: a rank's autodiff cannot reach another rank's graph.
class Send : public Op<Send>, public Collective {
 public:
  static constexpr const char* type_name = "Send";
  Send() = default;
  Send(const Output& x, int64_t dest, int64_t tag = 0,
       std::shared_ptr<distributed::Communicator> comm = nullptr);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("dest", m_dest);
    v.on("tag", m_tag);
  }
  bool is_pure() const override { return false; }
  std::string collective_signature() const override { return ""; }
  int get_dest() const { return static_cast<int>(m_dest); }
  int get_tag() const { return static_cast<int>(m_tag); }

 private:
  int64_t m_dest = 0, m_tag = 0;
};

// Recv(shape, element_type, src, tag): receives a value from rank src; a message of another
// size is an error naming both sizes. No gradient (see Send).
class Recv : public Op<Recv>, public Collective {
 public:
  static constexpr const char* type_name = "Recv";
  Recv() = default;
  Recv(const Shape& shape, element::Type element_type, int64_t src, int64_t tag = 0,
       std::shared_ptr<distributed::Communicator> comm = nullptr);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("shape", m_shape);
    v.on("element_type", m_type);
    v.on("src", m_src);
    v.on("tag", m_tag);
  }
  bool is_pure() const override { return false; }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  std::string collective_signature() const override { return ""; }
  int get_src() const { return static_cast<int>(m_src); }
  int get_tag() const { return static_cast<int>(m_tag); }

 private:
  Shape m_shape;
  element::Type m_type = element::f32;
  int64_t m_src = 0, m_tag = 0;
};

}  // namespace op
}  // namespace ngraph
