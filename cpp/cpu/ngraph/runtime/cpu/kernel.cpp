#include "ngraph/runtime/cpu/kernel.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ngraph/runtime/deferred.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

KernelRegistry& KernelRegistry::get() {
  static KernelRegistry registry;
  return registry;
}

void KernelRegistry::add(const std::string& op, KernelBuilder builder, LayoutRule layout) {
  for (auto& e : m_entries)
    if (e.op == op) {
      e.build = std::move(builder);
      e.layout = std::move(layout);
      return;
    }
  m_entries.push_back({op, std::move(builder), std::move(layout)});
}

void KernelRegistry::remove(const std::string& op) {
  for (auto it = m_entries.begin(); it != m_entries.end(); ++it)
    if (it->op == op) {
      m_entries.erase(it);
      return;
    }
}

const KernelRegistry::Entry* KernelRegistry::entry(const std::string& op) const {
  for (auto& e : m_entries)
    if (e.op == op) return &e;
  return nullptr;
}

const KernelBuilder* KernelRegistry::find(const std::string& op) const {
  const Entry* e = entry(op);
  return e ? &e->build : nullptr;
}

const LayoutRule* KernelRegistry::find_layout(const std::string& op) const {
  const Entry* e = entry(op);
  return e && e->layout ? &e->layout : nullptr;
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> out;
  for (auto& e : m_entries) out.push_back(e.op);
  std::sort(out.begin(), out.end());
  return out;
}

void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& f) {
  size_t pieces = std::min(static_cast<size_t>(std::max(1, omp_get_max_threads())),
                           n / std::max<size_t>(grain, 1));
  if (pieces <= 1 || omp_in_parallel()) {
    if (n) f(0, n);
    return;
  }
#pragma omp parallel num_threads(static_cast<int>(pieces))
  {
    auto t = static_cast<size_t>(omp_get_thread_num()),
         k = static_cast<size_t>(omp_get_num_threads());
    size_t begin = n * t / k, end = n * (t + 1) / k;
    if (begin < end) f(begin, end);
  }
}

bool is_structural_op(const std::string& op) {
  return op == "Parameter" || op == "Constant" || op == "Result" || op == "Variable" ||
         op == "Assign" || op == "CPULaidOutConstant";
}

void CallState::reset(bool verified) {
  m_deferred.clear();
  m_last_started.reset();
  collectives_verified = verified;
}

void CallState::finish() { run_deferred(m_deferred); }

StridedLoop::StridedLoop(const Shape& shape,
                         const std::vector<std::vector<std::ptrdiff_t>>& strides) {
  size_t nops = strides.size();
  if (nops > 4) throw std::invalid_argument("StridedLoop: at most 4 operands");
  m_count = shape_size(shape);
  // Drop size-1 axes, then merge axis d into d+1 when every operand is contiguous across them.
  std::vector<size_t> dims;
  std::vector<std::array<std::ptrdiff_t, 4>> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<std::ptrdiff_t, 4> s{};
    for (size_t k = 0; k < nops; ++k) s[k] = strides[k][d];
    dims.push_back(shape[d]);
    st.push_back(s);
  }
  std::vector<size_t> mdims;
  std::vector<std::array<std::ptrdiff_t, 4>> mst;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!mdims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < nops; ++k)
        merge = merge && mst.back()[k] == st[d][k] * static_cast<std::ptrdiff_t>(dims[d]);
      if (merge) {
        mdims.back() *= dims[d];
        mst.back() = st[d];
        continue;
      }
    }
    mdims.push_back(dims[d]);
    mst.push_back(st[d]);
  }
  m_inner.assign(nops, 0);
  if (mdims.empty()) {
    m_n = 1;
    return;
  }
  m_n = mdims.back();
  for (size_t k = 0; k < nops; ++k) m_inner[k] = mst.back()[k];
  mdims.pop_back();
  mst.pop_back();
  m_outer = mdims;
  m_strides = mst;
}

std::vector<std::ptrdiff_t> to_signed(const Strides& s) {
  return std::vector<std::ptrdiff_t>(s.begin(), s.end());
}

std::vector<std::ptrdiff_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<std::ptrdiff_t> result(out.size(), 0);
  Strides rs = row_major_strides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    result[lead + i] = (in[i] == 1 && out[lead + i] != 1) ? 0 : static_cast<std::ptrdiff_t>(rs[i]);
  return result;
}

namespace {
template <typename T>
void view_copy(const StridedLoop& loop, const char* src, char* dst) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  loop.run([&](const std::ptrdiff_t* off, size_t n, const std::ptrdiff_t* inner) {
    T* o = d + off[0];
    const T* i = s + off[1];
    std::ptrdiff_t si = inner[1];
    if (si == 1) {
      std::memcpy(o, i, n * sizeof(T));
    } else {
      for (size_t j = 0; j < n; ++j) o[j] = i[static_cast<std::ptrdiff_t>(j) * si];
    }
  });
}
}  // namespace

Kernel make_view_copy(const Shape& shape, std::vector<std::ptrdiff_t> strides,
                      std::ptrdiff_t offset, size_t elem_size) {
  StridedLoop loop(shape, {to_signed(row_major_strides(shape)), std::move(strides)});
  // The element width decides the copy loop once, here: every element size has one.
  auto copier = [&](auto tag) -> Kernel {
    using W = decltype(tag);
    return [loop, offset](const void* const* in, void* const* out) {
      const char* src = static_cast<const char*>(in[0]) + offset * static_cast<std::ptrdiff_t>(sizeof(W));
      view_copy<W>(loop, src, static_cast<char*>(out[0]));
    };
  };
  switch (elem_size) {
    case 1: return copier(uint8_t{});
    case 2: return copier(uint16_t{});
    case 4: return copier(uint32_t{});
    case 8: return copier(uint64_t{});
    default: break;
  }
  throw std::logic_error("view copy of " + std::to_string(elem_size) + "-byte elements");
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
