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
  // 160 columns, so that the status after the numbers is not cut to the 80 of a sizeless pty.
  return run("script -qec 'stty cols 160; " + quoted + "' /dev/null");
}

class ProgressCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (smollm2_path().empty()) GTEST_SKIP() << hg::test::kNoSmolLM2Message;
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

TEST_F(ProgressCli, PerplexityAndBenchBarsOnATerminal) {
  const std::string m = "-m '" + smollm2_path() + "' -t 2 ";
  const RunResult ppl = run_on_terminal("perplexity " + m + "--ids-file '" + ids_.string() + "' --ctx 256 --json");
  ASSERT_EQ(ppl.exit_code, 0) << ppl.out;
  EXPECT_NE(ppl.out.find("\rperplexity ["), std::string::npos) << ppl.out;
  EXPECT_NE(ppl.out.find("768/768 tokens 100%"), std::string::npos) << ppl.out;
  EXPECT_NE(ppl.out.find("window 3/3, ppl so far"), std::string::npos) << ppl.out;

  const RunResult bench = run_on_terminal("bench " + m + "-p 256 -n 0 -r 2 -o jsonl");
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_NE(bench.out.find("\rbench ["), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("3/3 runs 100%"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("| full pp256 t2 b1"), std::string::npos) << bench.out;
}

TEST_F(ProgressCli, NoBarInAPipeAndStdoutUnchanged) {
  const RunResult piped = run_hybridgen(generate_args(ids_));
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find("prefill ["), std::string::npos) << piped.err;
  // At most plain periodic lines (one per 10 s, when the machine is slow enough to need them).
  for (size_t at = piped.err.find("prefill"); at != std::string::npos; at = piped.err.find("prefill", at + 1))
    EXPECT_TRUE(at == 0 || piped.err[at - 1] == '\n') << piped.err;
  const RunResult quiet = run_hybridgen(generate_args(ids_) + " --no-progress");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(piped.out, quiet.out);
  EXPECT_FALSE(piped.out.empty());
}

}  // namespace
}  // namespace hg::test
