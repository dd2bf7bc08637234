// The Pre-QKᵀ predictors' host stage for one kv-head of one layer: `partial` (16 of 64 dimensions
// from a channel-major bf16 copy), `q4` (every dimension from a Q4_1 copy), and Post-QKᵀ's
// selection for comparison (its scan of every bf16 key, hg::host_logits, then top-K): the scan,
// the top-K and the chosen tokens' exact logits, as Selector::select runs them on a host worker.
// Keys are bf16 in one host block, Gaussian with a few loud channels; the copies are folded in
// before the timing (a run folds each token in once, as it arrives); BM_Q4Scan times q4's scan
// alone, in GB/s of its copy, and BM_Q4ScanGemv the same scan through the int8 GEMV (as q4 ran
// before its tile layout); BM_PartialFold and BM_Q4Fold fold the whole copy from nothing and
// then select (a predictor's first use in a request). Shapes: head_dim 64, a group
// of 3 query heads (SmolLM2) or 7 (Qwen2.5-0.5B). Reported: time per call and keys per second.
//
//   bench_predictors [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "attention/host_ops.h"
#include "attention/selectors/partial.h"
#include "attention/selectors/post_top_k.h"
#include "attention/selectors/quant_keys.h"
#include "attention/selectors/top_k.h"
#include "hybridgen/policy.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/key_scores_q4.h"
#include "kernels/cpu/matmul.h"
#include "model/quantize.h"

namespace {

constexpr int kHeadDim = 64;

struct Setup {
  int group;
  int64_t n;
  int K;
  hg::ModelSpec spec;
  hg::Policy policy = hg::policy_preset("hybrid");
  std::vector<uint16_t> keys;  // [n][head_dim] bf16: one kv-head
  std::vector<float> q;        // [group][head_dim]
  std::vector<float> logits;   // [group][n]: Post's scan
  std::vector<int32_t> idx;
  std::vector<float> chosen;  // [group][K]

