// Bad input reaches the user as one clear line on stderr and a non-zero exit, never a crash:
// broken model files (tools/make_bad_models.py), bad options, policies that contradict themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

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

void expect_one_error_line(const RunResult& r, const std::string& words) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << "expected '" << words << "' in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

struct BadFile {
  std::string name;
  std::string words;
};

class BadModel : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadModel, OneClearErrorLine) {
  const BadFile& c = GetParam();
  const fs::path p = bad_root() / c.name;
  if (!fs::exists(p)) GTEST_SKIP() << c.name << " needs the SmolLM2 GGUF (run tools/fetch_model.sh)";
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
                      BadFile{"gguf_truncated.gguf", "gguf_truncated.gguf"},
                      BadFile{"gguf_unknown_tensor_type.gguf", "unknown ggml type 99"}),
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

TEST(CliErrors, PoliciesThatContradictThemselves) {
  const std::string m = "-m '" + (bad_root() / "good").string() + "' --ids '[1,2,3,4]' -n 2";
  expect_one_error_line(run_hybridgen("generate " + m + " --policy warp-drive"), "is not a policy");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 100"), "larger than the context");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 16 --k -3"), "--k must be >= 0");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy streaming --ctx 64 --window 16 --select post --k 8"),
                        "drops evicted tokens");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy full --window 16"), "--policy full");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 16 --query psychic"),
                        "--query");
  expect_one_error_line(run_hybridgen("generate " + m + " --policy hybrid --ctx 64 --window 16 --k-node 7"),
                        "NUMA node 7 does not exist");
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
}

}  // namespace
}  // namespace hg::test
