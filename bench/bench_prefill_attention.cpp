// Host prefill attention: one prefill chunk of ROWS query rows over a host K/V store of TOKENS
// tokens (row i sees TOKENS - ROWS + 1 + i of them, as the last chunk of a prompt does), SmolLM2's
// shape by default (9 query heads, 3 kv-heads, head_dim 64, bf16, 256-token blocks), on one
// thread. Compares the row-by-row path (hg::prefix_attention per row and head, what prefill used
// before the tiled kernel) with the tiled kernel of every ISA this CPU runs, and on a CPU with
// AVX512_BF16 the tiled kernel with its products in bf16 (kernels/cpu/prefill_attention_bf16.h). Reported per variant:
// best thread-CPU time of REPS runs (the machine may be shared: CPU time is less disturbed than
// wall time) and GFLOP/s = 4 · head_dim · Σ visible · n_heads / time. Then the prompt scores of
// the same rows over fp32 keys (attention/prompt_scores.h: h2o's and keyformer's, what a recorded
// prefill computes beside its attention), each alone and the two in one call, which shares their
// Q·Kᵀ; GFLOP/s there counts the Q·Kᵀ alone (2 · head_dim · Σ visible · n_heads per spec). Last,
// the attention and both scores as a recorded prefill on the CPU device computes them (the
// attention keeping its score tiles for the scores), against the two apart. The scores and the
// last table run with fp32 products and, where the CPU has them, bf16 ones.
//
//   bench_prefill_attention [-n TOKENS] [-b ROWS] [-r REPS] [--heads H,KV] [--head-dim D]
//                           [--dtype bf16|f16|f32]
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attention/host_ops.h"
#include "attention/prompt_scores.h"
#include "hybridgen/model.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/prefill_attention.h"
#include "kv/host_store.h"
#include "mem/placement.h"
#include "mem/topology.h"
#include "util/thread_pool.h"

namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double best_of(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu_seconds();
    fn();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = 3072, rows = 256, reps = 3, n_heads = 9, n_kv = 3, head_dim = 64;
  hg::DType dtype = hg::DType::BF16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "-n")
      tokens = std::atoi(v.c_str());
    else if (a == "-b")
      rows = std::atoi(v.c_str());
    else if (a == "-r")
      reps = std::atoi(v.c_str());
    else if (a == "--heads")
      std::sscanf(v.c_str(), "%d,%d", &n_heads, &n_kv);
    else if (a == "--head-dim")
      head_dim = std::atoi(v.c_str());
    else if (a == "--dtype")
      dtype = v == "f32" ? hg::DType::F32 : v == "f16" ? hg::DType::F16 : hg::DType::BF16;
    else {
      std::fprintf(stderr, "bench_prefill_attention: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  rows = std::min(rows, tokens);
  hg::ModelSpec spec;
  spec.n_layers = 1;
  spec.n_heads = n_heads;
  spec.n_kv_heads = n_kv;
  spec.head_dim = head_dim;
  const hg::mem::Topology topo = hg::mem::Topology::discover();
  const hg::mem::Placement placement = hg::mem::resolve_placement(topo, hg::mem::PlacementOptions{});
  hg::HostStore store(spec, dtype, tokens, topo, placement);
  store.append_tokens(tokens);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(head_dim));
  for (int g = 0; g < n_kv; ++g)
    for (int64_t t = 0; t < tokens; ++t) {
      for (auto& x : row) x = u(rng);
      hg::cpu::store_kv_row(dtype, store.k_row(0, g, t), row.data(), head_dim);
      for (auto& x : row) x = u(rng);
      hg::cpu::store_kv_row(dtype, store.v_row(0, g, t), row.data(), head_dim);
    }
  const int q_dim = n_heads * head_dim;
  std::vector<float> q(static_cast<size_t>(rows) * q_dim), out(q.size()), lse(static_cast<size_t>(rows) * n_heads);
  for (auto& x : q) x = u(rng);
  std::vector<int64_t> visible(static_cast<size_t>(rows));
  double pairs = 0;
  for (int i = 0; i < rows; ++i) pairs += static_cast<double>(visible[static_cast<size_t>(i)] = tokens - rows + 1 + i);
  const double flops = 4.0 * head_dim * pairs * n_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const hg::KvLayout kl = store.k_layout(0), vl = store.v_layout(0);
  std::printf("prefill chunk: %d rows over %d host tokens, %d/%d heads, head_dim %d, %s; one thread\n", rows, tokens,
              n_heads, n_kv, head_dim, std::string(hg::dtype_name(dtype)).c_str());
  std::printf("| variant | best CPU ms | GFLOP/s |\n| --- | --- | --- |\n");
  auto report = [&](const std::string& name, double s) {
    std::printf("| %s | %.2f | %.1f |\n", name.c_str(), s * 1e3, flops / s / 1e9);
    std::fflush(stdout);
  };
  std::vector<float> scratch;
  report("row by row (prefix_attention)", best_of(reps, [&] {
           for (int i = 0; i < rows; ++i)
             hg::prefix_attention(kl, vl, q.data() + static_cast<size_t>(i) * q_dim, n_heads, scale,
                                  visible[static_cast<size_t>(i)], 0, n_heads,
                                  out.data() + static_cast<size_t>(i) * q_dim,
                                  lse.data() + static_cast<size_t>(i) * n_heads, scratch);
         }));
  const hg::cpu::PrefillAttentionArgs a = hg::cpu::dense_prefill_args(
      q.data(), rows, n_heads, n_kv, head_dim, scale, kl, vl, visible.data(),
      out.data(), lse.data());
  hg::cpu::PrefillAttentionScratch ps;
  const int64_t items = hg::cpu::prefill_attention_items(a);
  for (hg::cpu::CpuIsa isa : {hg::cpu::CpuIsa::Scalar, hg::cpu::CpuIsa::Avx2, hg::cpu::CpuIsa::Avx512})
    if (hg::cpu::cpu_isa_supported(isa))
      report(std::string("tiled, ") + hg::cpu::cpu_isa_label(isa),
             best_of(reps, [&] { hg::cpu::prefill_attention_isa(isa, a, 0, items, ps); }));
  // the products in bf16 (kernels/cpu/prefill_attention_bf16.h), where the cache is bf16
  const bool bf16 = hg::cpu::cpu_isa_supported(hg::cpu::CpuIsa::Avx512Bf16);
  if (bf16) {
    hg::cpu::override_prefill_gemm(hg::cpu::PrefillGemm::Avx512Bf16);
    report("tiled, avx512_bf16, vdpbf16ps products" + std::string(dtype == hg::DType::BF16 ? "" : " (not bf16: sgemm)"),
           best_of(reps, [&] { hg::cpu::prefill_attention_isa(hg::cpu::CpuIsa::Avx512Bf16, a, 0, items, ps); }));
  }

  // prompt scores: fp32 keys [tokens][n_kv * head_dim] as the forward pass makes them (rounded to
  // the cache's dtype), the chunk's rows at the end of them; one pool thread, with the active ISA,
  // its prefill products in fp32 (sgemm) and, where the CPU has AVX512_BF16, in bf16
  std::vector<float> k32(static_cast<size_t>(tokens) * n_kv * head_dim);
  for (auto& x : k32) x = u(rng);
  for (size_t i = 0; i < k32.size(); i += static_cast<size_t>(head_dim))
    hg::cpu::round_kv_row(dtype, k32.data() + i, k32.data() + i, head_dim);
  const std::vector<hg::PromptScoreSpec> specs{hg::PromptScoreSpec::parse("h2o"),
                                               hg::PromptScoreSpec::parse("keyformer seed=0 tau=1")};
  hg::ThreadPool pool(1);
  hg::PromptScorer scorer;
  std::vector<hg::cpu::PrefillGemm> gemms{hg::cpu::PrefillGemm::Sgemm};
  if (bf16) gemms.push_back(hg::cpu::PrefillGemm::Avx512Bf16);
  for (hg::cpu::PrefillGemm g : gemms) {
    hg::cpu::override_prefill_gemm(g);
    const char* gemm_label = g == hg::cpu::PrefillGemm::Sgemm ? "fp32" : "vdpbf16ps";
    std::printf("\nprompt scores of the chunk (%s, %s products, one thread):\n",
                hg::cpu::cpu_isa_label(hg::cpu::active_cpu_isa()), gemm_label);
    std::printf("| scores | best CPU ms | GFLOP/s (QK^T) |\n| --- | --- | --- |\n");
    auto scores_of = [&](std::span<const hg::PromptScoreSpec> these) {
      std::vector<std::vector<float>> out(these.size());
      const double s = best_of(reps, [&] {
        for (auto& v : out) v.assign(static_cast<size_t>(tokens - rows) * n_kv, 0.0f);
        scorer.add_chunk(pool, these, spec, 0, q.data(), rows, tokens - rows, k32.data(), dtype, out);
      });
      std::string name;
      for (const hg::PromptScoreSpec& sp : these) name += (name.empty() ? "" : " + ") + sp.name();
      std::printf("| %s%s | %.2f | %.1f |\n", name.c_str(), these.size() > 1 ? " (one call)" : "", s * 1e3,
                  flops / 2 * static_cast<double>(these.size()) / s / 1e9);
      std::fflush(stdout);
    };
    for (const hg::PromptScoreSpec& sp : specs) scores_of(std::span(&sp, 1));
    scores_of(specs);

    // what a recorded prefill on the CPU device runs (Device::attention_scored): the tiled attention
    // keeping its score tiles for both scores, against the attention and the one-call scores apart
    std::vector<std::vector<float>> kept(specs.size());
    const auto reset = [&] {
      for (auto& v : kept) v.assign(static_cast<size_t>(tokens - rows) * n_kv, 0.0f);
    };
    const double apart = best_of(reps, [&] {
      reset();
      hg::cpu::prefill_attention(a, 0, items, ps);
      scorer.add_chunk(pool, specs, spec, 0, q.data(), rows, tokens - rows, k32.data(), dtype, kept);
    });
    const double together = best_of(reps, [&] {
      reset();
      const hg::PromptMassSink sink = scorer.begin_chunk(specs, spec, 0, rows, tokens - rows, dtype);
      hg::cpu::PrefillAttentionArgs scored = a;
      scored.mass_softmax = sink.softmax;
      scored.mass = sink.mass;
      scored.ld_mass = sink.ld_mass;
      hg::cpu::prefill_attention(scored, 0, items, ps);
      scorer.end_chunk(pool, kept);
    });
    std::printf("\nattention and both scores (%s, %s products, one thread):\n",
                hg::cpu::cpu_isa_label(hg::cpu::active_cpu_isa()), gemm_label);
    std::printf("| variant | best CPU ms |\n| --- | --- |\n");
    std::printf("| tiled attention, then the scores' own Q·Kᵀ | %.2f |\n", apart * 1e3);
    std::printf("| tiled attention keeping its score tiles for the scores | %.2f |\n", together * 1e3);
  }
  hg::cpu::override_prefill_gemm(std::nullopt);
  return 0;
}
