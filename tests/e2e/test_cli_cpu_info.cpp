// Every report names the machine that made it: `info` and every bench format carry the CPU model
// and the ISA the kernels chose.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_isa.h"
#include "test_util.h"
#include "device/cpu_info.h"

namespace hg::test {
namespace {

TEST(CpuInfo, NamesTheCpuAndTheChosenIsa) {
  const CpuInfo& c = cpu_info();
  EXPECT_FALSE(c.model.empty());
  EXPECT_GE(c.usable_cpus, 1);
  EXPECT_EQ(c.isa, cpu::cpu_isa_label(cpu::active_cpu_isa()));
  auto has = [&](const char* f) { return std::find(c.features.begin(), c.features.end(), f) != c.features.end(); };
  // The dispatch level and the reported extensions come from the same CPUID bits.
  if (cpu::cpu_isa_supported(cpu::CpuIsa::Avx2)) {
    EXPECT_TRUE(has("avx2") && has("fma") && has("f16c"));
  }
  if (cpu::cpu_isa_supported(cpu::CpuIsa::Avx512)) {
    EXPECT_TRUE(has("avx512f") && has("avx512bw"));
  }
  if (cpu::cpu_isa_supported(cpu::CpuIsa::Avx512Bf16)) {
    EXPECT_TRUE(has("avx512_bf16"));
  }
  EXPECT_EQ(c.int8_dot, cpu::dot_int8_label(cpu::dot_int8_for(cpu::active_cpu_isa())));
  EXPECT_EQ(c.prefill_gemm, cpu::prefill_gemm_label(cpu::prefill_gemm_for(cpu::active_cpu_isa())));
  // AMX and AVX512_BF16 only where CPUID reports them
  if (c.prefill_gemm == "amx_bf16") {
    EXPECT_TRUE(has("amx_bf16"));
  }
  if (c.prefill_gemm == "avx512_bf16") {
    EXPECT_TRUE(has("avx512_bf16"));
  }
  EXPECT_NE(cpu_summary().find("kernels " + c.isa + ", int8 dot " + c.int8_dot + ", prefill gemm " + c.prefill_gemm),
            std::string::npos);
}

TEST(CpuInfo, InInfoAndEveryBenchFormat) {
  const std::string model = tiny_model("llama-gqa").string();
  const CpuInfo& c = cpu_info();

  RunResult info = run_hybridgen("info -m '" + model + "'");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("cpu:          " + cpu_summary()), std::string::npos) << info.out;
  RunResult info_json = run_hybridgen("info -m '" + model + "' --json");
  ASSERT_EQ(info_json.exit_code, 0) << info_json.err;
  const auto j = nlohmann::json::parse(info_json.out);
  EXPECT_EQ(j["cpu"]["model"], c.model);
  EXPECT_EQ(j["cpu"]["isa"], c.isa);
  EXPECT_EQ(j["cpu"]["int8_dot"], c.int8_dot);
  EXPECT_EQ(j["cpu"]["prefill_gemm"], c.prefill_gemm);
  EXPECT_EQ(j["cpu"]["usable_cpus"], c.usable_cpus);
  // The run's precision follows the weights: f32 for this f32 checkpoint, bf16 for a bf16 one.
  EXPECT_EQ(j["precision"], "f32");
  EXPECT_NE(info.out.find("precision:    f32 (auto: follows the weights"), std::string::npos) << info.out;
  const auto precision_of = [](const std::string& args) {
    const RunResult r = run_hybridgen("info " + args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["precision"].get<std::string>() : std::string();
  };
  EXPECT_EQ(precision_of("-m '" + tiny_model("llama-gqa-bf16").string() + "'"), "bf16");
  EXPECT_EQ(precision_of("-m '" + model + "' --precision bf16"), "bf16");
  EXPECT_EQ(precision_of("--synthetic '" + (source_dir() / "configs/models/smollm2-135m.yaml").string() + "' --synthetic-dtype q4_0"), "bf16");

  const std::string bench = "bench -m '" + model + "' -p 8 -n 2 -r 1 -t 1 ";
  RunResult md = run_hybridgen(bench + "-o md");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(md.out.rfind("cpu: " + cpu_summary() + "\n", 0), 0u) << md.out;  // the first line
  RunResult js = run_hybridgen(bench + "-o json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto rows = nlohmann::json::parse(js.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r["cpu_info"], cpu_summary());
    EXPECT_EQ(r["cpu_isa"], c.isa);
    EXPECT_EQ(r["backend"], "cpu (" + c.isa + ")");
  }
  RunResult csv = run_hybridgen(bench + "-o csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find(",\"" + cpu_summary() + "\"," + c.isa + "\n"), std::string::npos) << csv.out;
}

// HG_CPU_ISA=avx2 is the AVX2 class of CPUs (Zen 3, the AVX2 build of llama.cpp): no VNNI of any
// kind, even where the CPU has AVX-VNNI; avx_vnni is the AVX2 level with it (Alder Lake class).
TEST(CpuInfo, Avx2LevelTurnsAvxVnniOffAndAvxVnniLevelKeepsIt) {
  if (!cpu::cpu_isa_supported(cpu::CpuIsa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::string model = tiny_model("llama-gqa").string();
  const auto info_at = [&](const std::string& level) {
    const RunResult r =
        run("HG_CPU_ISA=" + level + " '" + (bin_dir() / "hybridgen").string() + "' info -m '" + model + "' --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["cpu"];
  };
  const auto avx2 = info_at("avx2");
  EXPECT_EQ(avx2["isa"], "avx2");
  EXPECT_EQ(avx2["int8_dot"], "avx2");
  const auto vnni = info_at("avx_vnni");
  EXPECT_EQ(vnni["isa"], "avx2");
  EXPECT_EQ(vnni["int8_dot"], cpu::dot_int8_supported(cpu::DotInt8::AvxVnni) ? "avx_vnni" : "avx2");
}

}  // namespace
}  // namespace hg::test
