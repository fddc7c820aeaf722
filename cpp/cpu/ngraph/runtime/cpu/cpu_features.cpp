#include "ngraph/runtime/cpu/cpu_features.hpp"

#include <dnnl.hpp>

#include <atomic>
#include <cstdio>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

std::map<std::string, bool> cpuid_flags() {
  std::map<std::string, bool> f;
  for (const char* name : {"avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_core",
                           "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"})
    f[name] = false;
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(1, 0, &a, &b, &c, &d)) {
    f["fma"] = c & (1u << 12);
    f["f16c"] = c & (1u << 29);
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f["avx2"] = b & (1u << 5);
    f["avx512f"] = b & (1u << 16);
    f["avx512dq"] = b & (1u << 17);
    f["avx512bw"] = b & (1u << 30);
    f["avx512vl"] = b & (1u << 31);
    f["avx512_fp16"] = d & (1u << 23);
    f["amx_bf16"] = d & (1u << 22);
    f["amx_tile"] = d & (1u << 24);
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    if (a >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f["avx512_bf16"] = a1 & (1u << 5);
  }
  f["avx512_core"] = f["avx512f"] && f["avx512dq"] && f["avx512bw"] && f["avx512vl"];
#endif
  return f;
}

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

CpuFeatures detect() {
  CpuFeatures f;
  f.flags = cpuid_flags();
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  f.onednn_isa = isa_name(isa);
  bool native = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  f.bf16_path = native ? "native" : "f32";
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool bf16_native() { return cpu_features().bf16_path == "native"; }

std::string bf16_fallback_notice() {
  static std::atomic<bool> said{false};
  std::string line = "ngraph: precision bf16 runs in f32 here: oneDNN's instruction set is " +
                     cpu_features().onednn_isa + ", without bf16 instructions (AVX512-BF16 or AMX)";
  if (!said.exchange(true)) std::fprintf(stderr, "%s\n", line.c_str());
  return line;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
