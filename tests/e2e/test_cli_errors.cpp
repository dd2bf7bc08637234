// Bad input reaches the user as one clear line on stderr and a non-zero exit, never a crash:
// broken model files (tools/make_bad_models.py), bad options, policies that contradict themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

fs::path bad_root() {
  static fs::path root = [] {
    fs::path dir = temp_dir("bad");
    RunResult r = run(python() + " '" + (source_dir() / "tools/make_tiny_model.py").string() + "' '" +
                      (dir / "good").string() + "' --arch llama");
    if (r.exit_code != 0) throw std::runtime_error(r.err);
    std::string gguf = smollm2_path();
    r = run(python() + " '" + (source_dir() / "tools/make_bad_models.py").string() + "' '" + (dir / "good").string() +
            "' '" + dir.string() + "'" + (gguf.empty() ? "" : " --gguf '" + gguf + "'"));
    if (r.exit_code != 0) throw std::runtime_error(r.err);
    return dir;
  }();
  return root;
}

struct BadFile {
  std::string name;
  std::string words;
  // A broken copy of SmolLM2's GGUF (make_bad_models.py --gguf), made only where it is fetched;
  // the others are copies of the tiny safetensors model, made everywhere.
  bool from_gguf = false;
};
void PrintTo(const BadFile& f, std::ostream* os) { *os << f.name; }  // gtest names a failing case by it

class BadModel : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadModel, OneClearErrorLine) {
  const BadFile& c = GetParam();
  if (c.from_gguf && smollm2_path().empty()) GTEST_SKIP() << hg::test::kNoSmolLM2Message;
  const fs::path p = bad_root() / c.name;
  ASSERT_TRUE(fs::exists(p)) << p.string() << " was not made by tools/make_bad_models.py";
  expect_one_error_line(run_hybridgen("info -m '" + p.string() + "'"), c.words);
  // The same from a command that would run the model.
  expect_one_error_line(run_hybridgen("generate -m '" + p.string() + "' --ids '[1,2,3]' -n 2"), c.words);
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadModel,
    ::testing::Values(BadFile{"truncated", "outside the data section"},
                      BadFile{"header_beyond_file", "header length"},
                      BadFile{"offsets_outside_data", "outside the data section"},
                      BadFile{"overlapping_tensors", "overlaps tensor"},
                      BadFile{"unsupported_dtype", "dtype 'C64'"},
                      BadFile{"wrong_shape", "expected shape [64, 64], got [32, 128]"},
                      BadFile{"unknown_arch", "'gpt9' is not supported"},
                      BadFile{"missing_field", "missing field 'hidden_size'"},
                      BadFile{"gguf_truncated.gguf", "gguf_truncated.gguf", true},
                      BadFile{"gguf_unknown_tensor_type.gguf", "unknown ggml type 99", true}),
    [](const auto& info) {
      std::string n = info.param.name;
      std::replace(n.begin(), n.end(), '.', '_');
      return n;
    });

TEST(CliErrors, MissingModelFile) {
  expect_one_error_line(run_hybridgen("info -m /nonexistent/model.gguf"), "/nonexistent/model.gguf");
}

TEST(CliErrors, BadTokenIds) {
  const fs::path good = bad_root() / "good";
  expect_one_error_line(run_hybridgen("generate -m '" + good.string() + "' --ids '[1, 2, oops]' -n 2"), "--ids");
  expect_one_error_line(run_hybridgen("generate -m '" + good.string() + "' --ids '[1, 99999]' -n 2"), "99999");
}

TEST(CliErrors, AFullContextStopsGenerationWithOneLine) {
  // 4 prompt tokens in a context of 6: the third token fills it; said, not an error
  const RunResult r =
      run_hybridgen("generate -m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' --ctx 6 -n 5 --temp 0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stopped after 3 of 5 tokens: the context of 6 tokens is full"), std::string::npos) << r.err;
}

TEST(CliErrors, PoliciesThatContradictThemselves) {
  const std::string m = "-m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' -n 2";
  expect_one_error_line(run_hybridgen("generate " + m + " --policy warp-drive"), "is not a policy");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 3 --window 100"),
                        "longer than the context");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 16 --k -3"), "--k must be >= 0");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy streaming --ctx 64 --window 16 --select post --k 8"),
                        "drops evicted tokens");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy full --window 16"), "--policy full");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 16 --query psychic"),
                        "--query");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 16 --k-node 7"),
                        "NUMA node 7 does not exist");
}

