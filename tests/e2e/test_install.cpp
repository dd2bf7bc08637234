// `cmake --install` into a temporary prefix, then the installed binary runs from there: it prints
// its version and build, finds the shipped configs and tools beside it, generates from a tiny
// model, and `sweep --plot` finds the installed plot script (not the checkout's).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

class Install : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    prefix_ = new fs::path(temp_dir("install") / "prefix");
    const fs::path build = bin_dir().parent_path();
    install_ = new RunResult(run("cmake --install " + quote(build) + " --prefix " + quote(*prefix_)));
  }
  static void TearDownTestSuite() {
    delete prefix_;
    delete install_;
  }
  void SetUp() override { ASSERT_EQ(install_->exit_code, 0) << install_->out << install_->err; }

  static RunResult installed(const std::string& args, const std::string& env = "") {
    // From a directory that is not the checkout, so nothing is found through the working directory.
    return run("cd " + quote(prefix_->parent_path()) + " && " + env + " " + quote(*prefix_ / "bin/hybridgen") + " " + args);
  }

  static fs::path* prefix_;
  static RunResult* install_;
};
fs::path* Install::prefix_ = nullptr;
RunResult* Install::install_ = nullptr;

TEST_F(Install, LaysOutTheBinaryConfigsAndTools) {
  const fs::path& p = *prefix_;
  EXPECT_TRUE(fs::exists(p / "bin/hybridgen"));
  // Every shipped config, and nothing else, under share/hybridgen/configs.
  for (const auto& e : fs::recursive_directory_iterator(source_dir() / "configs")) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), source_dir() / "configs");
    EXPECT_TRUE(fs::exists(p / "share/hybridgen/configs" / rel)) << rel;
  }
  for (const char* tool : {"plot_sweep.py", "fetch_model.sh"}) {
    const fs::path t = p / "share/hybridgen/tools" / tool;
    ASSERT_TRUE(fs::exists(t)) << t;
    EXPECT_NE(fs::status(t).permissions() & fs::perms::owner_exec, fs::perms::none) << t << " is not executable";
  }
}

TEST_F(Install, VersionNamesTheReleaseAndTheBuild) {
  const RunResult r = installed("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // hybridgen 0.2.0 (commit 1a2b3c4-dirty, Release, GNU 12.2.0, CUDA on)
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^hybridgen \d+\.\d+\.\d+ \(commit [^,]+, \w+, \w+ [\d.]+, CUDA (on|off)\)\n$)")))
      << r.out;
  EXPECT_EQ(run_hybridgen("--version").out, r.out) << "the installed binary is the built one";
}

TEST_F(Install, InstalledBinaryGeneratesAndPlots) {
  const std::string model = quote(tiny_model("llama-gqa"));
  RunResult r = installed("generate -m " + model + " --ids '[1, 2, 3]' -n 4 --temp 0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());

  // sweep --plot runs the installed plot script: the checkout is not above the installed binary
  // and the working directory has no tools/.
  const fs::path dir = prefix_->parent_path();
  std::ofstream(dir / "one.yaml") << "name: one\ntask: bench\nfixed:\n  model: " << tiny_model("llama-gqa").string()
                                  << "\n  policy: full\n  n-prompt: 8\n  threads: 1\ngrid:\n  n-gen: [2, 3]\n";
  r = installed("sweep one.yaml -o one.jsonl --no-progress --plot figs", "env -u HG_PLOT_SCRIPT");
  if (r.exit_code != 0 && r.err.find("matplotlib") != std::string::npos)
    GTEST_SKIP() << "no python3 with matplotlib (scripts/setup.sh installs python3-matplotlib)";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "one.jsonl"));
  EXPECT_TRUE(fs::exists(dir / "figs")) << r.err;
}

}  // namespace
}  // namespace hg::test
