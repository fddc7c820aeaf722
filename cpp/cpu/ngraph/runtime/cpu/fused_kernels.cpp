// The kernel of FusedElementwise: its program runs block by block (kBlock elements), each
// instruction a simple loop over a block that the compiler vectorises; intermediates live in
// a scratch buffer the memory planner places, inputs are read in place.
//
// Portable builds (x86-64-v2, see CMakeLists.txt) compile the instruction loops twice: for the
// build's instruction set and for AVX2+FMA, and each kernel picks one when it is made
// (__builtin_cpu_supports), so a wheel gets 8-wide loops on the CPUs that have them; and a
// third time for AVX-512 (16 wide), which the fused loops alone take: GELU's gradient (an erf
// and an exp per element) is bound by arithmetic, 1.65x faster than with AVX2 on Zen 5.
// NGRAPH_CPU_ISA=baseline turns the AVX2 and AVX-512 loops off (for comparing), avx2 the
// AVX-512 ones.
//
// bf16 activations (mixed precision, FusedElementwise::bf16_sets): a bf16 input is loaded a
// block at a time into its register as f32 (its bits shifted up: exact), and a bf16 output is
// computed into its register and stored rounded to nearest even (f32 denormals as zero, NaN
// kept quiet: what oneDNN's casts give), by vcvtneps2bf16 where the CPU has it. The program
// itself runs in f32.
#include <immintrin.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ngraph/runtime/cpu/op/fused_elementwise.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/sharded_update.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
// NGRAPH_CPU_ISA in lower case (AVX2 as avx2, as ONEDNN_MAX_CPU_ISA takes it).
std::string cpu_isa_setting() {
  std::string v = settings::text("NGRAPH_CPU_ISA");
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v;
}
}  // namespace

bool use_avx2_twins() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = [] {
    if (cpu_isa_setting() == "baseline") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return avx2;
#else
  return false;
#endif
}

// The AVX-512 twins (16 lanes: GELU's gradient, an erf and an exp per element, is bound by
// arithmetic; Dropout's Philox) where the AVX2 twins run, the CPU has AVX-512 and
// NGRAPH_CPU_ISA is not avx2.
bool use_avx512_twins() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = use_avx2_twins() && cpu_isa_setting() != "avx2" &&
                             __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("bmi2");
  return avx512;
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

// bf16 <-> f32 of a block (see the top of the file).
NGRAPH_CPU_LOOP void load_bf16(float* __restrict__ d, const std::uint16_t* __restrict__ a, size_t n) {
  for (size_t j = 0; j < n; ++j) d[j] = __builtin_bit_cast(float, static_cast<std::uint32_t>(a[j]) << 16);
}
NGRAPH_CPU_LOOP void store_bf16(std::uint16_t* __restrict__ d, const float* __restrict__ a, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    auto u = __builtin_bit_cast(std::uint32_t, a[j]);
    std::uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r;  // NaN: quiet
    r = (u & 0x7f800000u) == 0 ? (u >> 16) & 0x8000u : r;          // zero, denormal: signed zero
    d[j] = static_cast<std::uint16_t>(r);
  }
}
#undef NGRAPH_CPU_LOOP

using LoadBf16 = void (*)(float*, const std::uint16_t*, size_t);
using StoreBf16 = void (*)(std::uint16_t*, const float*, size_t);
void load_bf16_plain(float* d, const std::uint16_t* a, size_t n) { load_bf16(d, a, n); }
void store_bf16_plain(std::uint16_t* d, const float* a, size_t n) { store_bf16(d, a, n); }
#if defined(__x86_64__) && defined(__GNUC__)
#define NGRAPH_CPU_HAVE_BF16_TWIN 1
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,prefer-vector-width=512"))) void load_bf16_avx512(
    float* d, const std::uint16_t* a, size_t n) {
  load_bf16(d, a, n);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void store_bf16_native(
    std::uint16_t* d, const float* a, size_t n) {
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(a + j))));
  if (j < n) {
    auto m = static_cast<__mmask16>((1u << (n - j)) - 1);
    _mm256_mask_storeu_epi16(d + j, m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, a + j))));
  }
}
#endif

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
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX512F__)
#define NGRAPH_CPU_HAVE_AVX512_TWIN 1
NGRAPH_CPU_DEFINE_RUN_INSTR(run_instr_avx512,
                            __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,"
                                                  "prefer-vector-width=512"))))
