// The kernel of FusedElementwise: its program runs block by block (kBlock elements), each
// instruction a simple loop over a block that the compiler vectorises; intermediates live in
// a scratch buffer made at compile time, inputs are read in place.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {
namespace {

constexpr size_t kBlock = 512;
using Code = FusedElementwise::Code;

// Registers never overlap (each instruction writes its own), so the pointers are restrict and
// the loops branch-free: they vectorise.
template <typename T>
void run_instr(const FusedElementwise::Instr& ins, T* __restrict__ d, const T* __restrict__ a,
               const T* __restrict__ b, const T* __restrict__ c, size_t n) {
  switch (ins.code) {
    case Code::add: for (size_t j = 0; j < n; ++j) d[j] = a[j] + b[j]; break;
    case Code::sub: for (size_t j = 0; j < n; ++j) d[j] = a[j] - b[j]; break;
    case Code::mul: for (size_t j = 0; j < n; ++j) d[j] = a[j] * b[j]; break;
    case Code::div: for (size_t j = 0; j < n; ++j) d[j] = a[j] / b[j]; break;
    // NaN in either argument gives NaN, as the unfused kernels do.
    case Code::max:
      for (size_t j = 0; j < n; ++j) {
        T x = a[j], y = b[j];
        d[j] = (x > y || x != x) ? x : y;
      }
      break;
    case Code::min:
      for (size_t j = 0; j < n; ++j) {
        T x = a[j], y = b[j];
        d[j] = (x < y || x != x) ? x : y;
      }
      break;
    case Code::pow: for (size_t j = 0; j < n; ++j) d[j] = std::pow(a[j], b[j]); break;
    case Code::neg: for (size_t j = 0; j < n; ++j) d[j] = -a[j]; break;
    case Code::abs: for (size_t j = 0; j < n; ++j) d[j] = std::fabs(a[j]); break;
    case Code::exp: for (size_t j = 0; j < n; ++j) d[j] = std::exp(a[j]); break;
    case Code::log: for (size_t j = 0; j < n; ++j) d[j] = std::log(a[j]); break;
    case Code::sqrt: for (size_t j = 0; j < n; ++j) d[j] = std::sqrt(a[j]); break;
    case Code::tanh: for (size_t j = 0; j < n; ++j) d[j] = std::tanh(a[j]); break;
    case Code::sigmoid:
      for (size_t j = 0; j < n; ++j) {
        T e = std::exp(-std::fabs(a[j]));
        d[j] = a[j] >= 0 ? T(1) / (T(1) + e) : e / (T(1) + e);
      }
      break;
    case Code::relu: for (size_t j = 0; j < n; ++j) d[j] = std::max(a[j], T(0)); break;
    case Code::gt: for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(a[j] > b[j]); break;
    case Code::ge: for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(a[j] >= b[j]); break;
    case Code::lt: for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(a[j] < b[j]); break;
    case Code::le: for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(a[j] <= b[j]); break;
    case Code::eq: for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(a[j] == b[j]); break;
    case Code::ne: for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(a[j] != b[j]); break;
    case Code::select:
      for (size_t j = 0; j < n; ++j) {
        T x = b[j], y = c[j];
        d[j] = a[j] != T(0) ? x : y;
      }
      break;
  }
}

template <typename T>
Kernel fused_kernel(const FusedElementwise& node) {
  const auto& program = node.get_program();
  size_t nin = node.get_input_size();
  size_t total = shape_size(node.get_shape());
  // Per input: 0 full, 1 scalar, 2 boolean full, 3 boolean scalar.
  std::vector<int> kind(nin);
  for (size_t i = 0; i < nin; ++i)
    kind[i] = (node.get_input_element_type(i) == element::boolean ? 2 : 0) +
              (node.get_input_shape(i).empty() ? 1 : 0);
  size_t nregs = nin + program.size();
  // Scratch: one block per register (inputs that need converting or splatting, and temps).
  auto scratch = std::make_shared<std::vector<T>>(nregs * kBlock);
  return [program, nin, total, kind, nregs, scratch](const void* const* in, void* const* out) {
    T* s = scratch->data();
    std::vector<const T*> ptr(nregs);
    T* o = static_cast<T*>(out[0]);
    // Scalars are splatted once per call.
    for (size_t i = 0; i < nin; ++i) {
      if (kind[i] == 1) std::fill(s + i * kBlock, s + (i + 1) * kBlock, *static_cast<const T*>(in[i]));
      if (kind[i] == 3)
        std::fill(s + i * kBlock, s + (i + 1) * kBlock, *static_cast<const char*>(in[i]) ? T(1) : T(0));
    }
    for (size_t start = 0; start < total; start += kBlock) {
      size_t n = std::min(kBlock, total - start);
      for (size_t i = 0; i < nin; ++i) {
        switch (kind[i]) {
          case 0: ptr[i] = static_cast<const T*>(in[i]) + start; break;
          case 2: {
            const char* b = static_cast<const char*>(in[i]) + start;
            T* d = s + i * kBlock;
            for (size_t j = 0; j < n; ++j) d[j] = b[j] ? T(1) : T(0);
            ptr[i] = d;
            break;
          }
          default: ptr[i] = s + i * kBlock; break;
        }
      }
      for (size_t k = 0; k < program.size(); ++k) {
        const auto& ins = program[k];
        bool last = k + 1 == program.size();
        T* d = last ? o + start : s + static_cast<size_t>(ins.dst) * kBlock;
        run_instr<T>(ins, d, ins.a >= 0 ? ptr[static_cast<size_t>(ins.a)] : nullptr,
                     ins.b >= 0 ? ptr[static_cast<size_t>(ins.b)] : nullptr,
                     ins.c >= 0 ? ptr[static_cast<size_t>(ins.c)] : nullptr, n);
        ptr[static_cast<size_t>(ins.dst)] = d;
      }
    }
  };
}

NGRAPH_CPU_KERNEL("CPUFusedElementwise", [](const Node& node) -> Kernel {
  auto& f = static_cast<const FusedElementwise&>(node);
  if (f.get_element_type() == element::f32) return fused_kernel<float>(f);
  if (f.get_element_type() == element::f64) return fused_kernel<double>(f);
  node.fail_type("fused kernels need f32 or f64, got " + f.get_element_type().get_type_name());
});

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
