// Random ops: Dropout draws its mask from the counter-based stream of ngraph/random.hpp (the
// op's seed, this process's rank, the call's step), the same values the INTERPRETER draws.
#include "ngraph/distributed/communicator.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/random.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

template <typename T>
Kernel dropout(const op::Dropout& d, size_t n, const CallState* call) {
  uint64_t seed = d.get_seed();
  double p = d.get_probability();
  return [seed, p, n, call](const void* const* in, void* const* out) {
    random::Stream stream{seed, static_cast<uint64_t>(distributed::get_default_communicator()->rank()),
                          call->rng_step};
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    T* mask = static_cast<T*>(out[1]);
    random::dropout_mask(stream, p, mask, 0, n);
    for (size_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
  };
}

NGRAPH_CPU_KERNEL("Dropout", [](KernelContext& ctx) -> Kernel {
  const Node& node = ctx.node;
  auto& d = static_cast<const op::Dropout&>(node);
  size_t n = shape_size(d.get_input_shape(0));
  element::Type t = d.get_input_element_type(0);
  if (t == element::f32) return dropout<float>(d, n, ctx.call_state());
  if (t == element::f64) return dropout<double>(d, n, ctx.call_state());
  node.fail_type("CPU kernel has no implementation for element type " + t.get_type_name());
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
