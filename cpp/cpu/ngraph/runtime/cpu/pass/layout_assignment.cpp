// Layout assignment: a TensorDesc for every value. Kernels with a layout rule may ask for
// layouts a oneDNN primitive chooses; a Reorder is inserted only where a producer's layout
// differs from what a consumer reads, and one Reorder serves every consumer that wants the
// same layout of the same value. Parameters, constants and results are plain row-major at
// the boundary.
//
// Variables are the exception: the executable keeps each in the layout this plan records
// (CPUExecutable lays the value out so before a call; reading it from Python gives it back
// row-major), so a convolution's weights are not reordered from row-major every step, nor
// their gradient back. An f32 variable's layout is decided by its first reader: an unpadded
// layout that reader wants (a convolution's blocked weights, the common layout of an
// elementwise update's other operands: the momentum of such weights), else plain. An update
// is written in its variable's layout; one for a variable this function does not read takes
// its value's layout.
#include <dnnl.hpp>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace pass {

namespace {

struct Reorders {
  ExecutionPlan& plan;
  struct Made {
    Output from;
    TensorDesc to;
    Output reorder;
  };
  std::vector<Made> made;

  // `value` as `want`: itself, or a (shared) Reorder of it.
  Output as(const Output& value, const TensorDesc& want) {
    if (plan.desc(value).same_layout(want)) return value;
    for (const auto& m : made)
      if (m.from == value && m.to.same_layout(want)) return m.reorder;
    // A bf16 cast (mixed precision) read in another layout: one cast from the cast's source
    // that converts and re-lays out (one oneDNN reorder) instead of a cast and a Reorder
    // (the weights of a convolution: f32 row-major to bf16 blocked).
    std::shared_ptr<Node> r;
    auto* cast = dynamic_cast<PrecisionCast*>(value.get_node());
    if (cast && want.type() == value.get_element_type()) {
      r = std::make_shared<PrecisionCast>(cast->input_value(0), want.type());
      ++plan.fused_casts;
    } else {
      r = std::make_shared<Reorder>(value);
      ++plan.reorders;
    }
    plan.descs[r->output(0)] = want;
    made.push_back({value, want, r->output(0)});
    return r->output(0);
  }
};

TensorDesc plain_of(const Output& v) { return TensorDesc::plain(v.get_element_type(), v.get_shape()); }

// A variable kept in a oneDNN layout: converted to and from row-major by oneDNN reorders.
class DnnlStorageLayout : public StorageLayout {
 public:
  explicit DnnlStorageLayout(const TensorDesc& desc)
      : m_desc(desc), m_plain(TensorDesc::plain(desc.type(), desc.shape()).dnnl_desc_like(desc.md())) {}
  void to_plain(const void* stored, void* plain) const override { reorder(m_desc.md(), stored, m_plain, plain); }
  void from_plain(const void* plain, void* stored) const override { reorder(m_plain, plain, m_desc.md(), stored); }
  bool same_as(const StorageLayout& other) const override {
    auto* o = dynamic_cast<const DnnlStorageLayout*>(&other);
    return o && o->m_desc.same_layout(m_desc);
  }
  std::string to_string() const override { return m_desc.to_string(); }
  const TensorDesc& desc() const { return m_desc; }

 private:
  static void reorder(const dnnl::memory::desc& from, const void* src, const dnnl::memory::desc& to, void* dst) {
    dnnl::memory a(from, dnnl_engine(), const_cast<void*>(src)), b(to, dnnl_engine(), dst);
    dnnl::reorder(a, b).execute(dnnl_stream(), a, b);
    dnnl_stream().wait();
  }
  TensorDesc m_desc;
  dnnl::memory::desc m_plain;
};

// The variables' storage layouts, decided as their readers are met.
struct VariableLayouts {
  ExecutionPlan& plan;
  std::map<VariableState*, std::vector<Output>> open;  // Variable nodes not read yet

