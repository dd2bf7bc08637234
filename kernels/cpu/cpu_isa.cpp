#include "kernels/cpu/cpu_isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
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
// VNNI from CPUID leaf 7 (compilers disagree on the __builtin_cpu_supports names). Read once:
// cpuid traps to the hypervisor in a VM and costs microseconds.
bool has_avx512_vnni() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (c & (1u << 11)) != 0;
  }();
  return has;
}
bool has_amx_bf16() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;  // AMX-BF16, AMX-TILE
    // Linux hands out the 8 KB tile data state only to processes that ask (5.16 and later).
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
}
bool has_avx_vnni() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 4)) != 0;
  }();
  return has;
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
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()) return CpuIsa::Avx2;
    return CpuIsa::Scalar;
  }();
  return isa;
}

bool cpu_isa_supported(CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(best_cpu_isa()); }

namespace {
// The level HG_CPU_ISA asks for (the best one when unset or unknown), and whether it allows
// AVX-VNNI: "avx2" is the AVX2 class without it (Zen 2/3, Intel before Alder Lake, and the AVX2
// build of llama.cpp that PEER_ISA=avx2 makes), "avx_vnni" the AVX2 level with it (Alder
// Lake-class client cores); the other levels take it where the CPU has it.
struct IsaRequest {
  CpuIsa isa;
  bool avx_vnni;
};
const IsaRequest& isa_request() {
  static const IsaRequest req = [] {
    IsaRequest r{best_cpu_isa(), true};
    const char* env = std::getenv("HG_CPU_ISA");
    if (env == nullptr) return r;
    if (std::strcmp(env, "avx_vnni") == 0) {
      if (cpu_isa_supported(CpuIsa::Avx2)) r.isa = CpuIsa::Avx2;
      return r;
    }
    for (CpuIsa i : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16})
      if (std::strcmp(env, cpu_isa_label(i)) == 0 && cpu_isa_supported(i)) r = {i, i != CpuIsa::Avx2};
    return r;
  }();
  return req;
}

// The prefill GEMM HG_PREFILL_GEMM asks for (AmxBf16, the best, when unset or unknown), and the
// tests' override.
PrefillGemm prefill_gemm_request() {
  static const PrefillGemm g = [] {
    const char* env = std::getenv("HG_PREFILL_GEMM");
    if (env != nullptr && std::strcmp(env, "sgemm") == 0) return PrefillGemm::Sgemm;
    if (env != nullptr && std::strcmp(env, "avx512_bf16") == 0) return PrefillGemm::Avx512Bf16;
    return PrefillGemm::AmxBf16;
  }();
  return g;
}
std::atomic<int> g_prefill_override{-1};
}  // namespace

CpuIsa active_cpu_isa() { return isa_request().isa; }

DotInt8 dot_int8_for(CpuIsa isa) {
  if (!cpu_isa_supported(isa) || isa == CpuIsa::Scalar) return DotInt8::Scalar;
  if (isa >= CpuIsa::Avx512 && has_avx512_vnni()) return DotInt8::Avx512Vnni;
  if (has_avx_vnni() && isa_request().avx_vnni) return DotInt8::AvxVnni;
  return DotInt8::Avx2;
}

bool dot_int8_supported(DotInt8 dot) {
  switch (dot) {
    case DotInt8::Scalar:
      return true;
    case DotInt8::Avx2:
      return cpu_isa_supported(CpuIsa::Avx2);
    case DotInt8::AvxVnni:
      return cpu_isa_supported(CpuIsa::Avx2) && has_avx_vnni();
    case DotInt8::Avx512Vnni:
      return cpu_isa_supported(CpuIsa::Avx512) && has_avx512_vnni();
  }
  return false;
}

const char* dot_int8_label(DotInt8 dot) {
  switch (dot) {
    case DotInt8::Scalar:
      return "scalar";
    case DotInt8::Avx2:
      return "avx2";
    case DotInt8::AvxVnni:
      return "avx_vnni";
    case DotInt8::Avx512Vnni:
      return "avx512_vnni";
  }
  return "?";
}

bool amx_bf16_supported() { return cpu_isa_supported(CpuIsa::Avx512Bf16) && has_amx_bf16(); }

bool prefill_gemm_supported(PrefillGemm g) {
  switch (g) {
    case PrefillGemm::Sgemm:
      return true;
    case PrefillGemm::AmxBf16:
      return amx_bf16_supported();
    case PrefillGemm::Avx512Bf16:
      return cpu_isa_supported(CpuIsa::Avx512Bf16);
  }
  return false;
}

PrefillGemm prefill_gemm_for(CpuIsa isa) {
  const int forced = g_prefill_override.load(std::memory_order_relaxed);
  const PrefillGemm want = forced >= 0 ? static_cast<PrefillGemm>(forced) : prefill_gemm_request();
  if (isa != CpuIsa::Avx512Bf16 || !cpu_isa_supported(isa) || want == PrefillGemm::Sgemm) return PrefillGemm::Sgemm;
  return want == PrefillGemm::AmxBf16 && amx_bf16_supported() ? PrefillGemm::AmxBf16 : PrefillGemm::Avx512Bf16;
}

void override_prefill_gemm(std::optional<PrefillGemm> g) {
  g_prefill_override.store(g ? static_cast<int>(*g) : -1, std::memory_order_relaxed);
}

const char* prefill_gemm_label(PrefillGemm g) {
  switch (g) {
    case PrefillGemm::Sgemm:
      return "sgemm_f32";
    case PrefillGemm::AmxBf16:
      return "amx_bf16";
    case PrefillGemm::Avx512Bf16:
      return "avx512_bf16";
  }
  return "?";
}

const char* cpu_isa_label(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return "scalar";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Avx512:
      return "avx512";
    case CpuIsa::Avx512Bf16:
      return "avx512_bf16";
  }
  return "?";
}

}  // namespace hg::cpu