#endif
#undef NGRAPH_CPU_UNARY_CASE
#undef NGRAPH_CPU_BINARY_CASE
#undef NGRAPH_CPU_COMPARE_CASE
#undef NGRAPH_CPU_SELECT_CASE
#undef NGRAPH_CPU_DEFINE_RUN_INSTR

// The loops for this CPU: the AVX-512 twin where it has AVX-512 (unless NGRAPH_CPU_ISA is
// avx2 or baseline), the AVX2 twin where it has AVX2 and FMA (unless it is baseline), else
// the build's own.
template <typename T>
RunInstr<T> pick_run_instr() {
#ifdef NGRAPH_CPU_HAVE_AVX512_TWIN
  if (use_avx512_twins()) return &run_instr_avx512<T>;
#endif
#ifdef NGRAPH_CPU_HAVE_AVX2_TWIN
  if (use_avx2_twins()) return &run_instr_avx2<T>;
#endif
  return &run_instr<T>;
}

// The bf16 block conversions for this CPU: vcvtneps2bf16 where it has AVX-512 BF16 and the
// AVX-512 loops run, else the portable loops (the same values).
struct Bf16Converts {
  LoadBf16 load = &load_bf16_plain;
  StoreBf16 store = &store_bf16_plain;
};
Bf16Converts pick_bf16_converts() {
  Bf16Converts c;
#ifdef NGRAPH_CPU_HAVE_BF16_TWIN
  if (use_avx512_twins()) c.load = &load_bf16_avx512;
  if (use_avx512_twins() && __builtin_cpu_supports("avx512bf16")) c.store = &store_bf16_native;
#endif
  return c;
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

// An input a sharded update reads as the sum of every rank's slot (see sharded_update.hpp).
template <typename T>
struct SummedRead {
  size_t input;
  std::vector<const T*> ranks;
  double factor;
};

// FusedElementwise's program, compiled once: runs over a range of the output's elements.
// Non-scalar inputs share the output's layout (the layout rule passes a blocked layout
// through only then), so the program runs over the storage elements, padding included.
template <typename T>
class FusedProgram {
 public:
  explicit FusedProgram(KernelContext& ctx) {
    auto& node = static_cast<const FusedElementwise&>(ctx.node);
    m_program = node.get_program();
    m_extra = node.get_extra_outputs();
    m_nin = node.get_input_size();
    m_total = ctx.output(0).elements();
    // Per input: 0 full, 1 scalar, 2 boolean full, 3 boolean scalar, 4 bf16 full.
    for (size_t i = 0; i < m_nin; ++i) {
      element::Type t = node.get_input_element_type(i);
      bool scalar = node.get_input_shape(i).empty();
      m_kind.push_back(t == element::bf16 && !scalar ? 4 : (t == element::boolean ? 2 : 0) + (scalar ? 1 : 0));
    }
    m_bf16_out = node.get_output_element_type(0) == element::bf16;
    m_bf16 = pick_bf16_converts();
    m_nregs = m_nin + m_program.size();
    // Scratch: one block per register (inputs that need converting or splatting, and temps),
    // planned by the memory planner.
    m_scratch = ctx.scratch(m_nregs * kBlock * sizeof(T));
    m_run_instr = pick_run_instr<T>();
  }
  size_t total() const { return m_total; }
  size_t inputs() const { return m_nin; }

  // Elements [lo, hi) of every output; the inputs in `summed` are read as sums of slots.
  void run(const void* const* in, void* const* out, size_t lo, size_t hi,
           const std::vector<SummedRead<T>>& summed) const {
    T* s = static_cast<T*>(out[m_scratch]);
    const T* ptr[64];
    std::vector<const T*> heap;
    const T** regs = ptr;
    if (m_nregs > 64) {
      heap.resize(m_nregs);
      regs = heap.data();
    }
    splat_scalars(in, s);
    for (size_t start = lo; start < hi; start += kBlock) {
      size_t n = std::min(kBlock, hi - start);
      load_inputs(in, s, regs, start, n);
      for (const auto& sm : summed) {
        T* d = s + sm.input * kBlock;
        sum_block(d, sm.ranks, start, n, sm.factor);
        regs[sm.input] = d;
      }
      if (!m_bf16_out) {
        run_block(static_cast<T*>(out[0]) + start, s, regs, n);
      } else {  // computed into its register, stored as bf16
        T* last = s + static_cast<size_t>(m_program.back().dst) * kBlock;
        run_block(last, s, regs, n);
        if constexpr (std::is_same_v<T, float>) m_bf16.store(static_cast<std::uint16_t*>(out[0]) + start, last, n);
      }
      // Extra outputs leave the block's scratch only now, after every read of the block's
      // inputs: an update written into its variable's own buffer (in place) cannot change
      // what a later instruction of the block reads.
      for (size_t e = 0; e < m_extra.size(); ++e)
        std::memcpy(static_cast<T*>(out[e + 1]) + start, regs[static_cast<size_t>(m_extra[e])],
                    n * sizeof(T));
    }
  }

 private:
  // Scalars are splatted once per call.
  void splat_scalars(const void* const* in, T* s) const {
    for (size_t i = 0; i < m_nin; ++i) {
      if (m_kind[i] == 1) std::fill(s + i * kBlock, s + (i + 1) * kBlock, *static_cast<const T*>(in[i]));
      if (m_kind[i] == 3)
        std::fill(s + i * kBlock, s + (i + 1) * kBlock, *static_cast<const char*>(in[i]) ? T(1) : T(0));
    }
  }
  void load_inputs(const void* const* in, T* s, const T** regs, size_t start, size_t n) const {
    for (size_t i = 0; i < m_nin; ++i) {
      switch (m_kind[i]) {
        case 0: regs[i] = static_cast<const T*>(in[i]) + start; break;
        case 2: {
          const char* b = static_cast<const char*>(in[i]) + start;
          T* d = s + i * kBlock;
          for (size_t j = 0; j < n; ++j) d[j] = b[j] ? T(1) : T(0);
          regs[i] = d;
          break;
        }
        case 4: {
          T* d = s + i * kBlock;
          if constexpr (std::is_same_v<T, float>) m_bf16.load(d, static_cast<const std::uint16_t*>(in[i]) + start, n);
          regs[i] = d;
          break;
        }
        default: regs[i] = s + i * kBlock; break;
      }
    }
  }
  void run_block(T* o, T* s, const T** regs, size_t n) const {
    for (size_t k = 0; k < m_program.size(); ++k) {
      const auto& ins = m_program[k];
      bool last = k + 1 == m_program.size();
      T* d = last ? o : s + static_cast<size_t>(ins.dst) * kBlock;
      m_run_instr(ins, d, ins.a >= 0 ? regs[static_cast<size_t>(ins.a)] : nullptr,
                  ins.b >= 0 ? regs[static_cast<size_t>(ins.b)] : nullptr,
                  ins.c >= 0 ? regs[static_cast<size_t>(ins.c)] : nullptr, n);
      regs[static_cast<size_t>(ins.dst)] = d;
    }
  }

  std::vector<FusedElementwise::Instr> m_program;
  std::vector<int> m_extra;
  size_t m_nin = 0, m_total = 0, m_nregs = 0, m_scratch = 0;
  std::vector<int> m_kind;
  bool m_bf16_out = false;  // output 0 stored in bf16 (T is float)
  Bf16Converts m_bf16;
  RunInstr<T> m_run_instr = nullptr;
};

template <typename T>
Kernel fused_kernel(KernelContext& ctx) {
  auto program = std::make_shared<const FusedProgram<T>>(ctx);
  return [program](const void* const* in, void* const* out) {
    static const std::vector<SummedRead<T>> none;
    program->run(in, out, 0, program->total(), none);
  };
}

// Across nodes: the part of the update's one summed input inside this rank's share of its
// sharded range, read from its own slot, where SharedRegion::reduce_scatter left the sums.
template <typename T>
void run_share(const FusedProgram<T>& program, const RegionBinding& b, const SummedInput& summed,
               size_t range_at, size_t range_bytes, const void* const* in, void* const* out) {
  static const std::vector<SummedRead<T>> none;
  auto share = distributed::SharedRegion::share(range_bytes / sizeof(T), sizeof(T), b.local_rank,
                                                b.local_size, b.node, b.nodes);
  size_t at = (summed.offset - range_at) / sizeof(T), total = program.total();
  size_t lo = std::clamp(share.lo, at, at + total) - at, hi = std::clamp(share.hi, at, at + total) - at;
  if (lo >= hi) return;
  std::vector<const void*> inputs(in, in + program.inputs());
  inputs[summed.input] = b.base + summed.offset;
  program.run(inputs.data(), out, lo, hi, none);
}

// A sharded update's kernel: this rank's piece, summing the ranks' gradients as it reads them
// (one node), or its share of the sums reduce-scattered across nodes.
template <typename T>
Kernel sharded_fused_kernel(KernelContext& ctx, std::shared_ptr<const RegionBinding> binding,
                            std::vector<SummedInput> summed, bool mean, size_t range_at, size_t range_bytes) {
  auto program = std::make_shared<const FusedProgram<T>>(ctx);
  return [program, binding, summed, mean, range_at, range_bytes](const void* const* in, void* const* out) {
    const RegionBinding& b = *binding;
    if (b.nodes > 1) {  // planned so only with one summed input (ShardedUpdate::across_nodes)
      run_share(*program, b, summed.at(0), range_at, range_bytes, in, out);
      return;
    }
    std::vector<SummedRead<T>> reads;
    for (const auto& input : summed) {
      SummedRead<T> r{input.input, {}, mean ? 1.0 / b.local_size : 1.0};
      for (const char* slot : b.slots) r.ranks.push_back(reinterpret_cast<const T*>(slot + input.offset));
      reads.push_back(std::move(r));
    }
    auto piece = distributed::SharedRegion::piece(program->total(), sizeof(T), b.local_rank, b.local_size);
    program->run(in, out, piece.lo, piece.hi, reads);
  };
}

NGRAPH_CPU_KERNEL("CPUFusedElementwise", [](KernelContext& ctx) -> Kernel {
  element::Type t = ctx.node.get_output_element_type(0);
  // bf16 values (bf16_sets) are f32 programs' inputs and output.
  if (t == element::f32 || t == element::bf16) return fused_kernel<float>(ctx);
  if (t == element::f64) return fused_kernel<double>(ctx);
  ctx.node.fail_type("fused kernels need f32 or f64, got " + t.get_type_name());
}, elementwise_layout(false));

}  // namespace

Kernel sharded_update_kernel(KernelContext& ctx, std::shared_ptr<const RegionBinding> binding,
                             std::vector<SummedInput> summed, bool mean, size_t range_at,
                             size_t range_bytes) {
  element::Type t = ctx.node.get_output_element_type(0);
  if (t == element::f32)
    return sharded_fused_kernel<float>(ctx, std::move(binding), std::move(summed), mean, range_at,
                                       range_bytes);
  if (t == element::f64)
    return sharded_fused_kernel<double>(ctx, std::move(binding), std::move(summed), mean, range_at,
                                        range_bytes);
  ctx.node.fail_type("a sharded update needs f32 or f64, got " + t.get_type_name());
}

std::string loops_in_use() {
#ifdef NGRAPH_CPU_HAVE_AVX512_TWIN
  if (use_avx512_twins()) return "avx512";
#endif
#ifdef NGRAPH_CPU_HAVE_AVX2_TWIN
  if (use_avx2_twins()) return "avx2";
#endif
#if defined(__AVX2__)
  return "native";  // the build's own loops, compiled for this build's CPU (NGRAPH_NATIVE_ARCH)
#else
  return "baseline";
#endif
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
