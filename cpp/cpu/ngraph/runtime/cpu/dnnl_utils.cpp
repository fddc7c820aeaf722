#include "ngraph/runtime/cpu/dnnl_utils.hpp"

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

dnnl::memory::desc plain_desc(const Shape& s, size_t rank) {
  auto dims = to_dims(s, rank);
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
