// Ops that index into a tensor with integer tensors: nGraph's Gather, EmbeddingLookup and
// ScatterAdd. Indices are i32 or i64; an index outside its axis is an error at run time on
// every backend, naming the op, the index, its position and the bound (never a read or a
// write out of bounds).
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// Gather(data, indices, axis): out[a..., i..., b...] = data[a..., indices[i...], b...]; the
// result's shape is data.shape[:axis] + indices.shape + data.shape[axis + 1:]. `axis` may be
// negative (counted from the end). Indices may be negative, counted from the end of the
// axis as in NumPy's take and ONNX's Gather: valid indices are in [-n, n).
class Gather : public Op<Gather> {
 public:
  static constexpr const char* type_name = "Gather";
  bool admits_storage_only_types() const override { return true; }
  Gather() = default;
  Gather(const Output& data, const Output& indices, int64_t axis = 0);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("axis", m_axis); }
  // The axis, resolved against data's rank.
  size_t get_axis() const;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  int64_t m_axis = 0;
};

// EmbeddingLookup(indices, weights): row indices[i...] of weights for every index, nGraph's
// op: the result's shape is indices.shape + weights.shape[1:]. Indices must be in [0, n) for
// n = weights.shape[0] (as PyTorch's embedding; negative indices are errors).
class EmbeddingLookup : public Op<EmbeddingLookup> {
 public:
  static constexpr const char* type_name = "EmbeddingLookup";
  bool admits_storage_only_types() const override { return true; }
  EmbeddingLookup() = default;
  EmbeddingLookup(const Output& indices, const Output& weights);
  void validate_and_infer_types() override;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
};

// ScatterAdd(inputs, indices, updates, axis): a copy of inputs where, for every index
// position i..., updates[a..., i..., b...] is added to inputs[a..., indices[i...], b...];
// duplicate indices accumulate. updates has Gather's result shape: inputs.shape[:axis] +
// indices.shape + inputs.shape[axis + 1:]. nGraph's op is axis 0 (the default). Indices may be
// negative as in Gather.
class ScatterAdd : public Op<ScatterAdd> {
 public:
  static constexpr const char* type_name = "ScatterAdd";
  ScatterAdd() = default;
  ScatterAdd(const Output& inputs, const Output& indices, const Output& updates, int64_t axis = 0);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("axis", m_axis); }
  size_t get_axis() const;
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;

 private:
  int64_t m_axis = 0;
};

// The geometry both backends' kernels use: data viewed as [outer, n, inner] around the
// indexed axis, `count` indices.
struct IndexedAxis {
  size_t outer = 1, n = 0, inner = 1, count = 0;
  bool allow_negative = true;
  // The geometry of a Gather, EmbeddingLookup or ScatterAdd node.
  static IndexedAxis of(const Node& node);
};
// Index `position` of an i32/i64 buffer as an offset in [0, n); throws std::out_of_range naming
// `node`, the value, its position and the valid range.
size_t checked_index(const Node& node, const IndexedAxis& g, element::Type type,
                     const void* indices, size_t position);

}  // namespace op
}  // namespace ngraph
