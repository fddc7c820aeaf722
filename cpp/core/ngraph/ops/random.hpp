// Random ops: values drawn from the counter-based generator of ngraph/random.hpp, a function
// of (seed, rank, step, element index). The rank is the default communicator's when the
// function is compiled; the step is the executable's call count (Executable::get_rng_step),
// so every call draws anew without recompiling, and a resumed run sets it back.
#pragma once

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// Dropout(data, probability, seed): two outputs of data's shape and type, y = data * mask and
// the mask itself, 0 for a dropped element (probability p) and 1 / (1 - p) for a kept one
// (inverted dropout, as PyTorch's). The gradient multiplies by the same mask. f32 and f64.
class Dropout : public Op<Dropout> {
 public:
  static constexpr const char* type_name = "Dropout";
  Dropout() = default;
  Dropout(const Output& data, double probability, int64_t seed);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override {
    v.on("probability", m_probability);
    v.on("seed", m_seed);
  }
  // Two Dropouts on equal inputs draw different masks unless their seeds are equal too, and
  // the same one draws anew each call: never merged by CSE, never folded.
  bool is_pure() const override { return false; }
  double get_probability() const { return m_probability; }
  uint64_t get_seed() const { return static_cast<uint64_t>(m_seed); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  // Mixed precision: the data and the output (not the mask) can each be stored in bf16.
  std::vector<Bf16Set> bf16_sets() const override { return {{{0}, {}}, {{}, {0}}}; }

 private:
  double m_probability = 0.5;
  int64_t m_seed = 0;
};

}  // namespace op
}  // namespace ngraph
