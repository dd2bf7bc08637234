// Decode attention of the CPU device (Device::attention, one query row) over a SmolLM2-shaped KV
// cache: 30 layers x 3 kv heads x head_dim 64, 9 query heads, the whole context attended (the
// `full` policy's decode step). Each layer has its own cache, so one iteration streams
// 30 x 2 x 3 x depth x 64 values of K and V from DRAM, as a real decode step does; the counter
// GB/s is those bytes over the time. Compare with `build/bin/membw` (the read bandwidth).
//
//   bench_decode_attention [--benchmark_filter=...]   (threads: HG_BENCH_THREADS, default all cores)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "device/device.h"
#include "kernels/cpu/half.h"

namespace {

using hg::DType;

constexpr int kLayers = 30, kKvHeads = 3, kHeads = 9, kHeadDim = 64;

int bench_threads() {
  if (const char* env = std::getenv("HG_BENCH_THREADS")) return std::max(1, std::atoi(env));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void BM_DecodeAttention(benchmark::State& state) {
  const int64_t depth = state.range(0);
  const auto dt = static_cast<DType>(state.range(1));
  auto device = hg::make_cpu_device(bench_threads());
  const int64_t capacity = depth + 1;
  const size_t elems = static_cast<size_t>(kKvHeads * capacity * kHeadDim);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<uint16_t>> k(kLayers), v(kLayers);  // f16 / bf16 caches
  std::vector<hg::KvView> views(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    k[static_cast<size_t>(l)].resize(elems);
    v[static_cast<size_t>(l)].resize(elems);
    for (size_t i = 0; i < elems; ++i) {
      const float a = u(rng), b = u(rng);
      k[static_cast<size_t>(l)][i] = dt == DType::F16 ? hg::cpu::fp32_to_f16(a) : hg::cpu::fp32_to_bf16(a);
      v[static_cast<size_t>(l)][i] = dt == DType::F16 ? hg::cpu::fp32_to_f16(b) : hg::cpu::fp32_to_bf16(b);
    }
    views[static_cast<size_t>(l)] = hg::KvView{
        dt, k[static_cast<size_t>(l)].data(), v[static_cast<size_t>(l)].data(), capacity, kKvHeads, kHeadDim};
  }
  std::vector<float> q(kHeads * kHeadDim), out(q.size());
  for (auto& x : q) x = u(rng);
  for (auto _ : state) {
    for (int l = 0; l < kLayers; ++l)
      device->attention(q.data(), 1, kHeads, views[static_cast<size_t>(l)], static_cast<int>(depth), 0.125f,
                        out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = 2.0 * kLayers * kKvHeads * static_cast<double>(depth + 1) * kHeadDim * 2;
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["ms/step"] = benchmark::Counter(1e-3 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"depth", "dtype"})
    ->Args({4096, static_cast<int64_t>(DType::BF16)})
    ->Args({1024, static_cast<int64_t>(DType::BF16)})
    ->Args({4096, static_cast<int64_t>(DType::F16)})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("threads", std::to_string(bench_threads()));
  benchmark::AddCustomContext("shape", "SmolLM2: 30 layers x 3 kv heads x 64, 9 query heads");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
