#include "ngraph/runtime/cpu/dnnl_utils.hpp"

#include <unordered_map>

#include "ngraph/except.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

bool dnnl_rank_ok(const Shape& s) { return s.size() <= DNNL_MAX_NDIMS && shape_size(s) > 0; }

dnnl::memory::dims to_dims(const Shape& s, size_t rank) {
  size_t r = std::max<size_t>({rank, s.size(), 1});
  dnnl::memory::dims d(r, 1);
  for (size_t i = 0; i < s.size(); ++i) d[r - s.size() + i] = static_cast<dnnl::memory::dim>(s[i]);
  return d;
}

dnnl::memory::data_type dnnl_type(element::Type t) {
  if (t == element::f32) return dnnl::memory::data_type::f32;
  if (t == element::bf16) return dnnl::memory::data_type::bf16;
  if (t == element::f16) return dnnl::memory::data_type::f16;
  throw ngraph_error("[CPU] internal: no oneDNN data type for " + t.get_type_name());
}

dnnl::memory::desc plain_desc(const Shape& s, size_t rank, element::Type t) {
  auto dims = to_dims(s, rank);
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, dnnl_type(t), strides);
}

dnnl::memory::desc flat_desc(size_t elements) {
  return dnnl::memory::desc({static_cast<dnnl::memory::dim>(elements)}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::a);
}

dnnl::primitive_attr dnnl_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Kernel dnnl_kernel(KernelContext& ctx, const dnnl::primitive& prim,
                   const dnnl::memory::desc& scratchpad, const std::vector<DnnlArg>& args) {
  struct Binding {
    dnnl::memory memory;
    bool input;
    size_t index;
  };
  std::unordered_map<int, dnnl::memory> memories;
  std::vector<Binding> bindings;
  auto bind = [&](int arg, const dnnl::memory::desc& md, bool input, size_t index) {
    dnnl::memory m(md, dnnl_engine(), DNNL_MEMORY_NONE);
    memories[arg] = m;  // the same oneDNN object: setting the handle below sets both
    bindings.push_back({m, input, index});
  };
  for (const auto& a : args) bind(a.arg, a.md, a.input, a.index);
  if (scratchpad.get_size()) bind(DNNL_ARG_SCRATCHPAD, scratchpad, false, ctx.scratch(scratchpad.get_size()));
  return [prim, memories, bindings](const void* const* in, void* const* out) mutable {
    for (auto& b : bindings)
      b.memory.set_data_handle(b.input ? const_cast<void*>(in[b.index]) : out[b.index]);
    prim.execute(dnnl_stream(), memories);
  };
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
