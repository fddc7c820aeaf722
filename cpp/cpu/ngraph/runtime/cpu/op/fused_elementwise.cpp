#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

FusedElementwise::FusedElementwise(const OutputVector& inputs, std::vector<Instr> program,
                                   const Shape& shape, element::Type type, std::string description,
                                   std::vector<int> extra_outputs)
    : Op<FusedElementwise>(inputs),
      m_program(std::move(program)),
      m_extra_outputs(std::move(extra_outputs)),
      m_shape(shape),
      m_type(type),
      m_description(std::move(description)) {
  constructor_validate_and_infer_types();
}

void FusedElementwise::validate_and_infer_types() {
  if (m_program.empty()) fail("has an empty program");
  for (size_t i = 0; i < get_input_size(); ++i) {
    const Shape& s = get_input_shape(i);
    if (!s.empty() && s != m_shape)
      fail(concat_message("input ", i, " has shape ", s, "; expected ", m_shape, " or a scalar"));
    element::Type t = get_input_compute_type(i);
    if (t != m_type && t != element::boolean)
      fail_type(concat_message("input ", i, " has element type ", t));
  }
  int first = static_cast<int>(get_input_size());
  int last = first + static_cast<int>(m_program.size()) - 1;
  for (int r : m_extra_outputs)
    if (r < first || r >= last)
      fail(concat_message("extra output register ", r, " is not an instruction's before the last (",
                          first, " to ", last - 1, ")"));
  set_output_size(1 + m_extra_outputs.size());
  for (size_t o = 0; o <= m_extra_outputs.size(); ++o) set_output_type(o, m_type, m_shape);
}

std::vector<Node::Bf16Set> FusedElementwise::bf16_sets() const {
  if (m_type != element::f32 || !m_extra_outputs.empty()) return {};
  std::vector<Bf16Set> sets{{{}, {0}}};
  for (size_t i = 0; i < get_input_size(); ++i)
    if (get_input_shape(i) == m_shape && !m_shape.empty()) sets.push_back({{i}, {}});  // f32 ones count
  return sets;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
