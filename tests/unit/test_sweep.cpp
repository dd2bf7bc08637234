// Sweep files: parsing with line numbers, grid/zip/repeat expansion, stable point keys, key and
// point checks mapped to lines, and the results file (append, resume, refusal to mix).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "sweep/points.h"
#include "sweep/results.h"
#include "sweep/sweep_file.h"
#include "sweep_test_util.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg::sweep {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::keep;

const std::vector<std::string> kTasks = {"bench", "ppl", "fidelity", "passkey"};

SweepFile parse(const std::string& text) { return parse_sweep(text, "s.yaml", kTasks); }

std::vector<std::string> values(const Point& p) {
  std::vector<std::string> v;
  for (const Param* q : p.params) v.push_back(q->key + "=" + q->value);
  return v;
}

TEST(SweepFile, GridIsTheCartesianProductFirstKeyOutermost) {
  const SweepFile f = parse(
      "name: g\n"
      "task: bench\n"
      "fixed: {model: m, n-gen: 8}\n"
      "grid:\n"
      "  policy: [full, hybrid]\n"
      "  depth: [0, 512, 1024]\n");
  const auto points = expand_points(f);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(values(points[0]), (std::vector<std::string>{"model=m", "n-gen=8", "policy=full", "depth=0"}));
  EXPECT_EQ(values(points[2]), (std::vector<std::string>{"model=m", "n-gen=8", "policy=full", "depth=1024"}));
  EXPECT_EQ(values(points[3]), (std::vector<std::string>{"model=m", "n-gen=8", "policy=hybrid", "depth=0"}));
  EXPECT_EQ(points[4].describe(), "policy=hybrid depth=512");
  EXPECT_EQ(points[4].args(), (std::vector<std::string>{"--model=m", "--n-gen=8", "--policy=hybrid", "--depth=512"}));
  for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].index, i);
  // Typed values for the results: numbers stay numbers, quoted strings stay strings.
  EXPECT_EQ(points[4].params_json()["depth"], 512);
  EXPECT_EQ(points[4].params_json()["policy"], "hybrid");
  EXPECT_EQ(parse("name: q\ntask: bench\ngrid: {threads: ['2']}\n").grid[0].values[0].json, "2");
}

TEST(SweepFile, ZipListsVaryTogetherAndRepeatRunsEachPointInARow) {
  const SweepFile f = parse(
      "name: z\n"
      "task: fidelity\n"
      "repeat: 2\n"
      "grid: {policy: [hybrid, hgca]}\n"
      "zip:\n"
      "  window: [256, 512, 1024]\n"
      "  k: [32, 64, 128]\n");
  const auto points = expand_points(f);
  ASSERT_EQ(points.size(), 2u * 3u * 2u);
  EXPECT_EQ(values(points[0]), (std::vector<std::string>{"policy=hybrid", "window=256", "k=32"}));
  EXPECT_EQ(values(points[1]), values(points[0]));
  EXPECT_EQ(points[0].repeat, 0);
  EXPECT_EQ(points[1].repeat, 1);
  EXPECT_NE(points[0].key, points[1].key);
  EXPECT_EQ(values(points[2]), (std::vector<std::string>{"policy=hybrid", "window=512", "k=64"}));
  EXPECT_EQ(values(points[6]), (std::vector<std::string>{"policy=hgca", "window=256", "k=32"}));
  EXPECT_EQ(points[3].describe(), "policy=hybrid window=512 k=64 (repeat 2)");
  // Several zip groups: a list of mappings, each an axis of the product.
  const SweepFile g = parse("name: z\ntask: ppl\nzip:\n  - {window: [1, 2], k: [3, 4]}\n  - {ctx: [5, 6, 7]}\n");
  EXPECT_EQ(expand_points(g).size(), 6u);
}

TEST(SweepFile, ListValuesAreJoinedWithCommas) {
  const SweepFile f = parse("name: p\ntask: passkey\nfixed:\n  depths: [0.1, 0.5, 0.9]\ngrid: {ctx: [512]}\n");
  const auto points = expand_points(f);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].args()[0], "--depths=0.1,0.5,0.9");
  EXPECT_EQ(points[0].params_json()["depths"], nlohmann::json::parse("[0.1, 0.5, 0.9]"));
}

TEST(SweepFile, NullLeavesAnOptionOutAtThatPoint) {
  const SweepFile f = parse("name: n\ntask: bench\nzip:\n  policy: [full, hybrid]\n  window: [~, 256]\n");
  const auto points = expand_points(f);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(values(points[0]), (std::vector<std::string>{"policy=full"}));
  EXPECT_EQ(values(points[1]), (std::vector<std::string>{"policy=hybrid", "window=256"}));
  expect_error([] { parse("name: n\ntask: bench\nfixed: {window: ~}\ngrid: {k: [1]}\n"); }, {"s.yaml:3:", "window"});
}