TEST(CliErrors, KnobsOutOfRangeOrNotApplyingToThePreset) {
  const std::string m = "-m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' -n 2 --ctx 64";
  expect_one_error_line(run_hybridgen("generate " + m + " --policy offload --window 16"),
                        "--window does not apply to --policy offload");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy full --k 8"), "--k does not apply to --policy full");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --evict-block 0"), "--evict-block must be >= 1");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --partial-dims x"),
                        "--partial-dims: 'x' is not an integer");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --keep-evicted maybe"), "--keep-evicted");
  // bench compares policies: a knob must apply to one of them
  expect_one_error_line(run_hybridgen("bench -m '" + (bad_root() / "good").string() +
                                      "' -p 4 -n 0 -r 1 --policy full,offload --sinks 2"),
                        "--sinks does not apply to --policy full");
}

struct BadNumber {
  std::string args;
  std::string words;
};

// Every thread count, size and length option is range-checked: one line, a non-zero exit, and
// never an abort (exit 134: `-t 99999` used to end in std::terminate while starting threads).
TEST(CliErrors, BadNumbersGiveOneLineNeverAbort) {
  const std::string model = "-m '" + (bad_root() / "good").string() + "'";
  const std::string gen = "generate " + model + " --ids '[1,2,3,4]' ";
  const std::string hybrid = gen + "-n 2 --policy hybrid --ctx 64 ";
  const std::vector<BadNumber> cases = {
      {gen + "-t 99999", "-t must be between 0 and"},
      {gen + "-t -2", "-t must be between 0 and"},
      {gen + "-t 99999999999", "--threads"},
      {gen + "-t lots", "--threads"},
      {hybrid + "--window 16 --host-threads 5000", "--host-threads must be in [1, "},
      {hybrid + "--window 16 --host-threads -1", "--host-threads must be in [1, "},
      {hybrid + "--window 16 --evict-block 0", "--evict-block must be >= 1"},
      {hybrid + "--window 16 --partial-dims 0", "--partial-dims must be >= 1"},
      {hybrid + "--window -1", "--window must be >= 0"},
      {hybrid + "--window 16 --k-dram-budget 99999999999999999999G", "--k-dram-budget"},
      {gen + "-n -1", "-n must be between 0 and"},
      {gen + "-n 2147483647", "-n must be between 0 and"},
      {gen + "--ctx -5", "--ctx must be >= 0"},
      {gen + "--ctx 99999999999", "--ctx: '99999999999' is not a number of the option's type, or is out of its range"},
      {gen + "--ctx 12k", "--ctx: '12k' is not a number"},
      {gen + "--precision fast", "--precision: 'fast' is not one of auto, f32, bf16"},
      {"info " + model + " --precision fast", "--precision: 'fast' is not one of auto, f32, bf16"},
      {gen + "--ubatch -1", "--ubatch must be >= 0"},
      {gen + "--top-k -1", "--top-k must be between 0 and"},
      {gen + "--top-p 1.5", "--top-p must be between 0 and 1"},
      {gen + "--temp nan", "--temp must be between 0 and 100"},
      {gen + "--repeat-penalty 0", "--repeat-penalty must be between"},
      {gen + "--repeat-last-n -2", "--repeat-last-n must be between -1 and"},
      {gen + "--gpu -1", "--gpu must be >= 0"},
      {"generate " + model + " --ids '[4294967297]' -n 2", "is not a token id"},
      {"bench " + model + " -t 99999 -p 8 -n 0 -r 1", "-t must be between 1 and"},
      {"bench " + model + " -b 100000 -p 8 -n 0 -r 1", "-b must be between 1 and 256"},
      {"bench " + model + " -p 2147483647 -n 0 -r 1", "-p must be between 0 and"},
      {"bench " + model + " -p 8 -n 99999999 -r 1", "-n must be between 0 and"},
      {"bench " + model + " -p 0 -d 99999999 -n 1 -r 1", "-d must be between 0 and"},
      {"bench " + model + " -p 8 -n 0 -r 2147483647", "-r must be between 1 and"},
      {"bench " + model + " -p 8 -n 0 -r 1 --peak-gbps -3", "--peak-gbps must be between 0 and"},
      {"info " + model + " --batch 100000", "--batch must be between 1 and 256"},
      {"info " + model + " --ctx -1", "--ctx must be >= 0"},
      {"perplexity " + model + " --ids-file /dev/null --max-windows -1", "--max-windows must be >= 0"},
  };
  for (const BadNumber& c : cases) {
    SCOPED_TRACE(c.args);
    const RunResult r = run_hybridgen(c.args);
    EXPECT_EQ(r.exit_code, 1);  // a bad value is the project's one line and status 1, CLI11's parse errors too
    expect_one_error_line(r, c.words);
  }
  // A context past the trained one is a warning (as llama.cpp does); one whose KV cannot fit is
  // the memory plan's error, said before anything is allocated.
  const RunResult huge = run_hybridgen(gen + "--ctx 99999999");
  EXPECT_NE(huge.exit_code, 0);
  EXPECT_NE(huge.exit_code, 134);
  EXPECT_NE(huge.err.find("quality will degrade"), std::string::npos) << huge.err;
  EXPECT_NE(huge.err.find("error: memory plan does not fit"), std::string::npos) << huge.err;
}

