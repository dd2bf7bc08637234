// The host's top-K (hg::top_k_indices): K of n attention logits per kv-head, as the Post-QKᵀ
// selectors call it once per layer and kv-head of every decode step. Logits drawn like real ones:
// a normal bulk with a few large outliers. Reported: time per call and scored tokens per second (items/s).
//
//   bench_top_k [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "attention/selectors/top_k.h"

namespace {

void BM_TopK(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int K = static_cast<int>(state.range(1));
  std::mt19937 rng(11);
  std::normal_distribution<float> bulk(0.0f, 2.0f);
  std::vector<float> scores(static_cast<size_t>(n));
  for (auto& x : scores) x = rng() % 64 == 0 ? 12.0f + bulk(rng) : bulk(rng);
  std::vector<int32_t> out(static_cast<size_t>(K)), order;
  for (auto _ : state) {
    hg::top_k_indices(scores.data(), n, K, out.data(), order);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(n * static_cast<int64_t>(state.iterations()));  // scored tokens
}

}  // namespace

BENCHMARK(BM_TopK)->ArgNames({"n", "K"})->Args({3072, 256})->Args({3072, 1024})->Args({31744, 2048});

BENCHMARK_MAIN();