TEST(SweepFile, PointKeysAreStableAndIndependentOfKeyOrder) {
  const auto a = expand_points(keep(parse("name: a\ntask: bench\nfixed: {model: m, threads: 2}\ngrid: {k: [1, 2]}\n")));
  const auto b = expand_points(keep(parse("name: b\ntask: bench\ngrid: {k: [2, 1]}\nfixed: {threads: 2, model: m}\n")));
  EXPECT_EQ(a[0].key, b[1].key);
  EXPECT_EQ(a[1].key, b[0].key);
  EXPECT_NE(a[0].key, a[1].key);
  EXPECT_EQ(a[0].key.size(), 16u);
  // The task is part of the key; the sweep's name is not (renaming keeps results).
  const auto c = expand_points(keep(parse("name: a\ntask: ppl\nfixed: {model: m, threads: 2}\ngrid: {k: [1, 2]}\n")));
  EXPECT_NE(a[0].key, c[0].key);
  // FNV-1a of "task=bench\x1fk=1\x1fmodel=m\x1fthreads=2\x1frepeat=0" (computed in Python): results
  // written by one build resume with the next.
  EXPECT_EQ(a[0].key, "07dc59c2e64fd263");
  // A key that starts another sorts as "key=value" does ('-' before '='), and `~` leaves the
  // parameter out of the key: "task=bench\x1fk-node=1\x1fk=4\x1frepeat=0", then without k-node.
  const auto d = expand_points(keep(parse("name: d\ntask: bench\nfixed: {k: 4}\ngrid: {k-node: [1, ~]}\n")));
  EXPECT_EQ(d[0].key, "f8ac65ac3429fe8e");
  EXPECT_EQ(d[1].key, "f394bde9b138cadd");
}

TEST(SweepFile, ErrorsNameTheFileAndLine) {
  expect_error([] { parse("name: x\ntask: bench\ngrid:\n  k: [1, 2\n"); }, {"s.yaml:", "malformed YAML"});
  expect_error([] { parse("name: x\ntask: bnech\ngrid: {k: [1]}\n"); }, {"s.yaml:2:", "task 'bnech'", "bench, ppl"});
  expect_error([] { parse("name: x\ntask: bench\ngrid: {}\n"); }, {"s.yaml:3:", "grid"});
  expect_error([] { parse("name: x\ntask: bench\ngrid:\n  k: []\n"); }, {"s.yaml:4:", "grid.k", "empty"});
  expect_error([] { parse("name: x\ntask: bench\n"); }, {"s.yaml:1:", "no grid"});
  expect_error([] { parse("name: x\ntask: bench\ngird: {k: [1]}\n"); }, {"s.yaml:3:", "unknown field 'gird'"});
  expect_error([] { parse("name: x\ntask: bench\nrepeat: 0\ngrid: {k: [1]}\n"); }, {"s.yaml:3:", "repeat"});
  expect_error([] { parse("name: x\ntask: bench\nfixed: {k: 1}\ngrid:\n  k: [1]\n"); },
               {"s.yaml:5:", "'k' is given twice"});
  expect_error([] { parse("name: x\ntask: bench\nzip:\n  k: [1, 2]\n  window: [1]\n"); },
               {"s.yaml:5:", "zip.window has 1 values, zip.k has 2"});
  expect_error([] { parse("name: x\ntask: bench\ngrid:\n  --k: [1]\n"); }, {"s.yaml:4:", "without dashes"});
  expect_error([] { parse("- a\n- b\n"); }, {"s.yaml:1:", "mapping"});
  expect_error([] { load_sweep_file("/nonexistent/s.yaml", kTasks); }, {"/nonexistent/s.yaml", "cannot open"});
}

