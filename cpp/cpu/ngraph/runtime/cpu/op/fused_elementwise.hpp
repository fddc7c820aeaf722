// FusedElementwise: a chain of elementwise ops as one loop (formed by
// pass/fuse_elementwise.cpp; kernel in fused_kernels.cpp). Backend-internal.
#pragma once

#include <string>
#include <vector>

#include "ngraph/node.hpp"
#include "ngraph/runtime/cpu/scalar_ops.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

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
  // Mixed precision: each f32 input of the output's shape, and output 0, also in bf16 (the
  // kernel converts as it loads and stores a block); none for a program with extra outputs
  // (an update).
  std::vector<Bf16Set> bf16_sets() const override;
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

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
