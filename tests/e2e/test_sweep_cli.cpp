// hybridgen sweep end to end on a tiny random model: every point one valid line, kill -9 and
// --resume ending with exactly one line per point, failing points as error lines, bad sweep
// files as one error line each with nothing written; and tools/plot_sweep.py on committed results.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The lines of a file that end in a newline; `torn` gets what follows the last one (a line being
// written, or cut short: a write of more than a page can stop part-way when SIGKILL arrives).
std::vector<std::string> whole_lines_of(const fs::path& p, std::string* torn = nullptr) {
  std::ifstream in(p, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t nl; (nl = text.find('\n', begin)) != std::string::npos; begin = nl + 1)
    out.push_back(text.substr(begin, nl - begin));
  if (torn) *torn = text.substr(begin);
  return out;
}

fs::path write_sweep(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path p = dir / (name + ".yaml");
  std::ofstream(p) << text;
  return p;
}

// Six decode-benchmark points (window × K) on the tiny llama; `extra` adds fixed keys.
std::string six_points(const std::string& extra = "") {
  return "name: six\n"
         "task: bench\n"
         "fixed:\n"
         "  model: " +
         tiny_model("llama-gqa").string() +
         "\n"
         "  policy: hybrid\n"
         "  n-prompt: 0\n"
         "  depth: 64\n"
         "  threads: 1\n" +
         extra +
         "grid:\n"
         "  window: [16, 32]\n"
         "  k: [4, 8, -1]\n";
}

// Parses every line and checks the fields every result line has; returns the keys.
std::vector<std::string> check_lines(const std::vector<std::string>& lines, const std::string& status) {
  std::vector<std::string> keys;
  for (const auto& l : lines) {
    const auto j = nlohmann::json::parse(l);  // throws on a partial line
    EXPECT_EQ(j["status"], status) << l;
    EXPECT_EQ(j["sweep"], "six");
    EXPECT_EQ(j["task"], "bench");
    EXPECT_TRUE(j["params"].contains("window") && j["params"].contains("k")) << l;
    EXPECT_TRUE(j["machine"]["cpu"].is_string() && j["machine"]["cores"].get<int>() >= 1) << l;
    EXPECT_FALSE(j["hybridgen"]["commit"].get<std::string>().empty());
    EXPECT_EQ(j["time_utc"].get<std::string>().back(), 'Z');
    if (status == "ok") {
      EXPECT_GT(j["metrics"]["decode_tps"].get<double>(), 0.0) << l;
      EXPECT_EQ(j["machine"]["device"], j["metrics"]["device"]);
    }
    keys.push_back(j["key"]);
  }
  return keys;
}

TEST(SweepCli, SixPointsSixLines) {
  const fs::path dir = temp_dir("sweep6");
  const fs::path sweep = write_sweep(dir, "six", six_points("  n-gen: 4\n  repetitions: 1\n"));
  const fs::path out = dir / "out/six.jsonl";
  RunResult dry = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "' --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("6 points"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("window=32 k=-1"), std::string::npos) << dry.out;
  EXPECT_FALSE(fs::exists(out));

  RunResult r = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 6u);
  const auto keys = check_lines(lines, "ok");
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 6u);
  // Plain progress lines off a terminal, one summary line.
  EXPECT_NE(r.err.find("point 6/6"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("6 ok, 0 failed"), std::string::npos) << r.err;

  // A second run without --resume refuses to mix into the file; with it, nothing is rerun.
  RunResult again = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "'");
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;
  RunResult resumed = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "' --resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("6 already done"), std::string::npos) << resumed.err;
  EXPECT_EQ(lines_of(out), lines);
}

