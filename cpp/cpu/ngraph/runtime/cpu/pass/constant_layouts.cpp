// Constant layouts: a Reorder the layout pass put on a Constant (a convolution's filters, a
// matmul's weights imported as constants) is done here, once, instead of at every call: the
// Reorder becomes a LaidOutConstant holding the bytes in the layout it would have produced.
// The same for a bf16 cast of an f32 Constant (mixed precision): the constant is held in bf16.
// Variables are kept in their readers' layouts between calls (layout_assignment.cpp); this is
// the same for values that never change.
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <new>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/dnnl_utils.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

LaidOutConstant::LaidOutConstant(const op::Constant& source, const TensorDesc& desc)
    : Op<LaidOutConstant>(OutputVector{}),
      m_type(desc.type()),
      m_shape(source.get_output_shape(0)) {
  element::Type from_type = source.get_element_type();
  bool to_layout = !desc.is_plain() && desc.type() == element::f32;
  if ((!to_layout && desc.type() != element::bf16) || from_type != element::f32 || desc.shape() != m_shape)
    fail(concat_message("internal: lays out f32 constants in a oneDNN layout or as bf16, got ", from_type,
                        to_braces(m_shape), " as ", desc.to_string()));
  size_t rounded = std::max<size_t>(64, (desc.bytes() + 63) / 64 * 64);
  m_data = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(64, rounded)), std::free);
  if (!m_data) throw std::bad_alloc();
  std::memset(m_data.get(), 0, rounded);  // padding stays zero
  // The row-major side takes the layout's dims (grouped filters have one axis more).
  TensorDesc plain = TensorDesc::plain(from_type, m_shape);
  dnnl::memory::desc from = desc.is_plain() ? plain.dnnl_desc() : plain.dnnl_desc_like(desc.md());
  dnnl::memory src(from, dnnl_engine(), const_cast<void*>(source.get_data_ptr()));
  dnnl::memory dst(desc.dnnl_desc(), dnnl_engine(), m_data.get());
  dnnl::reorder(src, dst).execute(dnnl_stream(), src, dst);
  dnnl_stream().wait();
  constructor_validate_and_infer_types();
}

namespace pass {

void lay_out_constants(ExecutionPlan& plan) {
  if (!plan.options.optimize) return;
  std::map<Output, Output> replacements;
  for (const auto& node : plan.function->get_ordered_ops()) {
    bool cast = node->get_type_name() == std::string(PrecisionCast::type_name);
    if (node->get_type_name() != std::string(Reorder::type_name) && !cast) continue;
    auto* constant = dynamic_cast<op::Constant*>(node->input_value(0).get_node());
    const TensorDesc& from = plan.desc(node->input_value(0));
    const TensorDesc& to = plan.desc(node->output(0));
    if (!constant || !from.is_plain() || from.type() != element::f32) continue;
    if (cast ? to.type() != element::bf16 : (to.is_plain() || to.type() != element::f32)) continue;
    auto laid_out = std::make_shared<LaidOutConstant>(*constant, to);
    laid_out->set_friendly_name(node->get_friendly_name());
    plan.descs[laid_out->output(0)] = to;
    replacements[node->output(0)] = laid_out->output(0);
    if (!cast) --plan.reorders;
  }
  replace_outputs(*plan.function, replacements);
}

}  // namespace pass
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
