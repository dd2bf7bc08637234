// Linked into every test binary. The tests run the arithmetic a user gets by default: nothing in
// the environment chooses it for them (precision follows the weights: fp32 for the f32 and f16
// test models, bf16 GEMMs and attention for bf16 and quantized ones where the CPU has AVX512_BF16
// or AMX, EngineOptions::precision). A test that checks the fp32 path of a bf16 or quantized model
// asks for it (--precision f32, or HG_PREFILL_GEMM=sgemm in a command it starts).
//
// HG_TEST_CPU_LEVEL=avx512_bf16|amx|avx2: a whole binary run again at one kernel level of the CPU
// (CMakeLists.txt's CpuLevel.* tests, which set HG_PREFILL_GEMM or HG_CPU_ISA beside it, for this
// process and the hybridgen processes it starts). Where the CPU lacks that level every test skips,
// saying so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/cpu_isa.h"

namespace {

class CpuLevelEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* level = std::getenv("HG_TEST_CPU_LEVEL");
    if (level == nullptr || *level == '\0') return;
    using namespace hg::cpu;
    const std::string l = level;
    if (l == "avx512_bf16" && !cpu_isa_supported(CpuIsa::Avx512Bf16))
      GTEST_SKIP() << "HG_TEST_CPU_LEVEL=avx512_bf16: this CPU has no AVX512_BF16";
    if (l == "amx" && !amx_bf16_supported()) GTEST_SKIP() << "HG_TEST_CPU_LEVEL=amx: this CPU has no AMX-BF16";
    if (l == "avx2" && !cpu_isa_supported(CpuIsa::Avx2)) GTEST_SKIP() << "HG_TEST_CPU_LEVEL=avx2: this CPU has no AVX2";
    if (l != "avx512_bf16" && l != "amx" && l != "avx2") FAIL() << "HG_TEST_CPU_LEVEL=" << l << " is not a level";
  }
};

[[maybe_unused]] ::testing::Environment* const kCpuLevel =
    ::testing::AddGlobalTestEnvironment(new CpuLevelEnvironment);

}  // namespace
