// Benchmarks of the CPU linear-algebra kernels against this machine's limits:
//  - GEMV (decode): achieved GB/s of weights read, to compare with `membw` (tools/membw.cpp);
//  - the prefill GEMM (oneDNN's sgemm on fp32 tiles, or bf16 on AMX tiles or vdpbf16ps, as the
//    label says): GFLOP/s, to compare with the fp32 peak in the context header (cores x MHz from
//    /proc/cpuinfo x 2 FMA pipes x 8 or 16 lanes x 2 flops; Zen 4 runs a 16-lane FMA on both of
//    its 256-bit pipes, so its peak is half that; bf16 doubles the multiply-adds per instruction);
//  - KV-cache dot kernels: GB/s of cache read.
// Weight sets are replicated to exceed the last-level cache, so every iteration streams DRAM.
//
//   bench_matmul [--benchmark_filter=...]   (threads: HG_BENCH_THREADS, default all cores)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"
#include "util/thread_pool.h"

namespace {

using hg::DType;

constexpr size_t kMinStreamBytes = size_t{256} << 20;  // >> L3, so weights come from DRAM

int bench_threads() {
  if (const char* env = std::getenv("HG_BENCH_THREADS")) return std::max(1, std::atoi(env));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

hg::ThreadPool& pool() {
  static hg::ThreadPool p(bench_threads());
  return p;
}

hg::cpu::MatmulWorkspace& workspace() {
  static hg::cpu::MatmulWorkspace ws;
  return ws;
}

// Random weight bytes with sane f16 scales for the block types (their first 2-4 bytes per block).
std::vector<uint8_t> make_weights(DType wt, int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<uint8_t> w(hg::dtype_row_bytes(wt, cols) * static_cast<size_t>(rows));
  std::mt19937 rng(seed);
  for (size_t i = 0; i + 4 <= w.size(); i += 4) {
    const uint32_t r = rng();
    std::memcpy(&w[i], &r, 4);
  }
  if (wt == DType::F32) {
    auto* f = reinterpret_cast<float*>(w.data());
    for (size_t i = 0; i < w.size() / 4; ++i) f[i] = static_cast<float>(rng() % 2001) * 1e-3f - 1.0f;
  } else if (wt == DType::F16 || wt == DType::BF16) {
    auto* h = reinterpret_cast<uint16_t*>(w.data());
    for (size_t i = 0; i < w.size() / 2; ++i) {
      const float v = static_cast<float>(rng() % 2001) * 1e-3f - 1.0f;
      h[i] = wt == DType::F16 ? hg::cpu::fp32_to_f16(v) : hg::cpu::fp32_to_bf16(v);
    }
  } else {
    const size_t block = hg::dtype_block_bytes(wt);
    const size_t scale_offset = wt == DType::Q6_K || wt == DType::Q3_K ? block - 2 : 0;
    const size_t n_scales = (wt == DType::Q4_1 || wt == DType::Q4_K || wt == DType::Q5_K) ? 2 : 1;
    for (size_t b = 0; b + block <= w.size(); b += block)
      for (size_t s = 0; s < n_scales; ++s) {
        const uint16_t d = hg::cpu::fp32_to_f16(0.01f);
        std::memcpy(&w[b + scale_offset + 2 * s], &d, 2);
      }
  }
  return w;
}

struct Matrix {
  int64_t rows, cols;
};

// Copies of a set of matrices, enough to exceed kMinStreamBytes; iterations cycle through them.
// With `pack`, each copy also gets the packed layout the CPU device uses at decode (where this CPU
// has one: matmul_packed.h), and the GEMV reads that instead.
struct WeightSet {
  DType wt;
  std::vector<Matrix> shapes;
  std::vector<std::vector<std::vector<uint8_t>>> copies;  // [copy][matrix]
  std::vector<std::vector<std::unique_ptr<hg::cpu::PackedWeight>>> packed;  // [copy][matrix], or empty
  size_t bytes_per_set = 0;

  WeightSet(DType t, std::vector<Matrix> s, bool pack = false) : wt(t), shapes(std::move(s)) {
    for (const auto& m : shapes) bytes_per_set += hg::dtype_row_bytes(wt, m.cols) * static_cast<size_t>(m.rows);
    const size_t n_copies = std::max<size_t>(1, (kMinStreamBytes + bytes_per_set - 1) / bytes_per_set);
    for (size_t c = 0; c < n_copies; ++c) {
      copies.emplace_back();
      for (size_t i = 0; i < shapes.size(); ++i)
        copies.back().push_back(make_weights(wt, shapes[i].rows, shapes[i].cols, static_cast<uint32_t>(c * 31 + i)));
    }
    if (!pack) return;
    for (const auto& mats : copies) {
      packed.emplace_back();
      for (size_t i = 0; i < shapes.size(); ++i)
        packed.back().push_back(hg::cpu::pack_weight(wt, mats[i].data(), shapes[i].rows, shapes[i].cols));
    }
  }
};

void run_set(benchmark::State& state, const WeightSet& set, int64_t n_tokens) {
  int64_t max_rows = 0, max_cols = 0;
  for (const auto& m : set.shapes) max_rows = std::max(max_rows, m.rows), max_cols = std::max(max_cols, m.cols);
  std::vector<float> X(static_cast<size_t>(n_tokens * max_cols), 0.01f);
  std::vector<float> Y(static_cast<size_t>(n_tokens * max_rows));
  size_t copy = 0;
  double flops = 0;
  for (const auto& m : set.shapes) flops += 2.0 * static_cast<double>(m.rows * m.cols * n_tokens);
  for (auto _ : state) {
    const auto& mats = set.copies[copy];
    for (size_t i = 0; i < set.shapes.size(); ++i) {
      const hg::cpu::MatmulTarget t{set.wt, mats[i].data(), set.shapes[i].rows, Y.data(), set.shapes[i].rows,
                                    false, set.packed.empty() ? nullptr : set.packed[copy][i].get()};
      hg::cpu::matmul_group(pool(), workspace(), &t, 1, set.shapes[i].cols, X.data(), n_tokens);
    }
    copy = (copy + 1) % set.copies.size();
    benchmark::DoNotOptimize(Y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(set.bytes_per_set) * 1e-9 *
                                                  static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  const bool packed = !set.packed.empty() && set.packed[0][0];
  // the prefill path says which GEMM ran (HG_PREFILL_GEMM): sgemm_f32, amx_bf16 or avx512_bf16
  const std::string gemm = n_tokens >= hg::cpu::kMatmulSgemmMinTokens
                               ? std::string(" prefill:") + hg::cpu::prefill_gemm_label(
                                                        hg::cpu::prefill_gemm_for(hg::cpu::active_cpu_isa()))
                               : "";
  state.SetLabel(std::string(hg::dtype_name(set.wt)) + " " + hg::cpu::cpu_isa_name() + gemm +
                 (packed ? " packed" : ""));
}

DType arg_dtype(const benchmark::State& state) { return static_cast<DType>(state.range(0)); }

// One matrix, GEMV: args (dtype, rows, cols, n_tokens, packed).
void BM_Gemv(benchmark::State& state) {
  static std::map<std::string, std::unique_ptr<WeightSet>> cache;
  const std::string key = std::to_string(state.range(0)) + "x" + std::to_string(state.range(1)) + "x" +
                          std::to_string(state.range(2)) + "p" + std::to_string(state.range(4));
  auto& set = cache[key];
  if (!set)
    set = std::make_unique<WeightSet>(arg_dtype(state), std::vector<Matrix>{{state.range(1), state.range(2)}},
                                      state.range(4) != 0);
  run_set(state, *set, state.range(3));
}

// Llama-3.2-1B decoder layer: q, k, v, o, gate, up, down (d_model 2048, 8 kv heads x 64, d_ff 8192).
std::vector<Matrix> llama_1b_layer() {
  return {{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048}, {8192, 2048}, {8192, 2048}, {2048, 8192}};
}

void BM_Llama1BLayer(benchmark::State& state) {
  static std::map<int64_t, std::unique_ptr<WeightSet>> cache;
  auto& set = cache[state.range(0) * 2 + state.range(2)];
  if (!set) set = std::make_unique<WeightSet>(arg_dtype(state), llama_1b_layer(), state.range(2) != 0);
  run_set(state, *set, state.range(1));
}

// Prefill: args (dtype, n_tokens), a 2048 x 2048 weight.
void BM_Prefill(benchmark::State& state) {
  static std::map<int64_t, std::unique_ptr<WeightSet>> cache;
  auto& set = cache[state.range(0)];
  if (!set) set = std::make_unique<WeightSet>(arg_dtype(state), std::vector<Matrix>{{2048, 2048}});
  run_set(state, *set, state.range(1));
}

// KV cache: logits then P·V over n_rows tokens of one kv head (head_dim 64, f16), rows strided
// as in a [token, 8 kv heads * 64] cache; GB/s of K and V bytes touched.
void BM_KvDotAxpy(benchmark::State& state) {
  const int64_t n_rows = state.range(0), head_dim = 64, ld = 8 * 64;
  const DType dt = static_cast<DType>(state.range(1));
  const auto K = make_weights(dt, n_rows, ld, 1), V = make_weights(dt, n_rows, ld, 2);
  std::vector<float> q(head_dim, 0.1f), logits(static_cast<size_t>(n_rows)), out(head_dim);
  for (auto _ : state) {
    hg::cpu::dot_rows(dt, K.data(), ld, n_rows, q.data(), head_dim, 0.125f, logits.data());
    hg::cpu::axpy_rows(dt, V.data(), ld, n_rows, logits.data(), head_dim, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = 2.0 * static_cast<double>(n_rows * head_dim) * (dt == DType::F32 ? 4 : 2);
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9 * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

constexpr int64_t D(DType t) { return static_cast<int64_t>(t); }

BENCHMARK(BM_Gemv)
    ->ArgNames({"dtype", "rows", "cols", "tokens", "packed"})
    ->Args({D(DType::BF16), 8192, 2048, 1, 0})
    ->Args({D(DType::BF16), 8192, 2048, 4, 0})
    ->Args({D(DType::F16), 8192, 2048, 1, 0})
    ->Args({D(DType::F32), 8192, 2048, 1, 0})
    ->Args({D(DType::Q8_0), 8192, 2048, 1, 0})
    ->Args({D(DType::Q8_0), 8192, 2048, 1, 1})
    ->Args({D(DType::Q4_1), 8192, 2048, 1, 0})
    ->Args({D(DType::Q4_1), 8192, 2048, 1, 1})
    ->Args({D(DType::Q4_0), 8192, 2048, 1, 0})
    ->Args({D(DType::Q4_0), 8192, 2048, 1, 1})
    ->Args({D(DType::Q4_K), 8192, 2048, 1, 0})
    ->Args({D(DType::Q4_K), 8192, 2048, 1, 1})
    ->Args({D(DType::Q5_K), 8192, 2048, 1, 0})
    ->Args({D(DType::Q5_K), 8192, 2048, 1, 1})
    ->Args({D(DType::Q6_K), 8192, 2048, 1, 0})
    ->Args({D(DType::Q6_K), 8192, 2048, 1, 1})
    ->Args({D(DType::Q3_K), 8192, 2048, 1, 0})
    ->Args({D(DType::Q3_K), 8192, 2048, 1, 1})
    ->Args({D(DType::Q4_K), 896, 4864, 1, 0})  // Qwen2.5-0.5B's ffn_down: Q4_K or Q6_K in its Q4_K_M file
    ->Args({D(DType::Q4_K), 896, 4864, 1, 1})
    ->Args({D(DType::Q6_K), 896, 4864, 1, 0})
    ->Args({D(DType::Q6_K), 896, 4864, 1, 1})
    ->Args({D(DType::Q4_1), 1536, 576, 1, 0})
    ->Args({D(DType::Q4_1), 1536, 576, 1, 1})
    ->Args({D(DType::Q4_1), 1536, 576, 4, 0})
    ->Args({D(DType::Q4_1), 1536, 576, 4, 1})
    ->Args({D(DType::Q4_1), 1536, 576, 8, 1})  // SmolLM2's ffn_up/gate at batch 8 (serve's 8 streams)
    ->Args({D(DType::Q4_1), 432, 2048, 8, 1})  // the same weights in longer rows
    ->Args({D(DType::Q8_0), 49152, 576, 1, 1})  // SmolLM2's output (tied embedding), Q8_0
    ->Args({D(DType::Q8_0), 49152, 576, 8, 1})
    ->Args({D(DType::Q5_0), 4864, 896, 1, 0})  // Qwen2.5-0.5B's ffn_up/gate: Q5_0 in its Q4_K_M file
    ->Args({D(DType::Q5_0), 4864, 896, 1, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Llama1BLayer)
    ->ArgNames({"dtype", "tokens", "packed"})
    ->Args({D(DType::BF16), 1, 0})
    ->Args({D(DType::Q4_1), 1, 0})
    ->Args({D(DType::Q4_1), 1, 1})
    ->Args({D(DType::Q8_0), 1, 0})
    ->Args({D(DType::Q8_0), 1, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prefill)
    ->ArgNames({"dtype", "tokens"})
    ->Args({D(DType::F32), 512})
    ->Args({D(DType::BF16), 512})
    ->Args({D(DType::Q4_1), 512})
    ->Args({D(DType::BF16), 16})
    ->Args({D(DType::BF16), 8})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KvDotAxpy)
    ->ArgNames({"rows", "dtype"})
    ->Args({65536, D(DType::F16)})
    ->Args({65536, D(DType::BF16)})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

double cpu_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str());
  return 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const double mhz = cpu_mhz();
  // FMA lanes: 8 fp32 with AVX2, 16 with AVX-512 (2 FMA pipes assumed; flops per FMA = 2).
  const std::string isa = hg::cpu::cpu_isa_name();
  const int lanes = isa.rfind("avx512", 0) == 0 ? 16 : (isa == "avx2" ? 8 : 1);
  const double peak = cores * mhz * 1e-3 * 2 * lanes * 2;
  benchmark::AddCustomContext("cpu_isa", isa);
  benchmark::AddCustomContext("threads", std::to_string(bench_threads()));
  benchmark::AddCustomContext("fp32_peak_gflops", std::to_string(peak) + " (" + std::to_string(cores) +
                                                      " cores x " + std::to_string(mhz) + " MHz x 2 FMA x " +
                                                      std::to_string(lanes) + " lanes x 2)");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