TEST(SweepCli, KilledAfterTheSecondPointAndResumedEndsWithOneLinePerPoint) {
  const fs::path dir = temp_dir("sweepkill");
  // Points of a few tenths of a second each, so the kill lands while a point runs.
  const fs::path sweep = write_sweep(dir, "six", six_points("  n-gen: 128\n  repetitions: 12\n"));
  const fs::path out = dir / "six.jsonl";
  RunResult bg = run("('" + (bin_dir() / "hybridgen").string() + "' sweep '" + sweep.string() + "' -o '" +
                     out.string() + "' >/dev/null 2>&1 & echo $!)");
  const pid_t pid = std::stoi(bg.out);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  size_t seen = 0;
  while ((seen = whole_lines_of(out).size()) < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_GE(seen, 2u);
  // Reap the killed process (it is our grandchild's sibling: wait until it is gone).
  while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Every line the sweep finished is whole; a line it was writing may be torn (each line is one
  // write(), but a write of more than a page can stop part-way at SIGKILL), and --resume must
  // drop it and run that point again.
  std::string torn;
  const auto killed_lines = whole_lines_of(out, &torn);
  ASSERT_LT(killed_lines.size(), 6u) << "the sweep finished before the kill: the test proves nothing";
  check_lines(killed_lines, "ok");

  RunResult r = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "' --resume");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = whole_lines_of(out, &torn);
  EXPECT_EQ(torn, "");
  ASSERT_EQ(lines.size(), 6u);
  const auto keys = check_lines(lines, "ok");
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 6u);
  // The lines written before the kill are kept as they were.
  for (size_t i = 0; i < killed_lines.size(); ++i) EXPECT_EQ(lines[i], killed_lines[i]);
}

TEST(SweepCli, AFailingPointBecomesAnErrorLineAndTheSweepGoesOn) {
  const fs::path dir = temp_dir("sweepfail");
  // depth 99999 passes every check that needs no model, then exceeds the tiny model's context
  // (a --ctx past it is only a warning: the depth is checked against the model at run time).
  const std::string text = "name: six\ntask: bench\nfixed:\n  model: " + tiny_model("llama-gqa").string() +
                           "\n  n-prompt: 0\n  n-gen: 2\n  repetitions: 1\n  threads: 1\n"
                           "grid:\n  depth: [0, 99999, 8]\n";
  const fs::path sweep = write_sweep(dir, "fail", text);
  const fs::path out = dir / "fail.jsonl";
  RunResult r = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("1 of 3 points failed"), std::string::npos) << r.err;
  auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["status"], "ok");
  const auto bad = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(bad["status"], "error");
  EXPECT_NE(bad["error"].get<std::string>().find("99999"), std::string::npos) << lines[1];
  EXPECT_EQ(nlohmann::json::parse(lines[2])["status"], "ok");

  // --fail-fast stops at the failing point; --resume reruns the failed point only.
  const fs::path out2 = dir / "fail2.jsonl";
  RunResult ff = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out2.string() + "' --fail-fast");
  EXPECT_NE(ff.exit_code, 0);
  EXPECT_EQ(lines_of(out2).size(), 2u);
  RunResult resumed = run_hybridgen("sweep '" + sweep.string() + "' -o '" + out2.string() + "' --resume");
  EXPECT_NE(resumed.exit_code, 0);
  lines = lines_of(out2);
  ASSERT_EQ(lines.size(), 3u);  // the old error line is replaced, not duplicated
  EXPECT_EQ(nlohmann::json::parse(lines[0])["status"], "ok");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["status"], "error");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["status"], "ok");
}

