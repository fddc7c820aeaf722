#include "ngraph/ops/random.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"

namespace ngraph {
namespace op {

Dropout::Dropout(const Output& data, double probability, int64_t seed)
    : Op<Dropout>({data}), m_probability(probability), m_seed(seed) {
  constructor_validate_and_infer_types();
}

void Dropout::validate_and_infer_types() {
  check_input_count(1);
  element::Type t = get_input_compute_type(0);  // f32 for data stored in bf16 (bf16_sets)
  if (t != element::f32 && t != element::f64)
    fail_type(concat_message("data must be f32 or f64, got element type ", t));
  if (!(m_probability >= 0 && m_probability <= 1))
    fail(concat_message("probability must be in [0, 1], got ", m_probability));
  set_output_size(2);
  set_output_type(0, t, get_input_shape(0));
  set_output_type(1, t, get_input_shape(0));
}

// The gradient is the delta dropped out with this op's seed: the mask is a function of (seed,
// rank, step, element) alone, so it is this op's mask, drawn again (Philox costs less than
// storing the mask and reading it back: the forward's mask then has no reader and the CPU
// kernel does not write it).
void Dropout::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), std::make_shared<Dropout>(deltas[0], m_probability, m_seed)->output(0));
}

NGRAPH_REGISTER_OP(Dropout);

}  // namespace op
}  // namespace ngraph
