// Sweeps on a cluster: the partition of points into shards (determinism, balance, how few points
// move when points or shards are added), shard results files (their shard line, resume checks),
// the merge (equal to a one-process run, duplicates, missing points, shards that do not belong)
// and the Slurm batch scripts and their submission (with a stand-in sbatch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <fstream>
#include <map>
#include <set>

#include "sweep/merge.h"
#include "sweep/points.h"
#include "sweep/results.h"
#include "sweep/runner.h"
#include "sweep/shard.h"
#include "sweep/slurm.h"
#include "sweep/sweep_file.h"
#include "sweep_test_util.h"
#include "test_expect.h"
#include "test_util.h"
#include "util/hash.h"

namespace hg::sweep {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::keep;

// A sweep of a x b points (k: 0..a-1, window: 0..b-1), named `name`.
const SweepFile& grid(int a, int b, const std::string& name = "g") {
  auto list = [](int n) {
    std::string s = "[";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(i);
    return s + "]";
  };
  return keep(parse_sweep("name: " + name + "\ntask: bench\ngrid:\n  k: " + list(a) + "\n  window: " + list(b) + "\n",
                          name + ".yaml", {"bench"}));
}

std::map<std::string, size_t> assignment(const std::vector<Point>& points, size_t n) {
  std::map<std::string, size_t> a;
  for (const auto& p : points) a[p.key] = shard_of(p.key, n);
  return a;
}

// Every key on disk (points, shards, fingerprints, prefill cache and checkpoint files) is written
// by hex16: FNV-1a's published test vectors, and 16 zero-padded lowercase digits whatever the value.
TEST(SweepKeys, Fnv1aMatchesItsTestVectorsAndHex16PadsToSixteenDigits) {
  EXPECT_EQ(Fnv1a().hex(), "cbf29ce484222325");
  Fnv1a a;
  a.add_chars("a");
  EXPECT_EQ(a.hex(), "af63dc4c8601ec8c");
  Fnv1a foobar;
  foobar.add_chars("foo");
  foobar.add_chars("bar");
  EXPECT_EQ(foobar.hex(), "85944171f73967e8");
  EXPECT_EQ(hex16(0), "0000000000000000");
  EXPECT_EQ(hex16(0xabcull), "0000000000000abc");
  EXPECT_EQ(hex16(~0ull), "ffffffffffffffff");
}

// A shard line's count sizes the merge's tables: more than --shard accepts is not a shard line
// (the fuzz target's short run found a count of 2^40 throwing std::bad_alloc out of the merge).
TEST(SweepShard, AShardLineCountsAtMostTheShardsOfShard) {
  const auto line = [](size_t count) {
    return nlohmann::json{{"status", "shard"}, {"shard", {{"index", size_t{0}}, {"count", count}}}};
  };
  Shard s;
  EXPECT_TRUE(read_shard_line(line(kMaxShards), s));
  EXPECT_FALSE(read_shard_line(line(kMaxShards + 1), s));
  EXPECT_FALSE(read_shard_line(line(size_t{1} << 40), s));
}

TEST(SweepShard, ParsesIOverNAndRefusesEachBadOneWithOneLine) {
  EXPECT_EQ(parse_shard("0/4"), (Shard{0, 4}));
  EXPECT_EQ(parse_shard("3/4").name(), "3/4");
  EXPECT_EQ(parse_shard("0/1"), (Shard{0, 1}));
  expect_error([] { parse_shard("4/4"); }, {"--shard 4/4", "I must be below N", "0..3"});
  expect_error([] { parse_shard("7/4"); }, {"--shard 7/4", "I must be below N"});
  expect_error([] { parse_shard("0/0"); }, {"--shard 0/0", "N must be at least 1"});
  expect_error([] { parse_shard("0/10001"); }, {"--shard 0/10001", "at most 10000"});
  for (const char* bad : {"1", "a/4", "1/b", "-1/4", "1/4/2", "", "/4", "1/"})
    expect_error([&] { parse_shard(bad); }, {"expected I/N"});
}

TEST(SweepShard, EveryPointInExactlyOneShardTheSameOnEveryRun) {
  const auto points = expand_points(grid(40, 25));  // 1000 points
  for (size_t n : {1u, 2u, 4u, 7u}) {
    SCOPED_TRACE(n);
    size_t total = 0;
    std::set<std::string> seen;
    for (size_t i = 0; i < n; ++i) {
      const auto mine = shard_points(points, {i, n});
      total += mine.size();
      for (const auto& p : mine) EXPECT_TRUE(seen.insert(p.key).second);
      // Balanced within a few standard deviations of the binomial.
      EXPECT_NEAR(static_cast<double>(mine.size()), 1000.0 / n, 4.0 * std::sqrt(1000.0 / n) + 1) << i;
      for (size_t j = 1; j < mine.size(); ++j) EXPECT_LT(mine[j - 1].index, mine[j].index);  // run order
    }
    EXPECT_EQ(total, points.size());
  }
  // A point's shard is its key's alone: pinned, so that a changed hash cannot silently reshuffle
  // the shards of a sweep that is half done.
  EXPECT_EQ(shard_of("0123456789abcdef", 1), 0u);
  // Against the rule from its definition, for many keys and counts: rendezvous hashing, the shard j
  // of largest splitmix64(key ^ splitmix64(j)), the first on a tie; splitmix64 as Vigna's
  // reference (prng.di.unimi.it/splitmix64.c) writes it, independent of util/hash.h.
  const auto vigna = [](uint64_t x) {
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::mt19937_64 keys(17);
  for (int i = 0; i < 500; ++i) {
    const uint64_t k = keys();
    const size_t count = 1 + static_cast<size_t>(i % 37);
    size_t want = 0;
    for (size_t j = 1; j < count; ++j)
      if (vigna(k ^ vigna(j)) > vigna(k ^ vigna(want))) want = j;
    char key[17];
    std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(k));
    ASSERT_EQ(shard_of(key, count), want) << key << " of " << count;
  }
  std::vector<size_t> pinned;
  for (const char* key : {"0000000000000000", "0123456789abcdef", "ffffffffffffffff", "5a5a5a5a5a5a5a5a"})
    pinned.push_back(shard_of(key, 10));
  EXPECT_EQ(pinned, (std::vector<size_t>{5, 9, 2, 3})) << "rendezvous hash changed";
  expect_error([] { shard_of("xyz", 4); }, {"point key 'xyz'", "16 hex digits"});
}

TEST(SweepShard, AddingPointsMovesNoneAndAddingAShardMovesItsShareOnly) {
  // The file grows from 20x25 to 40x25 points: every old point stays in its shard.
  const auto before = expand_points(grid(20, 25));
  const auto after = expand_points(grid(40, 25));
  const auto a = assignment(before, 8), b = assignment(after, 8);
  size_t moved = 0;
  for (const auto& [key, shard] : a) moved += b.at(key) != shard;
  EXPECT_EQ(moved, 0u);
  // 8 -> 9 shards: only the points the new shard wins move (1/9 expected), where key mod N would
  // move 8/9 of them.
  const auto c = assignment(after, 9);
  moved = 0;
  for (const auto& [key, shard] : b) {
    moved += c.at(key) != shard;
    if (c.at(key) != shard) {
      EXPECT_EQ(c.at(key), 8u);
    }
  }
  const double fraction = static_cast<double>(moved) / static_cast<double>(b.size());
  EXPECT_GT(fraction, 0.07);
  EXPECT_LT(fraction, 0.16);
}

TEST(SweepShard, MoreShardsThanPointsLeavesSomeEmpty) {
  const auto points = expand_points(grid(3, 1));
  size_t total = 0, empty = 0;
  for (size_t i = 0; i < 10; ++i) {
    const size_t n = shard_points(points, {i, 10}).size();
    total += n;
    empty += n == 0;
  }
  EXPECT_EQ(total, 3u);
  EXPECT_GE(empty, 7u);
}

TEST(SweepShard, AShardsResultsFileStartsWithItsShardLineAndResumesOnlyAsThatShard) {
  const fs::path dir = test::temp_dir("shardfile");
  const SweepFile& f = grid(4, 4);
  const auto points = expand_points(f);
  const std::string path = (dir / "s1.jsonl").string();
  {
    ResultsFile r(path, false, shard_line(f, points, {1, 4}));
    r.append({{"key", points[0].key}, {"status", "ok"}});
  }
  auto lines = test::read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  const auto head = nlohmann::json::parse(lines[0]);
  Shard s;
  ASSERT_TRUE(read_shard_line(head, s));
  EXPECT_EQ(s, (Shard{1, 4}));
  EXPECT_EQ(head["sweep"], "g");
  EXPECT_EQ(head["sweep_points"], 16);
  EXPECT_EQ(head["points"], shard_points(points, {1, 4}).size());
  {
    ResultsFile r(path, true, shard_line(f, points, {1, 4}));  // the shard line is not a point
    EXPECT_EQ(r.done(), (std::set<std::string>{points[0].key}));
    EXPECT_EQ(r.dropped(), 0u);
  }
  EXPECT_EQ(test::read_lines(path), lines);
  expect_error(
      [&] {
        ResultsFile r(path, true, shard_line(f, points, {2, 4}));
      },
      {path, "shard 1/4 of sweep 'g'", "not of shard 2/4"});
  expect_error([&] { ResultsFile r(path, true); }, {path, "resume it with --shard 1/4"});
  // The file grew: resuming rewrites the shard line, keeps the finished point.
  const SweepFile& g = grid(5, 4);
  const auto more = expand_points(g);
  {
    ResultsFile r(path, true, shard_line(g, more, {1, 4}));
    EXPECT_EQ(r.done().size(), 1u);
  }
  lines = test::read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["sweep_points"], 20);
  // An unsharded sweep's results are not a shard's.
  const std::string plain = (dir / "plain.jsonl").string();
  { ResultsFile(plain, false).append({{"key", points[0].key}, {"status", "ok"}}); }
  expect_error(
      [&] {
        ResultsFile r(plain, true, shard_line(f, points, {0, 4}));
      },
      {plain, "unsharded sweep", "its own -o"});
}

