// What CPU this is, for reports: the model name, the CPUs this process may run on, the vector
// ISA the kernels dispatch to, and the ISA extensions the CPU reports. Benchmark numbers are
// meaningless without it (`info`, bench output).
#pragma once
#include <string>
#include <vector>

namespace hg {

struct CpuInfo {
  std::string model;                  // CPUID brand string, e.g. "Intel(R) Xeon(R) Platinum 8488C"
  std::string vendor;                 // "GenuineIntel", "AuthenticAMD"
  int family = 0, model_number = 0;   // CPUID family / model (VMs often shorten the brand string)
  int usable_cpus = 0;                // CPUs in this process's affinity mask
  std::string isa;                    // level the kernels run with (cpu::active_cpu_isa(), HG_CPU_ISA)
  std::string int8_dot;               // the int8 GEMV's dot instructions at that level: avx2, avx_vnni, ...
  std::string prefill_gemm;           // the prefill GEMM at that level: sgemm_f32, amx_bf16 or avx512_bf16
  std::vector<std::string> features;  // vector extensions the CPU reports: avx2, avx512f, avx512_bf16, ...
};

// Read once per process.
const CpuInfo& cpu_info();
// One line: "AMD EPYC (AuthenticAMD family 25 model 17, 2 CPUs), kernels avx512_bf16, int8 dot
// avx512_vnni, prefill gemm sgemm_f32".
std::string cpu_summary();

}  // namespace hg