  bool eligible(const VariableState& s) const {
    return plan.options.variable_layouts && s.get_element_type() == element::f32 && s.byte_size() > 0;
  }
  static bool keepable(const TensorDesc& d) { return !d.is_plain() && !d.is_padded(); }
  // The layout an executable already keeps the variable in: a later plan takes it too (and
  // reorders from it where it needs another), so executables sharing a variable agree and
  // do not lay it out anew at every call.
  const TensorDesc* kept(const VariableState& s) const {
    auto* d = dynamic_cast<const DnnlStorageLayout*>(s.get_layout().get());
    return d && eligible(s) ? &d->desc() : nullptr;
  }

  void decide(VariableState* state, const TensorDesc& desc) {
    plan.variable_layouts[state] = desc;
    auto it = open.find(state);
    if (it == open.end()) return;
    for (const auto& v : it->second) plan.descs[v] = desc;
    open.erase(it);
  }
  VariableState* open_state(const Output& v) const {
    auto* var = dynamic_cast<op::Variable*>(v.get_node());
    return var && open.count(var->get_state().get()) ? var->get_state().get() : nullptr;
  }

  void read(op::Variable& node) {
    VariableState* state = node.get_state().get();
    auto known = plan.variable_layouts.find(state);
    if (known != plan.variable_layouts.end()) {
      plan.descs[node.output(0)] = known->second;
    } else if (const TensorDesc* k = kept(*state)) {
      plan.descs[node.output(0)] = plan.variable_layouts[state] = *k;
    } else if (eligible(*state)) {
      plan.descs[node.output(0)] = plain_of(node.output(0));  // until a reader decides
      open[state].push_back(node.output(0));
    } else {
      plan.descs[node.output(0)] = plain_of(node.output(0));
      plan.variable_layouts[state] = plain_of(node.output(0));
    }
  }

  // The layout an update of `state` is written in, given its value's.
  TensorDesc update(VariableState* state, const Output& value) {
    auto known = plan.variable_layouts.find(state);
    if (known != plan.variable_layouts.end()) return known->second;
    if (const TensorDesc* k = kept(*state)) {
      decide(state, *k);
      return *k;
    }
    const TensorDesc& produced = plan.desc(value);
    decide(state, eligible(*state) && keepable(produced) ? produced : plain_of(value));
    return plan.variable_layouts.at(state);
  }
};

}  // namespace

void assign_layouts(ExecutionPlan& plan) {
  Reorders reorders{plan, {}};
  VariableLayouts variables{plan, {}};
  for (const auto& node : plan.function->get_ordered_ops()) {
    const std::string& type = node->get_type_name();
    if (auto* var = dynamic_cast<op::Variable*>(node.get())) {
      variables.read(*var);
      continue;
    }
    LayoutContext ctx{*node, {}, {}, {}, {}, {}, plan.options.variable_layouts};
    for (const auto& in : node->input_values()) {
      ctx.produced.push_back(plan.desc(in));
      ctx.wanted.push_back(plain_of(in));
      ctx.free.push_back(variables.open_state(in) != nullptr);
      ctx.any_layout.push_back(false);
    }
    for (size_t o = 0; o < node->get_output_size(); ++o) ctx.outputs.push_back(plain_of(node->output(o)));
    if (auto* assign = dynamic_cast<op::Assign*>(node.get()))
      ctx.wanted[0] = variables.update(assign->get_state().get(), node->input_value(0));
    else if (!is_structural_op(type))
      if (const LayoutRule* rule = KernelRegistry::get().find_layout(type)) (*rule)(ctx);
    for (size_t i = 0; i < node->get_input_size(); ++i) {
      Output in = node->input_value(i);
      if (ctx.any_layout[i] && variables.open_state(in)) continue;  // its kernel reads the layout decided later
      if (VariableState* state = variables.open_state(in))
        variables.decide(state, VariableLayouts::keepable(ctx.wanted[i]) ? ctx.wanted[i] : plain_of(in));
      Output use = reorders.as(in, ctx.wanted[i]);
      if (use != in) node->set_argument(i, use);
    }
    for (size_t o = 0; o < node->get_output_size(); ++o) plan.descs[node->output(o)] = ctx.outputs[o];
  }
  for (const auto& [state, values] : std::map<VariableState*, std::vector<Output>>(variables.open))
    variables.decide(state, plain_of(values.front()));  // read by nothing that runs
}

}  // namespace pass

