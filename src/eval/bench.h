// The measurement loop of `hybridgen bench` (llama-bench-style), as library code so `sweep`
// reuses it: for every policy × threads × batch, prefill tests "ppN" (N random prompt tokens) and
// decode tests "tgN @ dD" (N steps after a D-token context), -r timed repetitions after one warm-up
// each, reported as JSON rows with mean ± std tokens/s, the weight bytes streamed per second and,
// for hybrid policies, T_dev / T_host / T_tx / wait per decode step summed over layers.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hybridgen/engine.h"
#include "hybridgen/model.h"

namespace hg::eval {

struct BenchConfig {
  std::vector<std::string> policies = {"full"};
  std::vector<int> prompts = {512};  // ppN tests (0: none)
  std::vector<int> gens = {128};     // tgN tests (0: none)
  std::vector<int> depths = {0};     // context depths decode tests start at
  std::vector<int> batches = {1};
  std::vector<int> threads = {2};
  int reps = 3;
  int ctx = 0;             // KV cache tokens per sequence (0: as the longest test needs)
  double peak_gbps = 0.0;  // measured read bandwidth; > 0 adds "peak_fraction"
};

// Engine options for one combination (policy, threads, batch, ctx): the caller applies its knobs.
using BenchEngineOptions =
    std::function<EngineOptions(const std::string& policy, int threads, int batch, int ctx)>;

// Bytes of weights one decode step streams: every matrix a matmul reads in full (embedding
// tables are only read row by row, unless tied to the output head).
double streamed_weight_bytes(const Model& m);

// Runs every test; on_row (optional) sees each row as it is finished (progress).
std::vector<nlohmann::json> run_bench(const Model& model, const BenchConfig& c, const BenchEngineOptions& options,
                                      const std::function<void(const nlohmann::json&)>& on_row = {});

}  // namespace hg::eval
