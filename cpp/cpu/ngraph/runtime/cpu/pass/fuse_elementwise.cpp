// Elementwise chains as one loop (FusedElementwise): a group grows from its last op through
// inputs that only the group reads (or that variable updates and results take besides: extra
// outputs), and runs as a register program over blocks of the data.
#include <set>
#include <string>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"
#include "ngraph/runtime/cpu/pass/fusions.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

using Code = FusedElementwise::Code;

// The fusible ops (generated from scalar_ops.hpp): their code, and whether they produce a
// mask (a boolean used by Select).
bool fusible_code(const std::string& t, Code& code, bool& mask) {
  static const std::map<std::string, std::pair<Code, bool>> table = [] {
    std::map<std::string, std::pair<Code, bool>> m;
#define NGRAPH_CPU_VALUE_OP(Name) \
  if (scalar::Name::fusible) m[#Name] = {Code::Name, false};
#define NGRAPH_CPU_MASK_OP(Name) \
  if (scalar::Name::fusible) m[#Name] = {Code::Name, true};
    NGRAPH_CPU_FUSED_OPS(NGRAPH_CPU_VALUE_OP, NGRAPH_CPU_VALUE_OP, NGRAPH_CPU_MASK_OP,
                         NGRAPH_CPU_VALUE_OP)
#undef NGRAPH_CPU_VALUE_OP
#undef NGRAPH_CPU_MASK_OP
    return m;
  }();
  auto it = table.find(t);
  if (it == table.end()) return false;
  code = it->second.first;
  mask = it->second.second;
  return true;
}

// A node the group can evaluate: floating-point data of `shape` (masks: boolean of `shape`
// from floating-point operands), every input of `shape` or a scalar.
bool fusible(const Node& node, const Shape& shape, element::Type type) {
  Code code;
  bool mask;
  if (node.get_output_size() != 1 || !fusible_code(node.get_type_name(), code, mask)) return false;
  if (node.get_shape() != shape) return false;
  if (node.get_element_type() != (mask ? element::boolean : type)) return false;
  for (size_t i = 0; i < node.get_input_size(); ++i) {
    const Output& in = node.input_value(i);
    bool cond = code == Code::Select && i == 0;
    if (in.get_element_type() != (cond ? element::boolean : type)) return false;
    if (!in.get_shape().empty() && in.get_shape() != shape) return false;
  }
  return true;
}

// A group may end at `root`: a fusible node of one real (not storage-only) element type.
bool may_root(const Node& root) {
  if (root.get_output_size() != 1) return false;
  element::Type type = root.get_element_type();
  return type.is_real() && !type.is_storage_only() && fusible(root, root.get_shape(), type);
}

// A sink: an Assign, or a Result nothing reads (no cycle can form through it).
bool is_sink(Node* u, const pass::Users& users) {
  if (u->get_type_name() == op::Assign::type_name) return true;
  return u->get_type_name() == op::Result::type_name && !users.of(u->output(0));
}

bool read_only_by_sinks(const Output& v, const pass::Users& users) {
  bool to_sinks = true;
  if (const auto* readers = users.of(v))
    for (Node* u : *readers) to_sinks = to_sinks && is_sink(u, users);
  return to_sinks;
}

// The nodes of a group, and the intermediates it also writes as extra outputs.
struct Group {
  std::set<const Node*> members;
  std::vector<Output> extra;
};

// Who else reads a candidate member's value: nobody outside the group, only sinks (then the
// group writes it as an extra output), or other nodes (then it stays outside).
enum class OutsideReaders { none, sinks, others };

OutsideReaders outside_readers(const Output& in, const Group& g, bool to_sinks, element::Type type,
                               const pass::Users& users) {
  bool sinks = false;
  for (Node* u : *users.of(in)) {
    if (g.members.count(u)) continue;
    if (!to_sinks || !is_sink(u, users) || in.get_element_type() != type)
      return OutsideReaders::others;
    sinks = true;
  }
  return sinks ? OutsideReaders::sinks : OutsideReaders::none;
}

// Grows the group of `root` through inputs that only the group uses, or that variable updates
// and results take besides: they read the value once the group has written it as an extra
// output. Only sinks qualify (an Assign, or a Result nothing reads: no cycle can form), and
// only where the group's own value goes to sinks too (an optimizer's update), so the
// scheduler, which runs updates late, delays nothing another rank waits for.
Group grow_group(Node& root, const pass::Users& users, const std::set<const Node*>& taken) {
  const Shape& shape = root.get_shape();
  element::Type type = root.get_element_type();
  bool to_sinks = read_only_by_sinks(root.output(0), users);
  Group g{{&root}, {}};
  std::vector<Node*> stack{&root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& in : n->input_values()) {
      Node* p = in.get_node();
      if (g.members.count(p) || taken.count(p) || !fusible(*p, shape, type)) continue;
      OutsideReaders readers = outside_readers(in, g, to_sinks, type, users);
      if (readers == OutsideReaders::others) continue;
      g.members.insert(p);
      stack.push_back(p);
      if (readers == OutsideReaders::sinks) g.extra.push_back(in);
    }
  }
  return g;
}

// A group's program: registers 0..k-1 are its inputs (deduplicated), then one per
// instruction.
struct Program {
  OutputVector inputs;
  std::map<Output, int> reg;
  std::vector<FusedElementwise::Instr> instrs;
  std::string description;

  void add_input(const Output& v) {
    if (reg.count(v)) return;
    reg[v] = static_cast<int>(inputs.size());
    inputs.push_back(v);
  }
  void add_instruction(const Node& n) {
    Code code;
    bool mask;
    fusible_code(n.get_type_name(), code, mask);
    int dst = static_cast<int>(inputs.size() + instrs.size());
    FusedElementwise::Instr ins{code, dst, -1, -1, -1};
    int* slots[] = {&ins.a, &ins.b, &ins.c};
    for (size_t i = 0; i < n.get_input_size(); ++i) *slots[i] = reg.at(n.input_value(i));
    reg[const_cast<Node&>(n).output(0)] = dst;
    instrs.push_back(ins);
    description += (description.empty() ? "" : ",") + n.get_type_name();
  }
};

// The group as one FusedElementwise of `root`'s shape and type: the program in topological
// order (the order of `ops`).
std::shared_ptr<FusedElementwise> make_fused(const NodeVector& ops, const Group& g,
                                             const Node& root) {
  std::vector<const Node*> order;
  for (const auto& n : ops)
    if (g.members.count(n.get())) order.push_back(n.get());
  Program p;
  for (const Node* n : order)
    for (const auto& in : n->input_values())
      if (!g.members.count(in.get_node())) p.add_input(in);
  for (const Node* n : order) p.add_instruction(*n);
  std::vector<int> extra_regs;
  for (const auto& v : g.extra) extra_regs.push_back(p.reg.at(v));
  return std::make_shared<FusedElementwise>(p.inputs, p.instrs, root.get_shape(),
                                            root.get_element_type(), p.description, extra_regs);
}

}  // namespace

size_t fuse_elementwise(Function& f) {
  NodeVector ops = f.get_ordered_ops();
  pass::Users users(ops);
  std::set<const Node*> taken;
  std::map<Output, Output> replacements;
  size_t groups = 0;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Node& root = **it;
    if (taken.count(&root) || !may_root(root)) continue;
    Group g = grow_group(root, users, taken);
    if (g.members.size() < 2) continue;
    auto fused = make_fused(ops, g, root);
    taken.insert(g.members.begin(), g.members.end());
    replacements[root.output(0)] = fused->output(0);
    for (size_t e = 0; e < g.extra.size(); ++e) replacements[g.extra[e]] = fused->output(e + 1);
    ++groups;
  }
  replace_outputs(f, replacements);
  return groups;
}

namespace pass {

void fuse_elementwise(ExecutionPlan& plan) {
  if (fusion_enabled(plan)) cpu::fuse_elementwise(*plan.function);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
