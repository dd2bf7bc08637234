// Which vector ISA the CPU kernels run with, chosen once at run time.
//
// Detection uses cpuid (__builtin_cpu_supports); HG_CPU_ISA=scalar|avx2|avx_vnni|avx512|avx512_bf16
// asks for a lower level (a request above what the CPU has is ignored, never trusted). "avx2" is
// the AVX2 class of CPUs, so it also turns AVX-VNNI off; "avx_vnni" is the AVX2 level with it.
// HG_PREFILL_GEMM=sgemm|amx|avx512_bf16 chooses the prefill GEMM at the avx512_bf16 level (by
// default the best the CPU has: amx, else avx512_bf16). Tests do not rely on HG_CPU_ISA: they call the *_isa entry
// points with every level the CPU supports.
#pragma once
#include <cstdint>
#include <optional>

namespace hg::cpu {

enum class CpuIsa : uint8_t { Scalar, Avx2, Avx512, Avx512Bf16 };

// Best level this CPU (and OS) supports.
CpuIsa best_cpu_isa();
// Level the dispatching entry points use: best_cpu_isa(), lowered by HG_CPU_ISA. Read once.
CpuIsa active_cpu_isa();
bool cpu_isa_supported(CpuIsa isa);
const char* cpu_isa_label(CpuIsa isa);

// Integer dot-product instructions of the int8 GEMV (u8 x s8 -> int32 in groups of four), an axis
// apart from CpuIsa: AVX-VNNI exists without AVX-512 and AVX-512 without VNNI. AVX2 emulates the
// instruction with vpmaddubsw + vpmaddwd.
enum class DotInt8 : uint8_t { Scalar, Avx2, AvxVnni, Avx512Vnni };

// Best instructions the CPU has that a CpuIsa level allows (Avx512Vnni needs an AVX-512 level;
// AvxVnni is off when HG_CPU_ISA=avx2).
DotInt8 dot_int8_for(CpuIsa isa);
bool dot_int8_supported(DotInt8 dot);
const char* dot_int8_label(DotInt8 dot);

// The GEMM of the prefill path (n_tokens >= kMatmulSgemmMinTokens), another axis: oneDNN's fp32
// sgemm on dequantized tiles, or a bf16 GEMM (gemm_bf16.h) on the AMX-BF16 tile unit or with
// AVX512_BF16's vdpbf16ps.
enum class PrefillGemm : uint8_t { Sgemm, AmxBf16, Avx512Bf16 };

// AMX-TILE and AMX-BF16 in CPUID, and Linux granted this process the tile data state
// (arch_prctl ARCH_REQ_XCOMP_PERM; asked once, for every thread).
bool amx_bf16_supported();
// The CPU can run g: Sgemm everywhere, Avx512Bf16 where the Avx512Bf16 level is supported, AmxBf16
// where amx_bf16_supported().
bool prefill_gemm_supported(PrefillGemm g);
// At the Avx512Bf16 level: AmxBf16 where amx_bf16_supported(), else Avx512Bf16, unless
// HG_PREFILL_GEMM (or the tests' override) asks for sgemm, or for avx512_bf16 on a CPU with AMX;
// a request for amx where there is none gets avx512_bf16. Sgemm at the lower levels.
PrefillGemm prefill_gemm_for(CpuIsa isa);
// Tests: the prefill GEMM that prefill_gemm_for gives where the CPU allows it, over
// HG_PREFILL_GEMM (nullopt: the variable's again). Set it while no matmul runs.
void override_prefill_gemm(std::optional<PrefillGemm> g);
const char* prefill_gemm_label(PrefillGemm g);  // "sgemm_f32" | "amx_bf16" | "avx512_bf16"

}  // namespace hg::cpu
