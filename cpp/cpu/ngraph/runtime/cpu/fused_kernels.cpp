// The kernel of FusedElementwise: its program runs block by block (kBlock elements), each
// instruction a simple loop over a block that the compiler vectorises; intermediates live in
// a scratch buffer the memory planner places, inputs are read in place.
//
// Portable builds (x86-64-v2, see CMakeLists.txt) compile the instruction loops twice: for the
// build's instruction set and for AVX2+FMA, and each kernel picks one when it is made
// (__builtin_cpu_supports), so a wheel gets 8-wide loops on the CPUs that have them.
// NGRAPH_CPU_ISA=baseline turns the AVX2 loops off (for comparing the two).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ngraph/runtime/cpu/fusion.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

bool use_avx2_twins() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = [] {
    if (settings::text("NGRAPH_CPU_ISA") == "baseline") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return avx2;
#else
  return false;
#endif
}

namespace {

constexpr size_t kBlock = 512;
using Code = FusedElementwise::Code;

// Registers never overlap (each instruction writes its own), so the pointers are restrict and
// the loops vectorise. The math is the functors of scalar_ops.hpp, as in the loop kernels.
// Always inlined, so each loop is compiled for the instruction set of its caller (run_instr
// below, or its AVX2 twin).
#define NGRAPH_CPU_LOOP __attribute__((always_inline)) inline
template <typename F, typename T>
NGRAPH_CPU_LOOP void apply_unary(T* __restrict__ d, const T* __restrict__ a, size_t n) {
  F f;
  for (size_t j = 0; j < n; ++j) d[j] = f(a[j]);
}
template <typename F, typename T>
NGRAPH_CPU_LOOP void apply_binary(T* __restrict__ d, const T* __restrict__ a,
                                  const T* __restrict__ b, size_t n) {
  F f;
  for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(f(a[j], b[j]));
}
// Comparisons write a 0/1 mask register. Written as a select of constants (not a cast of the
// bool), which GCC vectorises into a compare and a mask; the cast stayed a scalar loop, and
// with Select behind it ReLU's gradient ran at a quarter of memory speed.
template <typename F, typename T>
NGRAPH_CPU_LOOP void apply_compare(T* __restrict__ d, const T* __restrict__ a,
                                   const T* __restrict__ b, size_t n) {
  F f;
  for (size_t j = 0; j < n; ++j) d[j] = f(a[j], b[j]) ? T(1) : T(0);
}
template <typename F, typename T>
NGRAPH_CPU_LOOP void apply_select(T* __restrict__ d, const T* __restrict__ c,
                                  const T* __restrict__ a, const T* __restrict__ b, size_t n) {
  F f;
  for (size_t j = 0; j < n; ++j) d[j] = f(c[j], a[j], b[j]);
}
#undef NGRAPH_CPU_LOOP

// One instruction over a block of n elements.
template <typename T>
using RunInstr = void (*)(const FusedElementwise::Instr&, T*, const T*, const T*, const T*, size_t);

#define NGRAPH_CPU_DEFINE_RUN_INSTR(Name, Attributes)                                            \
  template <typename T>                                                                          \
  Attributes void Name(const FusedElementwise::Instr& ins, T* d, const T* a, const T* b,         \
                       const T* c, size_t n) {                                                   \
    switch (ins.code) {                                                                          \
      NGRAPH_CPU_FUSED_OPS(NGRAPH_CPU_UNARY_CASE, NGRAPH_CPU_BINARY_CASE,                       \
                           NGRAPH_CPU_COMPARE_CASE, NGRAPH_CPU_SELECT_CASE)                      \
    }                                                                                            \
  }
#define NGRAPH_CPU_UNARY_CASE(Name) \
  case Code::Name: apply_unary<scalar::Name>(d, a, n); break;
#define NGRAPH_CPU_BINARY_CASE(Name) \
  case Code::Name: apply_binary<scalar::Name>(d, a, b, n); break;
#define NGRAPH_CPU_COMPARE_CASE(Name) \
  case Code::Name: apply_compare<scalar::Name>(d, a, b, n); break;
#define NGRAPH_CPU_SELECT_CASE(Name) \
  case Code::Name: apply_select<scalar::Name>(d, a, b, c, n); break;
NGRAPH_CPU_DEFINE_RUN_INSTR(run_instr, )
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define NGRAPH_CPU_HAVE_AVX2_TWIN 1
NGRAPH_CPU_DEFINE_RUN_INSTR(run_instr_avx2, __attribute__((target("avx2,fma"))))
#endif
#undef NGRAPH_CPU_UNARY_CASE
#undef NGRAPH_CPU_BINARY_CASE
#undef NGRAPH_CPU_COMPARE_CASE
#undef NGRAPH_CPU_SELECT_CASE
#undef NGRAPH_CPU_DEFINE_RUN_INSTR

// The loops for this CPU: the AVX2 twin when the build is portable and the CPU has AVX2 and
// FMA (unless NGRAPH_CPU_ISA=baseline), else the build's own.
template <typename T>
RunInstr<T> pick_run_instr() {
#ifdef NGRAPH_CPU_HAVE_AVX2_TWIN
  if (use_avx2_twins()) return &run_instr_avx2<T>;
#endif
  return &run_instr<T>;
}

// d[j] = (ranks[0][start + j] + ranks[1][start + j] + ...) * factor, added in rank order and
// then scaled: bitwise what SharedRegion::allreduce writes.
template <typename T>
void sum_block(T* __restrict d, const std::vector<const T*>& ranks, size_t start, size_t n,
               double factor) {
  const T* a = ranks[0] + start;
  const T* b = ranks[1] + start;
  for (size_t j = 0; j < n; ++j) d[j] = a[j] + b[j];
  for (size_t l = 2; l < ranks.size(); ++l) {
    const T* c = ranks[l] + start;
    for (size_t j = 0; j < n; ++j) d[j] = d[j] + c[j];
  }
  if (factor != 1.0)
    for (size_t j = 0; j < n; ++j) d[j] = static_cast<T>(d[j] * factor);
}

// Non-scalar inputs share the output's layout (the layout rule passes a blocked layout
// through only then), so the program runs over the storage elements, padding included.
// In a sharded update (CallState::summed_where_read) it runs over this rank's piece only,
// summing the ranks' gradients as it reads them.
template <typename T>
Kernel fused_kernel(KernelContext& ctx) {
  auto& node = static_cast<const FusedElementwise&>(ctx.node);
  const auto& program = node.get_program();
  size_t nin = node.get_input_size();
  size_t total = ctx.output(0).elements();
  const std::vector<int>& extra = node.get_extra_outputs();
  // Per input: 0 full, 1 scalar, 2 boolean full, 3 boolean scalar.
  std::vector<int> kind(nin);
  for (size_t i = 0; i < nin; ++i)
    kind[i] = (node.get_input_element_type(i) == element::boolean ? 2 : 0) +
              (node.get_input_shape(i).empty() ? 1 : 0);
  size_t nregs = nin + program.size();
  // Scratch: one block per register (inputs that need converting or splatting, and temps),
  // planned by the memory planner.
  size_t scratch = ctx.scratch(nregs * kBlock * sizeof(T));
  RunInstr<T> run_instr = pick_run_instr<T>();
  CallState* call = ctx.call_state();
  bool sharded = ctx.sharded();
  return [program, extra, nin, total, kind, nregs, scratch, run_instr, call, sharded](const void* const* in,
                                                                                     void* const* out) {
    T* s = static_cast<T*>(out[scratch]);
    struct Summed {
      size_t input;
      std::vector<const T*> ranks;
      double factor;
    };
    std::vector<Summed> summed;
    size_t lo = 0, hi = total;
    if (sharded && !call->summed_where_read.empty()) {
      const CallState::SummedWhereRead* any = nullptr;
      for (size_t i = 0; i < nin; ++i)
        if (kind[i] == 0)
          if (const auto* r = call->summed_where_read_for(in[i])) {
            size_t off = static_cast<size_t>(static_cast<const char*>(in[i]) - r->out);
            Summed sm{i, {}, r->factor};
            for (const char* slot : r->slots) sm.ranks.push_back(reinterpret_cast<const T*>(slot + off));
            summed.push_back(std::move(sm));
            any = r;
          }
      if (any) {  // this rank's piece, on 64-byte boundaries (no cache line written by two ranks)
        size_t align = std::max<size_t>(1, 64 / sizeof(T));
        size_t l = static_cast<size_t>(any->region->local_rank()), size = static_cast<size_t>(any->region->local_size());
        auto bound = [&](size_t q) { return q >= size ? total : total * q / size / align * align; };
        lo = bound(l);
        hi = bound(l + 1);
      }
    }
    const T* ptr[64];
    std::vector<const T*> heap;
    const T** regs = ptr;
    if (nregs > 64) {
      heap.resize(nregs);
      regs = heap.data();
    }
    T* o = static_cast<T*>(out[0]);
    // Scalars are splatted once per call.
    for (size_t i = 0; i < nin; ++i) {
      if (kind[i] == 1) std::fill(s + i * kBlock, s + (i + 1) * kBlock, *static_cast<const T*>(in[i]));
      if (kind[i] == 3)
        std::fill(s + i * kBlock, s + (i + 1) * kBlock, *static_cast<const char*>(in[i]) ? T(1) : T(0));
    }
    for (size_t start = lo; start < hi; start += kBlock) {
      size_t n = std::min(kBlock, hi - start);
      for (size_t i = 0; i < nin; ++i) {
        switch (kind[i]) {
          case 0: regs[i] = static_cast<const T*>(in[i]) + start; break;
          case 2: {
            const char* b = static_cast<const char*>(in[i]) + start;
            T* d = s + i * kBlock;
            for (size_t j = 0; j < n; ++j) d[j] = b[j] ? T(1) : T(0);
            regs[i] = d;
            break;
          }
          default: regs[i] = s + i * kBlock; break;
        }
      }
      for (const auto& sm : summed) {
        T* d = s + sm.input * kBlock;
        sum_block(d, sm.ranks, start, n, sm.factor);
        regs[sm.input] = d;
      }
      for (size_t k = 0; k < program.size(); ++k) {
        const auto& ins = program[k];
        bool last = k + 1 == program.size();
        T* d = last ? o + start : s + static_cast<size_t>(ins.dst) * kBlock;
        run_instr(ins, d, ins.a >= 0 ? regs[static_cast<size_t>(ins.a)] : nullptr,
                     ins.b >= 0 ? regs[static_cast<size_t>(ins.b)] : nullptr,
                     ins.c >= 0 ? regs[static_cast<size_t>(ins.c)] : nullptr, n);
        regs[static_cast<size_t>(ins.dst)] = d;
      }
      // Extra outputs leave the block's scratch only now, after every read of the block's
      // inputs: an update written into its variable's own buffer (in place) cannot change
      // what a later instruction of the block reads.
      for (size_t e = 0; e < extra.size(); ++e)
        std::memcpy(static_cast<T*>(out[e + 1]) + start, regs[static_cast<size_t>(extra[e])],
                    n * sizeof(T));
    }
  };
}

NGRAPH_CPU_KERNEL("CPUFusedElementwise", [](KernelContext& ctx) -> Kernel {
  element::Type t = ctx.node.get_output_element_type(0);
  if (t == element::f32) return fused_kernel<float>(ctx);
  if (t == element::f64) return fused_kernel<double>(ctx);
  ctx.node.fail_type("fused kernels need f32 or f64, got " + t.get_type_name());
}, elementwise_layout(false));

}  // namespace
}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
