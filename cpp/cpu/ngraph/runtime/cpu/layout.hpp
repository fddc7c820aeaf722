// Layouts: what a kernel's layout rule sees and decides, the rule shared by elementwise
// kernels, and the Reorder op the layout pass inserts where a producer and a consumer
// disagree.
#pragma once

#include <vector>

#include "ngraph/node.hpp"
#include "ngraph/ops/parameter.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/tensor_desc.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

// Given to a kernel's layout rule at compile time. `produced` holds the inputs' layouts as
// their producers give them; the rule sets `wanted` (what its kernel reads; plain unless it
// says otherwise) and `outputs` (what its kernel writes; plain unless it says otherwise). A
// oneDNN primitive asks for format_tag::any and writes back what it chose. An input marked
// `free` is a variable whose storage layout is still open: it will be stored as the rule
// wants it (without padding), so the rule need not count its `produced` layout (plain).
struct LayoutContext {
  const Node& node;
  std::vector<TensorDesc> produced;
  std::vector<TensorDesc> wanted;
  std::vector<TensorDesc> outputs;
  std::vector<bool> free;
  // Set by a rule for a free input it reads in any layout (a cast converts from whatever it is
  // given): the variable's layout is left to its other readers and its update.
  std::vector<bool> any_layout;
  // Whether blocked layouts may cross boundaries between ranks (a fused allreduce's operands):
  // CompileOptions::variable_layouts; off, collectives reduce row-major data as before.
  bool across_ranks = true;
};

// The rule of elementwise kernels, which read and write storage elements in order: when every
// input that is not a scalar has the output's shape and one common non-plain layout, that
// layout passes through (only unpadded ones unless the op keeps zeros zero, since padding
// must stay zero); otherwise everything is plain, unless an input is a variable kept in a
// layout: then that layout (an update is written back in it). Free inputs take the common
// layout.
LayoutRule elementwise_layout(bool zero_preserving);

// The layout a variable is kept in between calls, for VariableState::set_layout: null for
// a plain `desc`, else oneDNN reorders to and from row-major (f32, unpadded).
std::shared_ptr<const StorageLayout> storage_layout(const TensorDesc& desc);

// Reorder(x): x in another layout; the target is the plan's descriptor of its output.
// Backend-internal, inserted by the layout pass only.
class Reorder : public Op<Reorder> {
 public:
  static constexpr const char* type_name = "CPUReorder";
  Reorder() = default;
  explicit Reorder(const Output& x) : Op<Reorder>({x}) { constructor_validate_and_infer_types(); }
  void validate_and_infer_types() override {
    check_input_count(1);
    set_output_type(0, get_input_element_type(0), get_input_shape(0));
  }
  bool is_pure() const override { return false; }  // never merged: two targets may differ
  bool admits_storage_only_types() const override { return true; }
};

// PrecisionCast(x, type): x converted to `type` by a oneDNN reorder, in the layout the plan's
// descriptor of its output gives (the layout pass keeps x's layout, or, where a reader wants
// another, makes one cast that converts and re-lays out). Inserted by the mixed-precision pass
// only (f32 -> bf16 operands of products). Unlike Convert, the rounding is oneDNN's: to
// nearest even, but its AVX2 reorder turns -0.0 into +0.0 and flushes subnormals to zero,
// which the products cannot tell apart. Backend-internal.
class PrecisionCast : public Op<PrecisionCast> {
 public:
  static constexpr const char* type_name = "CPUPrecisionCast";
  PrecisionCast() = default;
  PrecisionCast(const Output& x, element::Type type) : Op<PrecisionCast>({x}), m_type(type) {
    constructor_validate_and_infer_types();
  }
  void validate_and_infer_types() override {
    check_input_count(1);
    set_output_type(0, m_type, get_input_shape(0));
  }
  void visit_attributes(AttributeVisitor& v) override { v.on("destination_type", m_type); }
  bool admits_storage_only_types() const override { return true; }
  // Its input may turn bf16 too (bf16 activations): the mixed-precision pass then removes it.
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}}; }

 private:
  element::Type m_type = element::bf16;
};

// PrecisionCastPair(x): x (f32) cast to bf16 in two layouts at once, the plan's descriptors of
// its two outputs (block_cast.hpp's pair kernel, x read once): the two casts of a
// convolution's weights, for the forward and for the backward data, which pair_weight_casts
// merges after layout assignment. Backend-internal.
class PrecisionCastPair : public Op<PrecisionCastPair> {
 public:
  static constexpr const char* type_name = "CPUPrecisionCastPair";
  PrecisionCastPair() = default;
  explicit PrecisionCastPair(const Output& x) : Op<PrecisionCastPair>({x}) { constructor_validate_and_infer_types(); }
  void validate_and_infer_types() override {
    check_input_count(1);
    set_output_type(0, element::bf16, get_input_shape(0));
    set_output_type(1, element::bf16, get_input_shape(0));
  }
  bool is_pure() const override { return false; }  // never merged: the layouts live in the plan
  bool admits_storage_only_types() const override { return true; }
};

// A constant laid out once, at compile time, in a layout a kernel wants (constant_layouts.cpp
// replaces Reorder(Constant) by it): a leaf with no kernel, whose bytes (in the plan's
// descriptor of its output, padding included) the executable hands to the readers as it
// hands over a Constant's. Backend-internal.
class LaidOutConstant : public Op<LaidOutConstant> {
 public:
  static constexpr const char* type_name = "CPULaidOutConstant";
  LaidOutConstant() = default;
  // Reorders `source` (f32, row-major) into `desc` (f32 in a oneDNN layout, or bf16 in any).
  LaidOutConstant(const op::Constant& source, const TensorDesc& desc);
  void validate_and_infer_types() override {
    check_input_count(0);
    set_output_type(0, m_type, m_shape);
  }
  bool is_pure() const override { return false; }  // never merged: two layouts may differ
  bool admits_storage_only_types() const override { return true; }  // a constant cast to bf16
  const void* get_data_ptr() const { return m_data.get(); }

 private:
  element::Type m_type = element::f32;
  Shape m_shape;
  std::shared_ptr<char> m_data;  // 64-byte aligned; shared between clones (immutable)
};

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