// Runs the shards of `f` with a stand-in task whose metrics are the point's index, as
// `sweep --shard I/N` would; returns the shards' files.
std::vector<std::string> run_shards(const SweepFile& f, size_t n, const fs::path& dir) {
  const auto points = expand_points(f);
  std::vector<std::string> files;
  for (size_t i = 0; i < n; ++i) {
    files.push_back((dir / shard_file_name(i, n)).string());
    ResultsFile out(files.back(), false, shard_line(f, points, {i, n}));
    run_points(f, shard_points(points, {i, n}), out, [](const Point& p) { return nlohmann::json{{"v", p.index}}; }, {});
  }
  return files;
}

// (key, metrics) of every line of a results file, in order.
std::vector<std::pair<std::string, nlohmann::json>> key_values(const fs::path& p) {
  std::vector<std::pair<std::string, nlohmann::json>> kv;
  for (const auto& l : test::read_lines(p)) {
    const auto j = nlohmann::json::parse(l);
    kv.emplace_back(j["key"], j.value("metrics", nlohmann::json()));
  }
  return kv;
}

TEST(SweepMerge, TheMergedShardsEqualTheSweepRunInOneProcess) {
  const fs::path dir = test::temp_dir("merge");
  const SweepFile& f = grid(5, 3);
  const auto points = expand_points(f);
  const std::string whole = (dir / "whole.jsonl").string();
  {
    ResultsFile out(whole, false);
    run_points(f, points, out, [](const Point& p) { return nlohmann::json{{"v", p.index}}; }, {});
  }
  for (size_t n : {1u, 4u, 40u}) {  // 40: most shards empty
    SCOPED_TRACE(n);
    const auto files = run_shards(f, n, dir / std::to_string(n));
    const std::string merged = (dir / ("merged" + std::to_string(n) + ".jsonl")).string();
    const MergeSummary m = merge_shards(f, points, files, merged);
    EXPECT_EQ(m.shards, n);
    EXPECT_EQ(m.ok, points.size());
    EXPECT_EQ(m.failed + m.duplicates + m.missing.size(), 0u);
    EXPECT_EQ(key_values(merged), key_values(whole));
  }
}

