// Host logits kernel bandwidth: how fast hg::host_logits streams the host keys of a SmolLM2-shaped
// KV store (30 layers, 3 kv-heads, 9 query heads, head_dim 64, bf16) with 1..N threads, in GB/s
// of keys read, to compare with the machine's read bandwidth (build/bin/membw).
//
//   bench_host_logits [-n TOKENS] [-t THREADS,...] [-r REPS] [--dtype bf16|f16|f32]
//                     [--block-tokens N] [--no-huge-pages] [--json]
//
// One pass computes the logits of every host token of every layer (all kv-heads, all query heads
// of each group), i.e. what the host stage does once per decode step for the Post-QKᵀ policies
// summed over layers. Work is split as (layer, kv-head) units over an hg::ThreadPool; each thread
// writes into its own [n_heads][n_tokens] logits buffer, reused for every layer as the engine does.
// Reported: best and median pass over REPS, GB/s = key bytes of all layers / pass time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention/host_ops.h"
#include "hybridgen/dtype.h"
#include "hybridgen/model.h"
#include "kv/host_store.h"
#include "mem/placement.h"
#include "mem/topology.h"
#include "util/thread_pool.h"

namespace {

struct Options {
  int tokens = 32768;
  std::vector<int> threads = {1, 2};
  int reps = 10;
  hg::DType dtype = hg::DType::BF16;
  int block_tokens = hg::HostStore::kDefaultBlockTokens;
  bool no_huge_pages = false;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bench_host_logits: %s\nusage: bench_host_logits [-n TOKENS] [-t T1,T2,...] [-r REPS] "
               "[--dtype bf16|f16|f32] [--block-tokens N] [--no-huge-pages] [--json]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "-n") o.tokens = std::atoi(next().c_str());
    else if (a == "-r") o.reps = std::atoi(next().c_str());
    else if (a == "-t") {
      o.threads.clear();
      std::stringstream ss(next());
      for (std::string item; std::getline(ss, item, ',');) o.threads.push_back(std::atoi(item.c_str()));
    } else if (a == "--dtype") {
      const std::string d = next();
      if (d == "bf16") o.dtype = hg::DType::BF16;
      else if (d == "f16") o.dtype = hg::DType::F16;
      else if (d == "f32") o.dtype = hg::DType::F32;
      else usage("--dtype: expected bf16, f16 or f32");
    } else if (a == "--block-tokens") o.block_tokens = std::atoi(next().c_str());
    else if (a == "--no-huge-pages") o.no_huge_pages = true;
    else if (a == "--json") o.json = true;
    else if (a == "-h" || a == "--help") usage("help");
    else usage(("unknown argument " + a).c_str());
  }
  if (o.tokens <= 0 || o.reps <= 0 || o.block_tokens <= 0 || o.threads.empty()) usage("bad value");
  return o;
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t to_f16(float f) {  // |f| <= 1, no denormal care needed for a benchmark fill
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | ((u >> 13) & 0x3ffu));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);

  hg::ModelSpec spec;  // SmolLM2-135M shape
  spec.name = "smollm2-shape";
  spec.n_layers = 30;
  spec.d_model = 576;
  spec.n_heads = 9;
  spec.n_kv_heads = 3;
  spec.head_dim = 64;
  spec.d_ff = 1536;
  spec.vocab_size = 49152;
  spec.max_ctx = 8192;

  const hg::mem::Topology topo = hg::mem::Topology::discover();
  hg::mem::PlacementOptions popt;
  popt.huge_pages = !o.no_huge_pages;
  const hg::mem::Placement placement = hg::mem::resolve_placement(topo, popt);
  hg::HostStore store(spec, o.dtype, o.tokens, topo, placement, o.block_tokens);
  store.append_tokens(o.tokens);

  // Fill every key row with random data (this also commits the pages before timing).
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(spec.head_dim));
  for (int l = 0; l < spec.n_layers; ++l)
    for (int g = 0; g < spec.n_kv_heads; ++g)
      for (int64_t t = 0; t < o.tokens; ++t) {
        for (auto& x : row) x = dist(rng);
        void* dst = store.k_row(l, g, t);
        if (o.dtype == hg::DType::F32) {
          std::memcpy(dst, row.data(), row.size() * 4);
        } else {
          auto* d16 = static_cast<uint16_t*>(dst);
          for (size_t i = 0; i < row.size(); ++i) d16[i] = o.dtype == hg::DType::BF16 ? to_bf16(row[i]) : to_f16(row[i]);
        }
      }

  std::vector<float> q(static_cast<size_t>(spec.n_heads) * spec.head_dim);
  for (auto& x : q) x = dist(rng);
  const float scale = 0.125f;  // 1/sqrt(64)

  const size_t row_bytes = static_cast<size_t>(spec.head_dim) * hg::dtype_block_bytes(o.dtype);
  const double key_bytes = static_cast<double>(row_bytes) * spec.n_kv_heads * o.tokens * spec.n_layers;
  const int64_t units = static_cast<int64_t>(spec.n_layers) * spec.n_kv_heads;  // (layer, kv-head)
  const int64_t ld = o.tokens;

  if (!o.json)
    std::printf("host_logits: %d layers x %d kv-heads x %d tokens x head_dim %d (%s), %d query heads; "
                "%.1f MB of keys per pass\n", spec.n_layers, spec.n_kv_heads, o.tokens, spec.head_dim,
                std::string(hg::dtype_name(o.dtype)).c_str(), spec.n_heads, key_bytes / 1e6);
  if (o.json) std::printf("[");
  bool first = true;
  for (int nt : o.threads) {
    hg::ThreadPool pool(nt);
    std::vector<std::vector<float>> logits(static_cast<size_t>(nt),
                                           std::vector<float>(static_cast<size_t>(spec.n_heads) * ld));
    const auto fn = [&](int64_t begin, int64_t end, int ti) {
      float* out = logits[static_cast<size_t>(ti)].data();
      for (int64_t u = begin; u < end; ++u) {
        const int layer = static_cast<int>(u / spec.n_kv_heads);
        const int g = static_cast<int>(u % spec.n_kv_heads);
        hg::host_logits(store.k_layout(layer), q.data(), spec.n_heads, scale, g, g + 1, 0, o.tokens, out, ld);
      }
    };
    pool.parallel_for(units, fn);  // warm-up pass
    std::vector<double> secs;
    for (int r = 0; r < o.reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(units, fn);
      const auto t1 = std::chrono::steady_clock::now();
      secs.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    const double best = secs.front(), median = secs[secs.size() / 2];
    double checksum = 0;
    for (const auto& v : logits) checksum += v[0] + v[v.size() - 1];
    if (o.json) {
      std::printf("%s{\"threads\": %d, \"tokens\": %d, \"dtype\": \"%s\", \"key_mb\": %.1f, \"best_ms\": %.3f, "
                  "\"median_ms\": %.3f, \"best_gbps\": %.2f, \"median_gbps\": %.2f, \"checksum\": %g}",
                  first ? "" : ", ", nt, o.tokens, std::string(hg::dtype_name(o.dtype)).c_str(), key_bytes / 1e6,
                  best * 1e3, median * 1e3, key_bytes / best / 1e9, key_bytes / median / 1e9, checksum);
    } else {
      std::printf("threads=%d  best %.2f ms (%.2f GB/s)  median %.2f ms (%.2f GB/s)  [checksum %g]\n", nt, best * 1e3,
                  key_bytes / best / 1e9, median * 1e3, key_bytes / median / 1e9, checksum);
    }
    first = false;
  }
  if (o.json) std::printf("]\n");
  return 0;
}
