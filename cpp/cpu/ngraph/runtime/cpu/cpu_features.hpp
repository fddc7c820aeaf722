// What this CPU has (CPUID), the instruction set oneDNN runs with, and which path bf16 mixed
// precision takes here: "native" where oneDNN runs bf16 instructions (AVX512-BF16 or AMX),
// "f32" otherwise. oneDNN's AVX-512 bf16 emulation is not used: without bf16 instructions a
// compile in bf16 runs the f32 kernels (no casts) and says so once per process.
#pragma once

#include <map>
#include <string>

namespace ngraph {
namespace runtime {
namespace cpu {

struct CpuFeatures {
  // CPUID flags: avx2, fma, f16c, avx512f, avx512dq, avx512bw, avx512vl, avx512_core (the
  // four before it), avx512_bf16, avx512_fp16, amx_tile, amx_bf16.
  std::map<std::string, bool> flags;
  // oneDNN's effective ISA (capped by ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA, read once per
  // process): "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx", ...
  std::string onednn_isa;
  std::string bf16_path;  // "native" or "f32"
};

// Detected once per process.
const CpuFeatures& cpu_features();
// Whether bf16 compiles insert casts here (bf16_path == "native").
bool bf16_native();
// The one-line notice of a bf16 compile on a CPU without bf16 instructions, written to stderr
// the first time in a process (later calls return it without writing). Returns the line.
std::string bf16_fallback_notice();

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