  Setup(int group_, int64_t n_, int K_) : group(group_), n(n_), K(K_) {
    spec.n_layers = 1;
    spec.n_heads = group;
    spec.n_kv_heads = 1;
    spec.head_dim = kHeadDim;
    std::mt19937 rng(7);
    std::normal_distribution<float> z(0.0f, 1.0f);
    keys.resize(static_cast<size_t>(n) * kHeadDim);
    std::vector<float> row(kHeadDim);
    for (int64_t t = 0; t < n; ++t) {
      for (int d = 0; d < kHeadDim; ++d) row[static_cast<size_t>(d)] = z(rng) * (d < 4 ? 6.0f : 1.0f);
      hg::cpu::store_kv_row(hg::DType::BF16, keys.data() + t * kHeadDim, row.data(), kHeadDim);
    }
    q.resize(static_cast<size_t>(group) * kHeadDim);
    for (auto& x : q) x = z(rng);
    logits.resize(static_cast<size_t>(group) * n);
    idx.resize(static_cast<size_t>(K));
    chosen.resize(static_cast<size_t>(group) * K);
  }
  hg::KvLayout layout() const {
    hg::KvLayout l;
    l.dtype = hg::DType::BF16;
    l.n_kv_heads = 1;
    l.head_dim = kHeadDim;
    l.block_tokens = static_cast<int>(n);
    l.block_stride = keys.size() * sizeof(uint16_t);
    l.base = reinterpret_cast<const std::byte*>(keys.data());
    return l;
  }
  hg::SelectionRequest request(const float* all_logits) const {
    return hg::SelectionRequest{.seq = 0,
                                .layer = 0,
                                .k = layout(),
                                .q = q.data(),
                                .n_heads = group,
                                .scale = 0.125f,
                                .n_tokens = n,
                                .K = K,
                                .logits = all_logits};
  }
  hg::SelectorContext context() const { return hg::SelectorContext{spec, policy, static_cast<int>(n), 1}; }
};

// Times the selector's select over s's keys, its copy folded in before the timing; with
// from_nothing, every call folds the copy from nothing first (reset keeps its buffer, so this is
// the fold, not the allocation), as at a predictor's first use in a request.
template <typename S>
void run_predictor(benchmark::State& state, S& selector, Setup& s, bool from_nothing = false) {
  hg::SelectorScratch scratch;
  const hg::SelectionRequest r = s.request(nullptr);
  const hg::SelectedTokens out{s.idx.data(), s.chosen.data()};
  selector.select(r, 0, 1, out, scratch);  // folds the copy in
  for (auto _ : state) {
    if (from_nothing) selector.reset(0);
    selector.select(r, 0, 1, out, scratch);
    benchmark::DoNotOptimize(s.chosen.data());
  }
  state.SetItemsProcessed(s.n * static_cast<int64_t>(state.iterations()));
}

void BM_PartialFold(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  hg::PartialSelector sel(s.context());
  run_predictor(state, sel, s, /*from_nothing=*/true);
}

void BM_Q4Fold(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  hg::QuantKeySelector sel(s.context());
  run_predictor(state, sel, s, /*from_nothing=*/true);
}

void BM_Partial(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  hg::PartialSelector sel(s.context());
  run_predictor(state, sel, s);
}

void BM_Q4(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  hg::QuantKeySelector sel(s.context());
  run_predictor(state, sel, s);
}

// q4's scan alone (cpu::q4_key_scores over its tiles, the query quantized once), in bytes of the
// copy read per second: against the machine's read bandwidth (build/bin/membw).
void BM_Q4Scan(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  const int64_t n_tiles = hg::cpu::q4_tile_count(s.n);
  std::vector<uint8_t> tiles(static_cast<size_t>(n_tiles) * hg::cpu::q4_tile_bytes(kHeadDim));
  std::vector<uint8_t> row(hg::dtype_row_bytes(hg::DType::Q4_1, kHeadDim));
  std::vector<float> x(kHeadDim), best(static_cast<size_t>(n_tiles) * hg::cpu::kQ4TileTokens);
  const hg::KvLayout k = s.layout();
  for (int64_t t = 0; t < s.n; ++t) {
    hg::cpu::dequantize_row(k.dtype, k.row(0, t), kHeadDim, 0, x.data());
    hg::quantize_row(hg::DType::Q4_1, x.data(), kHeadDim, row.data());
    hg::cpu::q4_put_token(tiles.data(), t, row.data(), kHeadDim);
  }
  hg::cpu::Q4Query q;
  for (auto _ : state) {
    hg::cpu::q4_query(s.q.data(), s.group, kHeadDim, q);
    hg::cpu::q4_key_scores(tiles.data(), n_tiles, q, best.data());
    benchmark::DoNotOptimize(best.data());
  }
  state.SetItemsProcessed(s.n * static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(tiles.size()) * static_cast<int64_t>(state.iterations()));
}

// The same scan through the int8 GEMV of the quantized weights (cpu::matmul_rows over Q4_1 rows,
// the group's heads as its tokens, then their maximum): how q4 scanned before its tile layout.
void BM_Q4ScanGemv(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  const size_t row_bytes = hg::dtype_row_bytes(hg::DType::Q4_1, kHeadDim);
  std::vector<uint8_t> rows(static_cast<size_t>(s.n) * row_bytes);
  std::vector<float> x(kHeadDim), best(static_cast<size_t>(s.n));
  const hg::KvLayout k = s.layout();
  for (int64_t t = 0; t < s.n; ++t) {
    hg::cpu::dequantize_row(k.dtype, k.row(0, t), kHeadDim, 0, x.data());
    hg::quantize_row(hg::DType::Q4_1, x.data(), kHeadDim, rows.data() + static_cast<size_t>(t) * row_bytes);
  }
  for (auto _ : state) {
    hg::cpu::matmul_rows(hg::DType::Q4_1, rows.data(), kHeadDim, s.q.data(), s.group, s.logits.data(), s.n, 0, s.n);
    hg::group_max_scores(s.logits.data(), s.group, s.n, best.data());
    benchmark::DoNotOptimize(best.data());
  }
  state.SetItemsProcessed(s.n * static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(rows.size()) * static_cast<int64_t>(state.iterations()));
}

// Post-QKᵀ: every key's logits (the driver's scan), then the selector's top-K of them.
void BM_Post(benchmark::State& state) {
  Setup s(static_cast<int>(state.range(0)), state.range(1), static_cast<int>(state.range(2)));
  hg::PostTopKSelector sel;
  hg::SelectorScratch scratch;
  const hg::KvLayout k = s.layout();
  const hg::SelectionRequest r = s.request(s.logits.data());
  const hg::SelectedTokens out{s.idx.data(), s.chosen.data()};
  for (auto _ : state) {
    hg::host_logits(k, s.q.data(), s.group, r.scale, 0, 1, 0, s.n, s.logits.data(), s.n);
    sel.select(r, 0, 1, out, scratch);
    benchmark::DoNotOptimize(s.chosen.data());
  }
  state.SetItemsProcessed(s.n * static_cast<int64_t>(state.iterations()));
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"group", "n", "K"});
  for (int group : {3, 7})
    for (int64_t n : {8192, 32768}) b->Args({group, n, static_cast<int64_t>(n / 16)});
}

}  // namespace

BENCHMARK(BM_Partial)->Apply(shapes);
BENCHMARK(BM_Q4)->Apply(shapes);
BENCHMARK(BM_Q4Scan)->Apply(shapes);
BENCHMARK(BM_Q4ScanGemv)->Apply(shapes);
BENCHMARK(BM_Post)->Apply(shapes);
BENCHMARK(BM_PartialFold)->Apply(shapes);
BENCHMARK(BM_Q4Fold)->Apply(shapes);

BENCHMARK_MAIN();
