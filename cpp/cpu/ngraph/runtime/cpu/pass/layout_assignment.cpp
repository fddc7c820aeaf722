// Layout assignment: a TensorDesc for every value. Kernels with a layout rule may ask for
// layouts a oneDNN primitive chooses; a Reorder is inserted only where a producer's layout
// differs from what a consumer reads, and one Reorder serves every consumer that wants the
// same layout of the same value. Parameters, constants, variables, results and variable
// updates are plain row-major at the boundary.
#include "ngraph/ops.hpp"
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
    auto r = std::make_shared<Reorder>(value);
    plan.descs[r->output(0)] = want;
    made.push_back({value, want, r->output(0)});
    ++plan.reorders;
    return r->output(0);
  }
};

TensorDesc plain_of(const Output& v) { return TensorDesc::plain(v.get_element_type(), v.get_shape()); }

}  // namespace

void assign_layouts(ExecutionPlan& plan) {
  Reorders reorders{plan, {}};
  for (const auto& node : plan.function->get_ordered_ops()) {
    const std::string& type = node->get_type_name();
    LayoutContext ctx{*node, {}, {}, {}};
    for (const auto& in : node->input_values()) {
      ctx.produced.push_back(plan.desc(in));
      ctx.wanted.push_back(plain_of(in));
    }
    for (size_t o = 0; o < node->get_output_size(); ++o) ctx.outputs.push_back(plain_of(node->output(o)));
    if (!is_structural_op(type))
      if (const LayoutRule* rule = KernelRegistry::get().find_layout(type)) (*rule)(ctx);
    for (size_t i = 0; i < node->get_input_size(); ++i) {
      Output in = node->input_value(i);
      Output use = reorders.as(in, ctx.wanted[i]);
      if (use != in) node->set_argument(i, use);
    }
    for (size_t o = 0; o < node->get_output_size(); ++o) plan.descs[node->output(o)] = ctx.outputs[o];
  }
}

}  // namespace pass

LayoutRule elementwise_layout(bool zero_preserving) {
  return [zero_preserving](LayoutContext& ctx) {
    const Shape& shape = ctx.node.get_output_size() == 1 ? ctx.node.get_shape() : Shape{};
    const TensorDesc* layout = nullptr;
    for (const auto& p : ctx.produced) {
      if (p.shape().empty() && !shape.empty()) continue;  // a scalar operand
      if (p.shape() != shape) return;                     // broadcasting: plain
      if (p.is_plain()) return;
      if (layout && layout->dnnl_desc() != p.dnnl_desc()) return;
      layout = &p;
    }
    if (!layout || (layout->is_padded() && !zero_preserving)) return;
    for (size_t i = 0; i < ctx.produced.size(); ++i)
      if (!ctx.produced[i].shape().empty() || shape.empty()) ctx.wanted[i] = ctx.produced[i];
    ctx.outputs[0] = TensorDesc::with_layout(ctx.node.get_element_type(), shape, layout->md());
  };
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
