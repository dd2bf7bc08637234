// Which vector ISA the CPU kernels run with, chosen once at run time.
//
// Detection uses cpuid (__builtin_cpu_supports); HG_CPU_ISA=scalar|avx2|avx512|avx512_bf16 asks
// for a lower level (a request above what the CPU has is clamped down, never trusted). Tests do
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

}  // namespace hg::cpu