namespace {

// Whether every output has output 0's shape and element type (so that one layout fits all).
bool outputs_alike(const Node& node) {
  const Shape& shape = node.get_output_shape(0);
  for (size_t o = 1; o < node.get_output_size(); ++o)
    if (node.get_output_shape(o) != shape ||
        node.get_output_element_type(o) != node.get_output_element_type(0))
      return false;
  return true;
}

// The layouts the operands of an elementwise op of `shape` are produced in. Scalars and free
// operands (they take whatever the others have) do not count.
struct OperandLayouts {
  bool broadcast = false;              // an operand of another shape: everything plain
  const TensorDesc* common = nullptr;  // the first non-plain layout
  const TensorDesc* kept = nullptr;    // a variable's own (blocked) layout
  bool mixed = false;                  // a plain operand, or two layouts that differ
};

OperandLayouts operand_layouts(const LayoutContext& ctx, const Shape& shape) {
  OperandLayouts o;
  for (size_t i = 0; i < ctx.produced.size(); ++i) {
    const TensorDesc& p = ctx.produced[i];
    if (p.shape().empty() && !shape.empty()) continue;  // a scalar operand
    if (p.shape() != shape) {
      o.broadcast = true;
      return o;
    }
    if (ctx.free[i]) continue;
    bool variable = ctx.node.input_value(i).get_node()->get_type_name() ==
                    std::string(op::Variable::type_name);
    if (!p.is_plain() && !o.kept && variable) o.kept = &p;
    // Layouts compare whatever their element types (f32 and bf16 activations mix).
    if (p.is_plain() || (o.common && o.common->retyped(p.type()).dnnl_desc() != p.dnnl_desc())) o.mixed = true;
    else if (!o.common) o.common = &p;
  }
  return o;
}

// The operands' common layout. Operands that disagree are read plain, unless one is a variable
// kept in a layout and the others have its element type (a boolean mask is never reordered as
// floats): then that layout (the value is most likely the variable's update, written back in
// it). Null: plain.
const TensorDesc* chosen_layout(const LayoutContext& ctx, const OperandLayouts& o) {
  if (!o.mixed) return o.common;
  const TensorDesc* layout = o.kept;
  for (size_t i = 0; layout && i < ctx.produced.size(); ++i)
    if (ctx.produced[i].type() != layout->type()) layout = nullptr;
  return layout;
}

}  // namespace

LayoutRule elementwise_layout(bool zero_preserving) {
  return [zero_preserving](LayoutContext& ctx) {
    // Outputs that differ in shape or type (none of the elementwise ops): everything plain.
    if (!outputs_alike(ctx.node)) return;
    const Shape& shape = ctx.node.get_output_shape(0);
    OperandLayouts operands = operand_layouts(ctx, shape);
    if (operands.broadcast) return;
    const TensorDesc* layout = chosen_layout(ctx, operands);
    if (!layout || (layout->is_padded() && !zero_preserving)) return;
    for (size_t i = 0; i < ctx.produced.size(); ++i)
      if (!ctx.produced[i].shape().empty() || shape.empty()) ctx.wanted[i] = layout->retyped(ctx.produced[i].type());
    for (auto& out : ctx.outputs) out = layout->retyped(ctx.node.get_output_element_type(0));
  };
}

std::shared_ptr<const StorageLayout> storage_layout(const TensorDesc& desc) {
  if (desc.is_plain()) return nullptr;
  if (desc.is_padded() || desc.type() != element::f32)
    throw ngraph_error("[CPU] internal: a variable cannot be kept as " + desc.to_string());
  return std::make_shared<pass::DnnlStorageLayout>(desc);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