TEST(SweepMerge, DropsDuplicatesKeepsOkOverErrorsAndReportsMissingPoints) {
  const fs::path dir = test::temp_dir("mergedup");
  const SweepFile& f = grid(4, 2);
  const auto points = expand_points(f);
  auto files = run_shards(f, 2, dir);
  // A retried task's second line of a point; an error line of a point that later succeeded.
  auto lines = test::read_lines(files[0]);
  ASSERT_GE(lines.size(), 3u);
  auto failed = nlohmann::json::parse(lines[2]);
  failed["status"] = "error";
  failed.erase("metrics");
  {
    std::ofstream out(files[0], std::ios::app);
    out << lines[1] << "\n" << failed.dump() << "\n";
  }
  // Shard 1 lost a point (its task was cancelled before it ran) and has a torn last line.
  lines = test::read_lines(files[1]);
  const std::string lost_key = nlohmann::json::parse(lines.back())["key"];
  {
    std::ofstream out(files[1], std::ios::trunc);
    for (size_t i = 0; i + 1 < lines.size(); ++i) out << lines[i] << "\n";
    out << "{\"key\": \"torn";
  }
  const MergeSummary m = merge_shards(f, points, files, (dir / "m.jsonl").string());
  EXPECT_EQ(m.duplicates, 2u);
  EXPECT_EQ(m.ok, points.size() - 1);
  EXPECT_EQ(m.failed, 0u);
  ASSERT_EQ(m.missing.size(), 1u);
  EXPECT_EQ(points[m.missing[0]].key, lost_key);
  EXPECT_EQ(test::read_lines(dir / "m.jsonl").size(), points.size() - 1);
  for (const auto& [key, metrics] : key_values(dir / "m.jsonl")) EXPECT_TRUE(metrics.contains("v")) << key;
}

