#include "ngraph/runtime/interpreter/kernel.hpp"

#include <algorithm>

#include "ngraph/runtime/deferred.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {

const std::vector<element::Type>& supported_element_types() {
  static const std::vector<element::Type> types{
#define NGRAPH_INTERPRETER_TYPE(name, T) element::name,
      NGRAPH_INTERPRETER_ELEMENT_TYPES(NGRAPH_INTERPRETER_TYPE)
#undef NGRAPH_INTERPRETER_TYPE
  };
  return types;
}

void CallState::finish() { run_deferred(m_deferred); }

KernelRegistry& KernelRegistry::get() {
  static KernelRegistry registry;
  return registry;
}

void KernelRegistry::add(const std::string& op, Kernel kernel) {
  for (auto& entry : m_kernels)
    if (entry.first == op) {
      entry.second = std::move(kernel);
      return;
    }
  m_kernels.emplace_back(op, std::move(kernel));
}

const Kernel* KernelRegistry::find(const std::string& op) const {
  for (const auto& entry : m_kernels)
    if (entry.first == op) return &entry.second;
  return nullptr;
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& entry : m_kernels) out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_structural_op(const std::string& op) {
  return op == "Parameter" || op == "Constant" || op == "Result" || op == "Variable" ||
         op == "Assign";
}

std::vector<size_t> view_offsets(const Shape& shape, const std::vector<std::ptrdiff_t>& strides,
                                 std::ptrdiff_t offset) {
  size_t n = shape_size(shape);
  std::vector<size_t> out(n);
  std::vector<size_t> coord(shape.size(), 0);
  std::ptrdiff_t at = offset;
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<size_t>(at);
    // Advance the row-major coordinate (an odometer), keeping `at` in step.
    for (size_t d = shape.size(); d-- > 0;) {
      at += strides[d];
      if (++coord[d] < shape[d]) break;
      at -= strides[d] * static_cast<std::ptrdiff_t>(shape[d]);
      coord[d] = 0;
    }
  }
  return out;
}

std::vector<std::ptrdiff_t> signed_strides(const Shape& s) {
  Strides st = row_major_strides(s);
  return std::vector<std::ptrdiff_t>(st.begin(), st.end());
}

std::vector<size_t> broadcast_offsets(const Shape& in, const Shape& out) {
  std::vector<std::ptrdiff_t> strides(out.size(), 0);
  std::vector<std::ptrdiff_t> in_strides = signed_strides(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    strides[lead + d] = in[d] == 1 ? 0 : in_strides[d];
  return view_offsets(out, strides);
}

std::vector<size_t> reduction_offsets(const Shape& in, const AxisSet& axes) {
  Shape kept;
  for (size_t d = 0; d < in.size(); ++d)
    if (!axes.count(d)) kept.push_back(in[d]);
  std::vector<std::ptrdiff_t> kept_strides = signed_strides(kept), strides(in.size(), 0);
  for (size_t d = 0, k = 0; d < in.size(); ++d)
    if (!axes.count(d)) strides[d] = kept_strides[k++];
  return view_offsets(in, strides);
}

}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
