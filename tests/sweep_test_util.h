// Shared by the sweep tests: a home for sweep files that points point into (unit tests), and a
// perplexity sweep on the tiny llama whose metrics hold no timings, so that a sharded run and a
// one-process run can be compared value for value (tests/e2e/test_sweep_shard_cli.cpp,
// test_sweep_slurm.cpp).
#pragma once
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sweep/sweep_file.h"
#include "test_util.h"

namespace hg::test {

// Points point into their SweepFile: the files of one-line expansions live to the end of the test
// program.
inline const sweep::SweepFile& keep(sweep::SweepFile f) {
  static std::deque<sweep::SweepFile> files;
  return files.emplace_back(std::move(f));
}

// A sweep file `name`.yaml in `dir`: ppl of `n_ids` random ids on the tiny llama, policy hybrid,
// one thread, windows of `ctx` tokens (0: the whole text in one), over window x k (`windows` and
// `ks` as YAML lists).
inline std::filesystem::path write_ppl_sweep(const std::filesystem::path& dir, const std::string& name, int n_ids,
                                             const std::string& windows, const std::string& ks, int ctx = 0) {
  const std::filesystem::path ids = dir / (name + ".ids.json");
  write_ids(ids, random_ids(n_ids, 7));
  const std::filesystem::path file = dir / (name + ".yaml");
  std::ofstream(file) << "name: " << name << "\ntask: ppl\nfixed:\n  model: " << tiny_model("llama-gqa").string()
                      << "\n  ids-file: " << ids.string() << "\n  policy: hybrid\n  threads: 1\n"
                      << (ctx > 0 ? "  ctx: " + std::to_string(ctx) + "\n" : "") << "grid:\n  window: " << windows
                      << "\n  k: " << ks << "\n";
  return file;
}

// (key, params, metrics) of every point line of a results file, in order; shard lines skipped.
inline std::vector<std::string> point_values(const std::filesystem::path& results) {
  std::vector<std::string> values;
  for (const auto& line : read_lines(results)) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("status", "") == "shard") continue;
    EXPECT_EQ(j["status"], "ok") << line;
    values.push_back(j["key"].get<std::string>() + " " + j["params"].dump() + " " + j["metrics"].dump());
  }
  return values;
}

inline std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

}  // namespace hg::test
