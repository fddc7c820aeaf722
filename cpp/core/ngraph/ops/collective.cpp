#include "ngraph/ops/collective.hpp"

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "ngraph/function.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"
#include "ngraph/ops/reduction.hpp"
#include "ngraph/ops/shape_ops.hpp"

namespace ngraph {
namespace op {

distributed::Communicator& Collective::communicator() {
  if (!m_comm) m_comm = distributed::get_default_communicator();
  return *m_comm;
}

namespace {
// Collectives move numbers: boolean is not supported, as in MPI reductions.
void check_collective_type(const Node& node, size_t i) {
  // MPI has no 16-bit float type: collectives take what they can reduce and send as is.
  element::Type t = node.get_input_element_type(i);
  if (t.is_storage_only())
    throw ElementTypeError(element::storage_only_message(node.get_type_name(), t));
  check_element_kind(node, i, ElementKind::numeric);
}
// The reduction named `op`; an unknown name fails from `node`.
distributed::ReduceOp reduce_op_of(const Node& node, const std::string& op) {
  try {
    return distributed::reduce_op_from_string(op);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}
void check_reduce_op(const Node& node, distributed::ReduceOp r, element::Type t) {
  if (r == distributed::ReduceOp::mean && !t.is_real())
    node.fail_type("reduce_op 'mean' needs a floating-point type, got " + t.get_type_name());
}
std::string type_and_shape(const Output& o) {
  return o.get_element_type().get_type_name() + to_braces(o.get_shape());
}
void check_peer(const Node& node, const char* what, int64_t peer, distributed::Communicator& comm) {
  if (peer < 0 || peer >= comm.size())
    node.fail(concat_message(what, " ", peer, " is out of range for ", comm.name()));
  if (peer == comm.rank())
    node.fail(concat_message(what, " ", peer, " is this rank itself"));
}
}  // namespace

// ------------------------------------------------------------------------------ AllReduce

AllReduce::AllReduce(const Output& x, distributed::ReduceOp reduce_op,
                     std::shared_ptr<distributed::Communicator> comm)
    : Op<AllReduce>({x}), m_reduce_op(reduce_op) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

AllReduce::AllReduce(const Output& x, const std::string& reduce_op,
                     std::shared_ptr<distributed::Communicator> comm)
    : Op<AllReduce>({x}) {
  m_reduce_op = reduce_op_of(*this, reduce_op);
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

void AllReduce::validate_and_infer_types() {
  check_input_count(1);
  communicator();
  check_collective_type(*this, 0);
  check_reduce_op(*this, m_reduce_op, get_input_element_type(0));
  check_compression(*this, m_compression, m_error_feedback, get_input_element_type(0), m_reduce_op);
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

void AllReduce::set_compression(distributed::Wire wire, bool error_feedback) {
  m_compression = wire;
  m_error_feedback = error_feedback;
  validate_and_infer_types();
}

std::string AllReduce::collective_signature() const {
  return "AllReduce " + type_and_shape(input_value(0)) + " " + distributed::to_string(m_reduce_op) +
         compression_signature(m_compression, m_error_feedback);
}

std::string compression_signature(distributed::Wire wire, bool error_feedback) {
  if (wire == distributed::Wire::f32) return "";
  return std::string(" compression=") + distributed::to_string(wire) + (error_feedback ? "+error_feedback" : "");
}

void check_compression(const Node& node, distributed::Wire wire, bool error_feedback, element::Type type,
                       distributed::ReduceOp op) {
  if (wire == distributed::Wire::f32) {
    if (error_feedback) node.fail("error_feedback needs compression 'bf16' or 'fp16', got 'none'");
    return;
  }
  std::string message = concat_message("compression '", distributed::to_string(wire),
                                        "' applies to f32 sum and mean only, got ", type.get_type_name(), " ",
                                        distributed::to_string(op));
  if (type != element::f32) node.fail_type(message);  // a TypeError in Python
  if (op != distributed::ReduceOp::sum && op != distributed::ReduceOp::mean) node.fail(message);
}

void AllReduce::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  const std::string np = "numpy";
  Output x = input_value(0), y = output(0);
  element::Type t = get_element_type();
  auto op = get_reduce_op();
  if (op == distributed::ReduceOp::sum || op == distributed::ReduceOp::mean) {
    auto back = std::make_shared<AllReduce>(deltas[0], m_reduce_op, m_comm);
    back->set_compression(m_compression, m_error_feedback);
    adj.add_delta(x, back);
    return;
  }
  Output total = std::make_shared<AllReduce>(deltas[0], distributed::ReduceOp::sum, m_comm);
  auto zero = autodiff::scalar(t, 0.0), one = autodiff::scalar(t, 1.0);
  if (op == distributed::ReduceOp::max || op == distributed::ReduceOp::min) {
    // A Select, not Convert(bool): the mask is a constant for a gradient of this gradient.
    auto hit = std::make_shared<Select>(std::make_shared<Equal>(x, y), one, zero, np);
    auto hits = std::make_shared<AllReduce>(hit, distributed::ReduceOp::sum, m_comm);
    adj.add_delta(x, std::make_shared<Multiply>(std::make_shared<Divide>(total, hits), hit));
    return;
  }
  // prod: d/dx_r = product of the other ranks' values, without dividing by zero.
  auto is_zero = std::make_shared<Equal>(x, zero, np);
  auto nonzero_x = std::make_shared<Select>(is_zero, one, x, np);
  auto zeros = std::make_shared<AllReduce>(std::make_shared<Convert>(is_zero, t),
                                           distributed::ReduceOp::sum, m_comm);
  auto rest = std::make_shared<AllReduce>(nonzero_x, distributed::ReduceOp::prod, m_comm);
  auto no_zero = std::make_shared<Equal>(zeros, zero, np);
  auto one_zero_here = std::make_shared<LogicalAnd>(std::make_shared<Equal>(zeros, one, np), is_zero);
  auto others = std::make_shared<Select>(no_zero, std::make_shared<Divide>(rest, nonzero_x),
                                         std::make_shared<Select>(one_zero_here, rest, zero, np));
  adj.add_delta(x, std::make_shared<Multiply>(total, others));
}

// ------------------------------------------------------------------- BroadcastDistributed

BroadcastDistributed::BroadcastDistributed(const Output& x, int64_t root,
                                           std::shared_ptr<distributed::Communicator> comm)
    : Op<BroadcastDistributed>({x}), m_root(root) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

void BroadcastDistributed::validate_and_infer_types() {
  check_input_count(1);
  auto& comm = communicator();
  check_collective_type(*this, 0);
  if (m_root < 0 || m_root >= comm.size())
    fail(concat_message("root ", m_root, " is out of range for ", comm.name()));
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

std::string BroadcastDistributed::collective_signature() const {
  return "BroadcastDistributed " + type_and_shape(input_value(0)) + " root=" + std::to_string(m_root);
}

void BroadcastDistributed::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // Every rank takes part in the AllReduce; only the root keeps the result.
  Output total = std::make_shared<AllReduce>(deltas[0], distributed::ReduceOp::sum, m_comm);
  double keep = communicator().rank() == m_root ? 1.0 : 0.0;
  adj.add_delta(input_value(0), std::make_shared<Multiply>(
                                    total, autodiff::scalar(get_element_type(), keep), "numpy"));
}

// ------------------------------------------------------------------------------ AllGather

AllGather::AllGather(const Output& x, int64_t axis, std::shared_ptr<distributed::Communicator> comm)
    : Op<AllGather>({x}), m_axis(axis) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

void AllGather::validate_and_infer_types() {
  check_input_count(1);
  auto& comm = communicator();
  check_collective_type(*this, 0);
  Shape s = get_input_shape(0);
  if (m_axis < 0 || static_cast<size_t>(m_axis) >= s.size())
    fail(concat_message("axis ", m_axis, " is out of range for arg shape ", s));
  s[static_cast<size_t>(m_axis)] *= static_cast<size_t>(comm.size());
  set_output_type(0, get_input_element_type(0), s);
}

std::string AllGather::collective_signature() const {
  return "AllGather " + type_and_shape(input_value(0)) + " axis=" + std::to_string(m_axis);
}

void AllGather::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), std::make_shared<ReduceScatter>(
                                    deltas[0], distributed::ReduceOp::sum, m_axis, m_comm));
}

// -------------------------------------------------------------------------- ReduceScatter

ReduceScatter::ReduceScatter(const Output& x, distributed::ReduceOp reduce_op, int64_t axis,
                             std::shared_ptr<distributed::Communicator> comm)
    : Op<ReduceScatter>({x}), m_reduce_op(reduce_op), m_axis(axis) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

ReduceScatter::ReduceScatter(const Output& x, const std::string& reduce_op, int64_t axis,
                             std::shared_ptr<distributed::Communicator> comm)
    : Op<ReduceScatter>({x}), m_axis(axis) {
  m_reduce_op = reduce_op_of(*this, reduce_op);
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

void ReduceScatter::validate_and_infer_types() {
  check_input_count(1);
  auto& comm = communicator();
  check_collective_type(*this, 0);
  check_reduce_op(*this, m_reduce_op, get_input_element_type(0));
  Shape s = get_input_shape(0);
  if (m_axis < 0 || static_cast<size_t>(m_axis) >= s.size())
    fail(concat_message("axis ", m_axis, " is out of range for arg shape ", s));
  auto n = static_cast<size_t>(comm.size());
  auto a = static_cast<size_t>(m_axis);
  if (s[a] % n != 0)
    fail(concat_message("axis ", m_axis, " of arg shape ", s, " (", s[a],
                        ") does not divide by the number of ranks (", n, ")"));
  s[a] /= n;
  set_output_type(0, get_input_element_type(0), s);
}

std::string ReduceScatter::collective_signature() const {
  return "ReduceScatter " + type_and_shape(input_value(0)) + " " +
         distributed::to_string(m_reduce_op) + " axis=" + std::to_string(m_axis);
}

void ReduceScatter::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  auto op = get_reduce_op();
  if (op != distributed::ReduceOp::sum && op != distributed::ReduceOp::mean)
    throw autodiff::NoGradientRule("[ReduceScatter] has no gradient rule for reduce_op '" +
                                   std::string(distributed::to_string(m_reduce_op)) +
                                   "' (only sum and mean)");
  Output g = std::make_shared<AllGather>(deltas[0], m_axis, m_comm);
  if (op == distributed::ReduceOp::mean)
    g = std::make_shared<Divide>(
        g, autodiff::scalar(get_element_type(), static_cast<double>(communicator().size())), "numpy");
  adj.add_delta(input_value(0), g);
}

// ----------------------------------------------------------------------------- Send, Recv

Send::Send(const Output& x, int64_t dest, int64_t tag, std::shared_ptr<distributed::Communicator> comm)
    : Op<Send>({x}), m_dest(dest), m_tag(tag) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

void Send::validate_and_infer_types() {
  check_input_count(1);
  check_collective_type(*this, 0);
  check_peer(*this, "dest", m_dest, communicator());
  set_output_size(0);
}

Recv::Recv(const Shape& shape, element::Type element_type, int64_t src, int64_t tag,
           std::shared_ptr<distributed::Communicator> comm)
    : m_shape(shape), m_type(element_type), m_src(src), m_tag(tag) {
  m_comm = std::move(comm);
  constructor_validate_and_infer_types();
}

void Recv::validate_and_infer_types() {
  check_input_count(0);
  if (!m_type.is_numeric())
    fail_type("element_type must be f32, f64, i32 or i64, got " + m_type.get_type_name());
  check_peer(*this, "src", m_src, communicator());
  set_output_type(0, m_type, m_shape);
}

void Recv::generate_adjoints(autodiff::Adjoints&, const OutputVector&) {
  throw autodiff::NoGradientRule(
      "[Recv] has no gradient rule: gradients do not flow back to the sending rank (each "
      "rank differentiates its own graph); send the gradient back explicitly");
}

NGRAPH_REGISTER_OP(AllReduce);
NGRAPH_REGISTER_OP(BroadcastDistributed);
NGRAPH_REGISTER_OP(AllGather);
NGRAPH_REGISTER_OP(ReduceScatter);
NGRAPH_REGISTER_OP(Send);
NGRAPH_REGISTER_OP(Recv);

void use_private_communicators(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  std::vector<Collective*> collectives;
  for (const auto& node : ops) {
    auto* coll = dynamic_cast<Collective*>(node.get());
    if (coll && !coll->collective_signature().empty()) collectives.push_back(coll);
  }
  if (collectives.empty()) return;
  auto comm_of = [](Collective* coll) {
    std::shared_ptr<distributed::Communicator> comm = coll->get_communicator();
    return comm ? comm : distributed::get_default_communicator();
  };
  // The graph's structure as the ranks of `comm` see it: the same text on every one of them
  // that built the same graph (names are left out: the counters in default names depend on
  // what else each process built). What follows a collective on another communicator is
  // only its ops and edges: its shapes may depend on that communicator, which differs
  // between these ranks (an AllGather over even or odd ranks, where those differ in number).
  auto identity_for = [&](const distributed::Communicator* comm) {
    std::ostringstream text;
    std::unordered_map<const Node*, size_t> index;
    std::unordered_map<const Node*, bool> other;  // downstream of another communicator's
    for (const auto& node : ops) {
      index[node.get()] = index.size();
      bool& o = other[node.get()];
      for (const auto& in : node->input_values()) o = o || other.at(in.get_node());
      auto* coll = dynamic_cast<Collective*>(node.get());
      bool collective = coll && !coll->collective_signature().empty();
      if (collective && comm_of(coll).get() != comm) o = true;
      text << node->get_type_name();
      for (const auto& in : node->input_values()) text << " " << index.at(in.get_node()) << ":" << in.get_index();
      if (!o) {
        for (size_t i = 0; i < node->get_output_size(); ++i)
          text << " -> " << node->get_output_element_type(i).get_type_name()
               << to_braces(node->get_output_shape(i));
        if (collective) text << " " << coll->collective_signature();
      }
      text << "\n";
    }
    uint64_t identity = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : text.str()) {
      identity ^= c;
      identity *= 1099511628211ull;
    }
    return identity;
  };
  std::string label = "graph '" + (f.get_name().empty() ? std::string("unnamed") : f.get_name()) + "'";
  std::vector<std::pair<distributed::Communicator*, std::shared_ptr<distributed::Communicator>>> made;
  for (Collective* coll : collectives) {
    std::shared_ptr<distributed::Communicator> comm = comm_of(coll);
    auto it = std::find_if(made.begin(), made.end(), [&](const auto& m) { return m.first == comm.get(); });
    if (it == made.end()) {
      auto mine = comm->duplicate(label, identity_for(comm.get()));
      it = made.insert(made.end(), {comm.get(), mine ? mine : comm});
    }
    coll->set_communicator(it->second);
  }
}

}  // namespace op
}  // namespace ngraph
