#include "kernels/cpu/cpu_isa.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace hg::cpu {

namespace {
// F16C from CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
}  // namespace

CpuIsa best_cpu_isa() {
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    // The AVX-512 kernels use F, BW, VL and DQ together; BF16 only adds the bf16 conversions.
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::Avx512Bf16;
    if (avx512) return CpuIsa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
      return CpuIsa::Avx2;
    return CpuIsa::Scalar;
  }();
  return isa;
}

bool cpu_isa_supported(CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(best_cpu_isa()); }

CpuIsa active_cpu_isa() {
  static const CpuIsa isa = [] {
    CpuIsa want = best_cpu_isa();
    if (const char* env = std::getenv("HG_CPU_ISA")) {
      for (CpuIsa i : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16})
        if (std::strcmp(env, cpu_isa_label(i)) == 0 && cpu_isa_supported(i)) want = i;
    }
    return want;
  }();
  return isa;
}

const char* cpu_isa_label(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx512Bf16: return "avx512_bf16";
  }
  return "?";
}

}  // namespace hg::cpu
