// Which vector ISA the CPU kernels run with, chosen once at run time.
//
// Detection uses cpuid (__builtin_cpu_supports); HG_CPU_ISA=scalar|avx2|avx_vnni|avx512|avx512_bf16
// asks for a lower level (a request above what the CPU has is ignored, never trusted). "avx2" is
// the AVX2 class of CPUs, so it also turns AVX-VNNI off; "avx_vnni" is the AVX2 level with it. Tests do
// not rely on the variable: they call the *_isa entry points with every level the CPU supports.
#pragma once
#include <cstdint>

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

}  // namespace hg::cpu