TEST(CliErrors, SchedulerKnobs) {
  const std::string m = "-m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' -n 2 --policy hybrid --ctx 64 --window 16";
  expect_one_error_line(run_hybridgen("generate " + m + " --k-min 300 --k-max 200"), "--k-min 300 is larger than --k-max 200");
  expect_one_error_line(run_hybridgen("generate " + m + " --k-min -1"), "--k-min must be >= 0 (or auto), got -1");
  expect_one_error_line(run_hybridgen("generate " + m + " --k-min lots"), "--k-min: 'lots' is not auto or an integer >= 0");
  expect_one_error_line(run_hybridgen("generate " + m + " --sched psychic"),
                        "--sched: 'psychic' is not fixed|adaptive|adaptive-k|adaptive-select");
  expect_one_error_line(run_hybridgen("generate " + m + " --sched adaptive-select --k -1"),
                        "--sched adaptive-select needs a fixed --k >= 1");
  expect_one_error_line(run_hybridgen("generate " + m + " --sched-alpha 0"), "--sched-alpha must be in");
}

TEST(CliErrors, PolicyYamlWithLineNumber) {
  const fs::path dir = temp_dir("yaml");
  {
    std::ofstream f(dir / "p.yaml");
    f << "policy:\n  preset: hybrid\n  window: 16\n  warp: 9\n";
  }
  const std::string m = "-m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' -n 2 --ctx 64";
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --policy-file '" + (dir / "p.yaml").string() + "'"),
                        "p.yaml:4: unknown policy knob 'warp'");
  {
    std::ofstream f(dir / "q.yaml");
    f << "policy:\n  preset: offload\n  k: 16\n";
  }
  expect_one_error_line(run_hybridgen("generate " + m + " --policy-file '" + (dir / "q.yaml").string() + "'"),
                        "q.yaml:3: --k does not apply to --policy offload");
}

// Found by fuzz_policy_yaml: a policy file that is not a mapping aborted (exit 134) with an
// uncaught YAML::BadSubscript; so did a key that is not a scalar.
TEST(CliErrors, PolicyYamlThatIsNotAMapping) {
  const fs::path dir = temp_dir("yaml-scalar");
  { std::ofstream(dir / "scalar.yaml") << "polpi"; }
  { std::ofstream(dir / "key.yaml") << "policy:\n  [window]: 16\n"; }
  const std::string m = "-m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' -n 2 --ctx 64";
  expect_one_error_line(run_hybridgen("generate " + m + " --policy-file '" + (dir / "scalar.yaml").string() + "'"),
                        "scalar.yaml: expected a mapping of policy knobs");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy-file '" + (dir / "key.yaml").string() + "'"),
                        "key.yaml:2: expected a knob name as the key");
}

}  // namespace
}  // namespace hg::test