TEST(SweepMerge, AShardThatDoesNotBelongIsOneErrorNamingIt) {
  const fs::path dir = test::temp_dir("mergebad");
  const SweepFile& f = grid(4, 3);
  const auto points = expand_points(f);
  const auto files = run_shards(f, 4, dir / "four");
  const std::string out = (dir / "m.jsonl").string();
  // A shard missing.
  expect_error(
      [&] {
        merge_shards(f, points, {files[0], files[1], files[3]}, out);
      },
      {"1 of 4 shards missing (2/4)", "give every shard"});
  expect_error([&] { merge_shards(f, points, {}, out); }, {"no shard results files"});
  // Of another partition.
  const auto three = run_shards(f, 3, dir / "three");
  expect_error(
      [&] {
        merge_shards(f, points, {files[0], three[1]}, out);
      },
      {three[1], "shard 1/3", "partition into 3 shards", files[0], "into 4"});
  // Of another sweep, or of another version of this one.
  const SweepFile& other = grid(4, 3, "other");
  const auto others = run_shards(other, 4, dir / "other");
  expect_error(
      [&] {
        merge_shards(f, points, {files[0], others[1], files[2], files[3]}, out);
      },
      {others[1], "sweep 'other'", "g.yaml"});
  const SweepFile& grown = grid(5, 3);
  expect_error([&] { merge_shards(grown, expand_points(grown), files, out); },
               {files[0], "another version of g.yaml", "12 points", "--shard 0/4 --resume"});
  // Not a shard's file at all; one that cannot be read.
  const std::string plain = (dir / "plain.jsonl").string();
  { ResultsFile(plain, false).append({{"key", points[0].key}, {"status", "ok"}}); }
  expect_error([&] { merge_shards(f, points, {plain}, out); }, {plain + ":1:", "not a shard's results file"});
  expect_error([&] { merge_shards(f, points, {(dir / "nope.jsonl").string()}, out); }, {"nope.jsonl", "cannot read"});
  // A line of another shard, a malformed line, a point the file does not have.
  const std::string p0 = test::read_lines(files[0])[1];
  auto append_to = [&](const std::string& path, const std::string& line) {
    const std::string copy = (dir / ("bad" + std::to_string(std::hash<std::string>()(line)) + ".jsonl")).string();
    fs::copy_file(path, copy);
    std::ofstream(copy, std::ios::app) << line << "\n";
    return copy;
  };
  const std::string moved = append_to(files[1], p0);
  expect_error(
      [&] {
        merge_shards(f, points, {files[0], moved, files[2], files[3]}, out);
      },
      {moved + ":", "belongs to shard 0/4", "this file's shard 1/4"});
  const std::string garbled = append_to(files[1], "{oops");
  expect_error(
      [&] {
        merge_shards(f, points, {files[0], garbled, files[2], files[3]}, out);
      },
      {garbled + ":", "not a result line"});
  const std::string stranger = append_to(files[1], R"({"key": "0123456789abcdef", "status": "ok"})");
  expect_error(
      [&] {
        merge_shards(f, points, {files[0], stranger, files[2], files[3]}, out);
      },
      {stranger + ":", "0123456789abcdef is not a point of g.yaml"});
  EXPECT_FALSE(fs::exists(out));  // nothing written on any of these
}

