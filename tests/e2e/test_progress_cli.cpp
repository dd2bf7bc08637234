// Progress of a long prefill: a bar on a terminal (a pseudo-terminal made by `script`), nothing
// of it in a pipe, nothing with --no-progress, and stdout the same in every case.
#include <gtest/gtest.h>

#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

std::string generate_args(const fs::path& ids) {
  return "generate -m '" + smollm2_path() + "' --ids-file '" + ids.string() + "' -n 4 --temp 0 -t 2";
}

// Runs hybridgen with stdin, stdout and stderr on one pseudo-terminal; returns what it wrote there.
RunResult run_on_terminal(const std::string& args) {
  const std::string cmd = "'" + (bin_dir() / "hybridgen").string() + "' " + args;
  std::string quoted;
  for (char c : cmd) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return run("script -qec '" + quoted + "' /dev/null");
}

class ProgressCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (smollm2_path().empty()) GTEST_SKIP() << "needs the SmolLM2 GGUF (run tools/fetch_model.sh)";
    if (run("command -v script").exit_code != 0) GTEST_SKIP() << "needs script(1) (util-linux) for a pseudo-terminal";
    ids_ = temp_dir("progress") / "ids.json";
    write_ids(ids_, random_ids(768, 5, 40000));  // 3 chunks of 256: long enough to pass the 0.5 s delay
  }
  fs::path ids_;
};

TEST_F(ProgressCli, BarOnATerminal) {
  const RunResult r = run_on_terminal(generate_args(ids_));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\rprefill ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("768/768 tokens 100%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;

  const RunResult quiet = run_on_terminal(generate_args(ids_) + " --no-progress");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("prefill"), std::string::npos) << quiet.out;
}

TEST_F(ProgressCli, NoBarInAPipeAndStdoutUnchanged) {
  const RunResult piped = run_hybridgen(generate_args(ids_));
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find("prefill"), std::string::npos) << piped.err;  // periodic lines only after 10 s
  const RunResult quiet = run_hybridgen(generate_args(ids_) + " --no-progress");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(piped.out, quiet.out);
  EXPECT_FALSE(piped.out.empty());
}

}  // namespace
}  // namespace hg::test