TEST(SweepCli, BadSweepFilesAreOneErrorLineAndWriteNothing) {
  const fs::path dir = temp_dir("sweepbad");
  const std::string model = "  model: " + tiny_model("llama-gqa").string() + "\n";
  struct Case {
    std::string name, text;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"malformed", "name: m\ntask: bench\ngrid:\n  k: [1, 2\n", {"malformed.yaml:", "malformed YAML"}},
      {"task", "name: t\ntask: benchmark\ngrid: {k: [1]}\n", {"task.yaml:2:", "'benchmark'", "ppl, fidelity, passkey"}},
      {"key",
       "name: k\ntask: bench\nfixed:\n" + model + "grid:\n  windw: [16]\n",
       {"key.yaml:6:", "unknown key 'windw'"}},
      {"empty", "name: e\ntask: bench\nfixed:\n" + model + "grid: {}\n", {"empty.yaml:5:", "grid"}},
      {"contradiction",
       "name: c\ntask: bench\nfixed:\n" + model + "grid:\n  policy: [hybrid, full]\n  window: [16]\n",
       {"contradiction.yaml:7:", "point 2/2 (policy=full window=16)", "--window"}},
      {"value",
       "name: v\ntask: bench\nfixed:\n" + model + "grid:\n  n-gen: [4, four]\n",
       {"value.yaml:6:", "point 2/2", "-n"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path sweep = write_sweep(dir, c.name, c.text);
    const fs::path out = dir / (c.name + ".jsonl");
    expect_one_error_line(run_hybridgen("sweep '" + sweep.string() + "' -o '" + out.string() + "'"), c.words);
    EXPECT_FALSE(fs::exists(out));
  }
  // An output path that cannot be written: one line, before any point runs.
  const fs::path sweep = write_sweep(dir, "six", six_points("  n-gen: 2\n"));
  expect_one_error_line(run_hybridgen("sweep '" + sweep.string() + "' -o /dev/null/six.jsonl"),
                        {"/dev/null/six.jsonl", "cannot open"});
}

bool is_png(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char sig[8] = {};
  in.read(sig, 8);
  return in && std::string(sig, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

// The Python with matplotlib: the interpreter CMake found, or Debian's (python3-matplotlib).
std::string plot_python() {
  for (const std::string& py : {python(), std::string("/usr/bin/python3")})
    if (run("'" + py + "' -c 'import matplotlib'").exit_code == 0) return py;
  return "";
}

TEST(PlotSweep, CommittedResultsGiveValidPngs) {
  const std::string py = plot_python();
  if (py.empty()) GTEST_SKIP() << "no python3 with matplotlib (scripts/setup.sh installs python3-matplotlib)";
  const fs::path data = source_dir() / "tests/data/sweeps";
  const fs::path dir = temp_dir("plots");
  RunResult r = run("'" + py + "' '" + (source_dir() / "tools/plot_sweep.py").string() + "' '" +
                    (data / "bench_depth.jsonl").string() + "' -o '" + (dir / "bench").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct Expect {
    std::string file, png;
  };
  const std::vector<Expect> expected = {
      {"bench_depth.jsonl", "decode_vs_depth.png"}, {"fidelity_k.jsonl", "accuracy_vs_k.png"},
      {"passkey.jsonl", "passkey_heatmap.png"},     {"passkey.jsonl", "accuracy_per_policy.png"},
      {"sched_trace.jsonl", "sched_trace.png"},     {"ruler.jsonl", "ruler_vs_length.png"}};
  for (const auto& e : expected) {
    SCOPED_TRACE(e.file);
    const fs::path out = dir / e.file;
    r = run("'" + py + "' '" + (source_dir() / "tools/plot_sweep.py").string() + "' '" + (data / e.file).string() +
            "' -o '" + out.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path png = out / e.png;
    ASSERT_TRUE(fs::exists(png)) << r.out;
    EXPECT_TRUE(is_png(png));
    // A figure with axes, labels and lines is tens of KB; an empty canvas is a few.
    EXPECT_GT(fs::file_size(png), 15000u);
    EXPECT_LT(fs::file_size(png), 2000000u);
    EXPECT_NE(r.out.find(e.png), std::string::npos) << r.out;
  }
  // A length's ruler rows split by task pool into the table of one row of all its tasks: the
  // per-task cells side by side, the mean over every sample (Wilson's or the normal interval)
  const auto table = [&](const std::string& file) {
    const fs::path out = dir / ("table-" + file);
    const RunResult t = run("'" + py + "' '" + (source_dir() / "tools/plot_sweep.py").string() + "' '" +
                            (data / file).string() + "' -o '" + out.string() + "'");
    EXPECT_EQ(t.exit_code, 0) << t.err;
    return read_file(out / "ruler_table.md");
  };
  const std::string pooled = table("ruler_by_task.jsonl");
  EXPECT_EQ(pooled, table("ruler_all_tasks.jsonl"));
  EXPECT_NE(pooled.find("| niah_single_1 | niah_multivalue | mean |"), std::string::npos) << pooled;
  EXPECT_NE(pooled.find("**93.8 (82–100)** | 94% |"), std::string::npos)
      << pooled;  // hybrid: mean ± 1.96 SE, of full's
  EXPECT_NE(pooled.find("| mean | of full |"), std::string::npos) << pooled;
  {  // a longer length with one of the two tasks done so far: its heading says its mean pools fewer
    const std::vector<std::string> rows = lines_of(data / "ruler_by_task.jsonl");
    nlohmann::json longer = nlohmann::json::parse(rows.at(0));
    longer["metrics"]["length"] = 2048;
    // and a policy its list has beyond the shorter length's: a row of the table, a line of the figure
    nlohmann::json extra = longer["metrics"]["policies"][0];
    extra["policy"] = "infinigen:alpha=1e9";
    longer["metrics"]["policies"].push_back(extra);
    for (auto& a : longer["metrics"]["answers"]) a["scores"]["infinigen:alpha=1e9"] = a["scores"]["full"];
    std::ofstream(dir / "ruler_partial.jsonl") << rows.at(0) << "\n" << rows.at(1) << "\n" << longer.dump() << "\n";
    const fs::path out = dir / "table-partial";
    const RunResult t = run("'" + py + "' '" + (source_dir() / "tools/plot_sweep.py").string() + "' '" +
                            (dir / "ruler_partial.jsonl").string() + "' -o '" + out.string() + "'");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    const std::string partial = read_file(out / "ruler_table.md");
    EXPECT_NE(partial.find("samples per task, 1 of 2 tasks so far)"), std::string::npos) << partial;
    EXPECT_EQ(partial.find("2 of 2"), std::string::npos) << partial;
    EXPECT_NE(partial.find("| infinigen:alpha=1e9 |"), std::string::npos) << partial;
    const RunResult names =
        run("cd '" + (source_dir() / "tools").string() + "' && '" + py +
            "' -c 'import json, sys, plot_sweep; rows = [json.loads(l) for l in open(sys.argv[1])]; "
            "print(plot_sweep.ruler_line_names(plot_sweep.pool_ruler_rows(rows)))' '" +
            (dir / "ruler_partial.jsonl").string() + "'");
    ASSERT_EQ(names.exit_code, 0) << names.err;
    EXPECT_NE(names.out.find("'infinigen:alpha=1e9']"), std::string::npos) << names.out;
  }
  // Rows with nothing to plot: one clear message, non-zero exit.
  std::ofstream(dir / "empty.jsonl") << "{\"status\": \"error\", \"error\": \"x\"}\n";
  r = run("'" + py + "' '" + (source_dir() / "tools/plot_sweep.py").string() + "' '" + (dir / "empty.jsonl").string() +
          "' -o '" + (dir / "none").string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no finished rows"), std::string::npos) << r.err;
}

// tools/ruler_merge.py: a later run of the same samples adds its policies to stored rows, which take
// the sweep's new policy list and key; a run whose shared policy replied otherwise is refused.
TEST(RulerMerge, AddsPoliciesFromARunOfTheSameSamples) {
  using nlohmann::json;
  const fs::path dir = temp_dir("ruler-merge");
  const fs::path rows = source_dir() / "tests/data/sweeps/ruler_by_task.jsonl";
  const std::vector<std::string> stored = lines_of(rows);
  ASSERT_EQ(stored.size(), 2u);
  const json row = json::parse(stored[0]);  // niah_single_1: full, hybrid K 64, h2o
  const std::string old_name = "hybrid:window=128:k=64:sched=fixed", spec_name = old_name + ":query=speculative",
                    new_name = "hybrid:window=128:k=32:sched=fixed";
  // The run: full again and hybrid at K 32, answering differently in sample 1.
  json fresh = row["metrics"];
  json added = fresh["policies"][1];
  added["policy"] = new_name;
  fresh["policies"] = json::array({fresh["policies"][0], added});
  for (json& a : fresh["answers"]) {
    a["replies"] = {{"full", a["replies"]["full"]}, {new_name, "k32 reply"}};
    a["scores"] = {{"full", a["scores"]["full"]}, {new_name, 0.5}};
  }
  std::ofstream(dir / "run.json") << fresh.dump();
  std::ofstream(dir / "points.txt") << "sweep x: task ruler, 2 points -> out.jsonl\n"
                                    << "   1  0123456789abcdef  length=1024 tasks=niah_single_1 samples=2 policy=full,"
                                    << new_name << ",h2o:window=128:heavy=64," << spec_name << "\n"
                                    << "      hybridgen eval --task ruler ...\n";
  const std::string tool = "'" + python() + "' '" + (source_dir() / "tools/ruler_merge.py").string() + "' '" +
                           rows.string() + "' --points '" + (dir / "points.txt").string() + "' --rename '" + old_name +
                           "->" + spec_name + "' --note 'a test' -o ";
  RunResult r = run(tool + "'" + (dir / "merged.jsonl").string() + "' --run '" + (dir / "run.json").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> merged = lines_of(dir / "merged.jsonl");
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(json::parse(merged[1]), json::parse(stored[1]));  // no run of niah_multivalue: as stored
  const json m = json::parse(merged[0]);
  EXPECT_EQ(m["key"], "0123456789abcdef");
  EXPECT_EQ(m["params"]["policy"], "full," + new_name + ",h2o:window=128:heavy=64," + spec_name);
  std::vector<std::string> names;
  for (const json& p : m["metrics"]["policies"]) names.push_back(p["policy"]);
  EXPECT_EQ(names, (std::vector<std::string>{"full", new_name, "h2o:window=128:heavy=64", spec_name}));
  EXPECT_EQ(m["metrics"]["policies"][3]["mean"], row["metrics"]["policies"][1]["mean"]);  // the stored entry, renamed
  for (size_t i = 0; i < m["metrics"]["answers"].size(); ++i) {
    const json& a = m["metrics"]["answers"][i];
    const json& was = row["metrics"]["answers"][i];
    EXPECT_EQ(a["replies"][new_name], "k32 reply");
    EXPECT_EQ(a["scores"][new_name], 0.5);
    EXPECT_EQ(a["replies"][spec_name], was["replies"][old_name]);
    EXPECT_EQ(a["replies"]["h2o:window=128:heavy=64"], was["replies"]["h2o:window=128:heavy=64"]);
    EXPECT_FALSE(a["replies"].contains(old_name));
  }
  EXPECT_EQ(m["merged"]["from_run"], json({"full", new_name}));
  EXPECT_EQ(m["merged"]["renamed"][old_name], spec_name);
  EXPECT_EQ(m["merged"]["checked"], "full replied the same in all 2 samples");
  EXPECT_EQ(m["merged"]["note"], "a test");
  EXPECT_FALSE(m["merged"].contains("earlier"));
  // merged again (the same run, once more): the first merge's record stays under "earlier"
  std::ofstream(dir / "merged_once.jsonl") << merged[0] << "\n";
  r = run("'" + python() + "' '" + (source_dir() / "tools/ruler_merge.py").string() + "' '" +
          (dir / "merged_once.jsonl").string() + "' --points '" + (dir / "points.txt").string() +
          "' --note again -o '" + (dir / "twice.jsonl").string() + "' --run '" + (dir / "run.json").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json twice = json::parse(lines_of(dir / "twice.jsonl").at(0));
  EXPECT_EQ(twice["merged"]["note"], "again");
  EXPECT_EQ(twice["merged"]["earlier"], m["merged"]);
  EXPECT_EQ(twice["metrics"], m["metrics"]);
  // full replied otherwise in the run: another sample set or prefill, refused with nothing written
  fresh["answers"][0]["replies"]["full"] = " 1234567.";
  std::ofstream(dir / "other.json") << fresh.dump();
  r = run(tool + "'" + (dir / "refused.jsonl").string() + "' --run '" + (dir / "other.json").string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no policy of the run replied as the stored row did"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "refused.jsonl"));
}

}  // namespace
}  // namespace hg::test
