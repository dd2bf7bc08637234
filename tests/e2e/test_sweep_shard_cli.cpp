// hybridgen sweep on a cluster, without one: --shard I/N runs and resumes a shard, --merge joins
// the shards into the file one process writes, bad shard arguments and merges are one error line
// each, and --slurm --dry-run writes the job array and merge scripts without submitting.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sweep_test_util.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

std::string shard_path(const fs::path& dir, size_t i, size_t n) {
  return (dir / ("shard-" + std::to_string(i) + "-of-" + std::to_string(n) + ".jsonl")).string();
}

TEST(SweepShardCli, ShardsMergedEqualTheSweepRunInOneProcess) {
  const fs::path dir = temp_dir("shardcli");
  const fs::path sweep = write_ppl_sweep(dir, "six", 48, "[16, 32]", "[4, 8, -1]");
  const fs::path whole = dir / "whole.jsonl";
  RunResult r = run_hybridgen("sweep " + quoted(sweep) + " -o " + quoted(whole));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(point_values(whole).size(), 6u);

  std::vector<std::string> shards;
  size_t listed = 0;
  for (size_t i = 0; i < 3; ++i) {
    shards.push_back(shard_path(dir / "shards", i, 3));
    RunResult dry =
        run_hybridgen("sweep " + quoted(sweep) + " --shard " + std::to_string(i) + "/3 --dry-run -o " + shards.back());
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.out.find("six shard " + std::to_string(i) + "/3"), std::string::npos) << dry.out;
    listed += std::count(dry.out.begin(), dry.out.end(), '\n') / 2;
    r = run_hybridgen("sweep " + quoted(sweep) + " --shard " + std::to_string(i) + "/3 -o " + shards.back());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("sweep six shard " + std::to_string(i) + "/3:"), std::string::npos) << r.err;
  }
  EXPECT_EQ(listed, 6u);  // every point in one shard's dry run
  // A shard run again with --resume runs nothing.
  r = run_hybridgen("sweep " + quoted(sweep) + " --shard 1/3 --resume -o " + shards[1]);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("0 ok, 0 failed"), std::string::npos) << r.err;

  // Shards given in any order, one twice (a retried task's copy): the one-process file.
  const fs::path merged = dir / "merged.jsonl";
  r = run_hybridgen("sweep " + quoted(sweep) + " --merge " + quoted(merged) + " " + shards[2] + " " + shards[0] + " " +
                    shards[1] + " " + shards[0]);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("6 ok, 0 failed, 0 missing"), std::string::npos) << r.err;
  EXPECT_EQ(point_values(merged), point_values(whole));

  // A lost point: reported, the rest written, non-zero exit. The points' keys hash the tiny
  // model's temporary path, so which shard holds points changes from run to run: take the fullest.
  size_t full = 0;
  for (size_t i = 1; i < shards.size(); ++i)
    if (read_lines(shards[i]).size() > read_lines(shards[full]).size()) full = i;
  auto lines = read_lines(shards[full]);
  ASSERT_GE(lines.size(), 2u);  // the shard line and at least one point (6 points, 3 shards)
  lines.pop_back();
  {
    std::ofstream out(shards[full], std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }
  r = run_hybridgen("sweep " + quoted(sweep) + " --merge " + quoted(merged) + " " + shards[0] + " " + shards[1] + " " +
                    shards[2]);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("error: 1 of 6 points missing from the shards: point "), std::string::npos) << r.err;
  EXPECT_EQ(point_values(merged).size(), 5u);
  // --resume runs just that point again; the merge is whole once more.
  r = run_hybridgen("sweep " + quoted(sweep) + " --shard " + std::to_string(full) + "/3 --resume -o " + shards[full]);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 ok, 0 failed"), std::string::npos) << r.err;
  // The merged file is what --plot draws (ppl over k: accuracy_vs_k.png), where matplotlib is.
  const bool matplotlib =
      run("python3 -c 'import matplotlib' || /usr/bin/python3 -c 'import matplotlib'").exit_code == 0;
  r = run_hybridgen("sweep " + quoted(sweep) + " --merge " + quoted(merged) + " " + shards[0] + " " + shards[1] + " " +
                    shards[2] + (matplotlib ? " --plot " + quoted(dir / "plots") : ""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(point_values(merged), point_values(whole));
  if (matplotlib) {
    EXPECT_TRUE(fs::exists(dir / "plots/accuracy_vs_k.png")) << r.out << r.err;
  }
}

TEST(SweepShardCli, MinusTGivesThreadsToThePointsThatSetNone) {
  const fs::path dir = temp_dir("shardthreads");
  const fs::path fixed = write_ppl_sweep(dir, "fixed", 24, "[16]", "[4, 8]");  // threads: 1
  std::string text = read_file(fixed);
  text.erase(text.find("  threads: 1\n"), 13);
  const fs::path free = dir / "free.yaml";
  std::ofstream(free) << text;
  RunResult r = run_hybridgen("sweep " + quoted(free) + " --shard 0/1 --dry-run -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--k=4 --threads=2\n"), std::string::npos) << r.out;
  r = run_hybridgen("sweep " + quoted(fixed) + " --dry-run -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("--threads=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--threads=1"), std::string::npos) << r.out;
}

TEST(SweepShardCli, MoreShardsThanPointsGivesEmptyShardsThatMerge) {
  const fs::path dir = temp_dir("shardempty");
  const fs::path sweep = write_ppl_sweep(dir, "two", 24, "[16]", "[4, 8]");
  std::string all;
  size_t empty = 0;
  for (size_t i = 0; i < 5; ++i) {
    const std::string out = shard_path(dir, i, 5);
    RunResult r = run_hybridgen("sweep " + quoted(sweep) + " --shard " + std::to_string(i) + "/5 -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    empty += read_lines(out).size() == 1;  // the shard line alone
    all += " " + out;
  }
  EXPECT_GE(empty, 3u);
  RunResult r = run_hybridgen("sweep " + quoted(sweep) + " --merge " + quoted(dir / "m.jsonl") + all);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(point_values(dir / "m.jsonl").size(), 2u);
}

TEST(SweepShardCli, BadShardArgumentsAndMergesAreOneErrorLineEach) {
  const fs::path dir = temp_dir("shardbad");
  const fs::path sweep = write_ppl_sweep(dir, "bad", 24, "[16]", "[4, 8, 16]");
  const std::string s = "sweep " + quoted(sweep) + " ";
  expect_one_error_line(run_hybridgen(s + "--shard 4/4"), {"--shard 4/4", "I must be below N"});
  expect_one_error_line(run_hybridgen(s + "--shard 0/0"), {"--shard 0/0", "N must be at least 1"});
  expect_one_error_line(run_hybridgen(s + "--shard two"), {"--shard two", "expected I/N"});
  expect_one_error_line(run_hybridgen(s + "--shard 0/2 --slurm"), {"--shard does not go with --slurm"});
  expect_one_error_line(run_hybridgen(s + "--shards 4"), {"--shards goes with --slurm only"});
  expect_one_error_line(run_hybridgen(s + "--partition cpu"), {"--partition goes with --slurm only"});
  expect_one_error_line(run_hybridgen(s + "--slurm -t 4"), {"-t does not go with --slurm", "--cpus-per-task"});
  expect_one_error_line(run_hybridgen(s + "x.jsonl"), {"unexpected argument 'x.jsonl'", "--merge OUT"});
  expect_one_error_line(run_hybridgen(s + "--merge m.jsonl --resume a.jsonl"), {"--resume does not go with --merge"});
  expect_one_error_line(run_hybridgen(s + "--merge " + quoted(dir / "m.jsonl")), {"no shard results files"});

  // Two shards of a partition into two, and one of a partition into three.
  std::vector<std::string> two, three;
  for (size_t i = 0; i < 3; ++i) {
    if (i < 2) {
      two.push_back(shard_path(dir, i, 2));
      ASSERT_EQ(run_hybridgen(s + "--shard " + std::to_string(i) + "/2 -o " + two.back()).exit_code, 0);
    }
    three.push_back(shard_path(dir, i, 3));
    ASSERT_EQ(run_hybridgen(s + "--shard " + std::to_string(i) + "/3 -o " + three.back()).exit_code, 0);
  }
  const std::string merge = s + "--merge " + quoted(dir / "m.jsonl") + " ";
  expect_one_error_line(run_hybridgen(merge + two[0]), {"1 of 2 shards missing (1/2)"});
  expect_one_error_line(run_hybridgen(merge + two[0] + " " + three[1]),
                        {three[1], "shard 1/3", "partition into 3 shards", two[0]});
  expect_one_error_line(run_hybridgen(merge + two[0] + " " + quoted(dir / "none.jsonl")),
                        {"none.jsonl", "cannot read"});
  // A shard of an edited file (its points changed), and one resumed as another shard.
  const fs::path edited = write_ppl_sweep(dir, "bad", 24, "[16]", "[4, 8, 32]");
  expect_one_error_line(
      run_hybridgen("sweep " + quoted(edited) + " --merge " + quoted(dir / "m.jsonl") + " " + two[0] + " " + two[1]),
      {two[0], "another version of", "--shard 0/2 --resume"});
  expect_one_error_line(run_hybridgen(s + "--shard 1/2 --resume -o " + two[0]),
                        {two[0], "shard 0/2 of sweep 'bad'", "not of shard 1/2"});
  EXPECT_FALSE(fs::exists(dir / "m.jsonl"));
}

TEST(SweepShardCli, SlurmDryRunWritesTheArrayAndMergeScripts) {
  const fs::path dir = temp_dir("slurmdry");
  const fs::path sweep = write_ppl_sweep(dir, "k", 24, "[16, 32]", "[4, 8, 16]");
  const fs::path out = dir / "res/k.jsonl";
  RunResult r = run_hybridgen("sweep " + quoted(sweep) + " -o " + quoted(out) +
                              " --slurm --dry-run --shards 4 --array-parallel 2 --cpus-per-task 2 --partition debug "
                              "--time 0:10:00");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path jobs = dir / "res/k.shards";
  const std::string array = read_file(jobs / "array.sbatch"), merge = read_file(jobs / "merge.sbatch");
  EXPECT_NE(r.out.find(array), std::string::npos) << r.out;  // shown verbatim
  EXPECT_NE(r.out.find(merge), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_directory(jobs / "logs"));
  for (const std::string& want : std::vector<std::string>{
           "#SBATCH --array=0-3%2", "#SBATCH --cpus-per-task=2", "#SBATCH --partition=debug", "#SBATCH --time=0:10:00",
           "#SBATCH --requeue", fs::canonical(bin_dir() / "hybridgen").string(),
           "--shard \"$SLURM_ARRAY_TASK_ID/4\" --resume", "#SBATCH --chdir=" + fs::current_path().string() + "\n"})
    EXPECT_NE(array.find(want), std::string::npos) << want << " not in:\n" << array;
  EXPECT_NE(merge.find("--merge '" + out.string() + "' \"$dir\"/shard-*-of-4.jsonl"), std::string::npos) << merge;
  EXPECT_NE(r.out.find("sbatch --dependency=afterany:$jobid"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  // Without --shards: one shard per point.
  r = run_hybridgen("sweep " + quoted(sweep) + " -o " + quoted(out) + " --slurm --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_file(jobs / "array.sbatch").find("#SBATCH --array=0-5\n"), std::string::npos);
}

}  // namespace
}  // namespace hg::test