TEST(SweepSlurm, TheScriptsRunEveryShardResumableAndMergeAfterAll) {
  EXPECT_EQ(default_shard_count(0), 1u);
  EXPECT_EQ(default_shard_count(12), 12u);
  EXPECT_EQ(default_shard_count(5000), 1000u);
  SlurmJob job;
  job.hybridgen = "/opt/hg/bin/hybridgen";
  job.sweep_file = "/data/k sweep.yaml";  // a space: quoted where a shell reads it
  job.name = "k";
  job.dir = "/data/out/k.shards";
  job.merged = "/data/out/k.jsonl";
  job.workdir = "/data";
  job.shards = 4;
  job.array_parallel = 2;
  job.cpus_per_task = 8;
  job.partition = "cpu";
  job.time = "1:00:00";
  const SlurmScripts s = slurm_scripts(job);
  EXPECT_EQ(s.array_path, "/data/out/k.shards/array.sbatch");
  for (const char* want :
       {"#!/bin/bash\n", "#SBATCH --array=0-3%2\n", "#SBATCH --cpus-per-task=8\n", "#SBATCH --partition=cpu\n",
        "#SBATCH --time=1:00:00\n", "#SBATCH --requeue\n", "#SBATCH --chdir=/data\n",
        "#SBATCH --output=/data/out/k.shards/logs/shard-%a-of-4.log\n",
        "exec '/opt/hg/bin/hybridgen' sweep '/data/k sweep.yaml' --shard \"$SLURM_ARRAY_TASK_ID/4\" --resume",
        "-o \"$dir/shard-$SLURM_ARRAY_TASK_ID-of-4.jsonl\" -t \"${SLURM_CPUS_PER_TASK:-1}\""})
    EXPECT_NE(s.array_text.find(want), std::string::npos) << want << "\n" << s.array_text;
  for (const char* want : {"#SBATCH --output=/data/out/k.shards/logs/merge.log\n", "#SBATCH --chdir=/data\n",
                           "--merge '/data/out/k.jsonl' \"$dir\"/shard-*-of-4.jsonl\n"})
    EXPECT_NE(s.merge_text.find(want), std::string::npos) << want << "\n" << s.merge_text;
  job.array_parallel = 0;
  job.cpus_per_task = 0;
  job.plot_dir = "/data/figures";
  const SlurmScripts plain = slurm_scripts(job);
  EXPECT_NE(plain.array_text.find("#SBATCH --array=0-3\n"), std::string::npos);
  EXPECT_EQ(plain.array_text.find("--cpus-per-task"), std::string::npos);
  EXPECT_NE(plain.merge_text.find(".jsonl --plot '/data/figures'\n"), std::string::npos) << plain.merge_text;
  job.dir = "/data/my out";
  expect_error([&] { slurm_scripts(job); }, {"'/data/my out'", "#SBATCH"});
}

TEST(SweepSlurm, SubmitsTheArrayThenTheMergeAfterIt) {
  const fs::path dir = test::temp_dir("sbatch");
  const fs::path fake = dir / "sbatch";
  // Prints a job id per call (41, then 42) and records its arguments.
  std::ofstream(fake) << "#!/bin/sh\necho \"$@\" >> '" << (dir / "calls").string() << "'\n"
                      << "n=$(wc -l < '" << (dir / "calls").string() << "')\necho \"$((40 + n));cluster\"\n";
  fs::permissions(fake, fs::perms::owner_all);
  SlurmScripts s;
  s.array_path = "/x/array.sbatch";
  s.merge_path = "/x/merge.sbatch";
  const SlurmSubmission sub = submit_slurm(s, fake.string());
  EXPECT_EQ(sub.array_job, "41");
  EXPECT_EQ(sub.merge_job, "42");
  EXPECT_EQ(
      test::read_lines(dir / "calls"),
      (std::vector<std::string>{"--parsable /x/array.sbatch", "--parsable --dependency=afterany:41 /x/merge.sbatch"}));
  const fs::path failing = dir / "failing";
  std::ofstream(failing) << "#!/bin/sh\necho 'sbatch: error: invalid partition specified: gpu' >&2\nexit 1\n";
  fs::permissions(failing, fs::perms::owner_all);
  expect_error([&] { submit_slurm(s, failing.string()); }, {"failed (exit 1)", "invalid partition specified: gpu"});
}

}  // namespace
}  // namespace hg::sweep