TEST(SweepFile, TooManyPointsIsOneErrorNotAnAllocation) {
  expect_error([] { expand_points(keep(parse("name: x\ntask: bench\nrepeat: 2000000000\ngrid:\n  k: [1, 2]\n"))); },
               {"s.yaml:4:", "more than 10000 points"});
  // Ten lists of 100 values: 100^10 points, a product that wraps 64 bits unless counted with care.
  std::string lists;
  for (const char* key : {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}) {
    lists += std::string("  ") + key + ": [";
    for (int v = 0; v < 100; ++v) lists += (v ? ", " : "") + std::to_string(v);
    lists += "]\n";
  }
  expect_error([&] { expand_points(keep(parse("name: x\ntask: bench\ngrid:\n" + lists))); }, {"more than 10000 points"});
  EXPECT_EQ(expand_points(keep(parse("name: x\ntask: bench\nrepeat: 3\ngrid:\n  k: [1, 2]\n"))).size(), 6u);
  // The cap itself is allowed; one point more is not.
  std::string hundred = "[";
  for (int v = 0; v < 100; ++v) hundred += (v ? ", " : "") + std::to_string(v);
  hundred += "]";
  const std::string square = "name: x\ntask: bench\ngrid:\n  a: " + hundred + "\n  b: " + hundred + "\n";
  EXPECT_EQ(expand_points(keep(parse(square))).size(), kMaxPoints);
  expect_error([&] { expand_points(keep(parse(square + "repeat: 2\n"))); }, {"more than 10000 points"});
  // 10,000 points of a 7 KB value, repeated by YAML aliases in a file of a few hundred bytes: 71 MB
  // of text to hash, refused before any is built.
  std::string aliases = "  long: [&v " + std::string(100, 'x');
  for (int i = 0; i < 70; ++i) aliases += ", *v";
  expect_error([&] { expand_points(keep(parse(square + "fixed:\n" + aliases + "]\n"))); },
               {"s.yaml:3:", "10000 points hold up to", "more than 64 MiB"});
}

// A sweep whose 7th line is `  LAST` (after model on line 4 and policy on line 6).
SweepFile with_last_line(const std::string& last) {
  return parse("name: x\ntask: bench\nfixed:\n  model: m\ngrid:\n  policy: [hybrid, full]\n  " + last + "\n");
}

TEST(SweepFile, UnknownKeysAndBadPointsPointAtTheirLine) {
  const SweepFile f = with_last_line("windw: [16]");
  const std::set<std::string> options = {"model", "policy", "window", "k"};
  expect_error([&] { check_keys(f, [&](const std::string& k) { return options.count(k) > 0; }); },
               {"s.yaml:7:", "unknown key 'windw'", "task 'bench'"});
  const SweepFile g = with_last_line("window: [16, 32]");
  const auto points = expand_points(g);
  // The message names --window: the error points at the window line, and names the point.
  expect_error(
      [&] {
        check_points(g, points, [](const Point& p) {
          if (p.params_json()["policy"] == "full") throw Error("--window does not apply to --policy full");
        });
      },
      {"s.yaml:7:", "point 3/4 (policy=full window=16)", "--window does not apply"});
  // A message that names no option: the point's first varying parameter.
  expect_error(
      [&] {
        check_points(g, points, [](const Point& p) {
          if (p.index == 1) throw Error("contradiction");
        });
      },
      {"s.yaml:6:", "point 2/4", "contradiction"});
  // --k does not match --k-node: the line of `model` (a fixed key named by nothing) is not taken.
  const SweepFile h = parse("name: x\ntask: bench\nfixed:\n  k: 4\ngrid:\n  k-node: [0]\n");
  expect_error([&] { check_points(h, expand_points(h), [](const Point&) { throw Error("--k-node 0 missing"); }); },
               {"s.yaml:6:"});
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(ResultsFile, AppendsWholeLinesAndResumesFromFinishedPointsOnly) {
  const fs::path dir = test::temp_dir("results");
  const std::string path = (dir / "sub/r.jsonl").string();  // the directory is created
  {
    ResultsFile r(path, false);
    r.append({{"key", "a"}, {"status", "ok"}});
    r.append({{"key", "b"}, {"status", "error"}, {"error", "boom"}});
  }
  { std::ofstream(path, std::ios::app) << "{\"key\": \"c\", \"stat"; }  // a torn last line
  expect_error([&] { ResultsFile r(path, false); }, {path, "--resume"});
  {
    ResultsFile r(path, true);
    EXPECT_EQ(r.done(), (std::set<std::string>{"a"}));
    EXPECT_EQ(r.dropped(), 2u);
    r.append({{"key", "b"}, {"status", "ok"}});
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["key"], "a");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["key"], "b");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // An empty file may be started without --resume.
  const std::string empty = (dir / "empty.jsonl").string();
  std::ofstream(empty).close();
  ResultsFile e(empty, false);
  EXPECT_TRUE(e.done().empty());
}

TEST(ResultsFile, AnUnwritablePathIsOneError) {
  expect_error([] { ResultsFile r("/dev/null/r.jsonl", false); }, {"/dev/null/r.jsonl", "cannot open"});
}

}  // namespace
}  // namespace hg::sweep
