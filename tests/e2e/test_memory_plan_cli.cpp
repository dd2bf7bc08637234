// A memory plan that does not fit is said before anything is allocated: `info` says so, and
// `generate` fails with one line naming the bytes needed and available, on the device for `full`
// and per host NUMA node for a hybrid policy. A tiny model whose config allows a huge context
// makes plans of hundreds of GiB without touching that memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mem/topology.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHugeCtx = "268435456";  // 2^28 tokens x 1 KiB of f32 KV per token: 256 GiB

fs::path long_context_model() {
  static const fs::path dir = [] {
    const fs::path d = temp_dir("longctx") / "model";
    fs::copy(tiny_model("llama-mha"), d, fs::copy_options::recursive);
    nlohmann::json config = nlohmann::json::parse(read_file(d / "config.json"));
    config["max_position_embeddings"] = std::stoll(kHugeCtx);
    std::ofstream(d / "config.json") << config.dump(2);
    return d;
  }();
  return dir;
}

class MemoryPlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mem::system_memory().available >= (uint64_t{256} << 30))
      GTEST_SKIP() << "this machine could hold the 256 GiB plan";
  }
};

void expect_one_line(const RunResult& r, const std::string& words) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 134);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << "expected '" << words << "' in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(MemoryPlanCli, InfoSaysAPlanDoesNotFit) {
  const std::string m = "info -m '" + long_context_model().string() + "' --kv-dtype f32 --ctx ";
  const RunResult big = run_hybridgen(m + kHugeCtx);
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_NE(big.out.find("fits:         NO: memory plan does not fit: device cpu"), std::string::npos) << big.out;
  EXPECT_NE(big.out.find("needs 256.0 GiB"), std::string::npos) << big.out;
  const auto j = nlohmann::json::parse(run_hybridgen(m + kHugeCtx + " --json").out);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["device_plan"]["kv_bytes"].get<uint64_t>(), uint64_t{256} << 30);

  const RunResult small = run_hybridgen(m + "1024");
  EXPECT_NE(small.out.find("fits:         yes"), std::string::npos) << small.out;
}

TEST_F(MemoryPlanCli, GenerateFailsBeforeAllocating) {
  const std::string m =
      "generate -m '" + long_context_model().string() + "' --ids '[1,2,3]' -n 2 --kv-dtype f32 --ctx " + kHugeCtx;
  expect_one_line(run_hybridgen(m), "memory plan does not fit: device cpu");
  const RunResult full = run_hybridgen(m);
  EXPECT_NE(full.err.find("needs 256.0 GiB (KV cache 256.0 GiB"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("available (host memory)"), std::string::npos) << full.err;
  // Hybrid: the device holds 1028 tokens; the host K+V per node is what cannot fit.
  const RunResult hybrid = run_hybridgen(m + " --policy hybrid");
  expect_one_line(hybrid, "memory plan does not fit: node ");
  EXPECT_NE(hybrid.err.find("of K+V"), std::string::npos) << hybrid.err;
  EXPECT_NE(hybrid.err.find("free"), std::string::npos) << hybrid.err;
}

}  // namespace
}  // namespace hg::test
