// bench_mem: streaming-read bandwidth of a K-like host arena under each KV placement policy.
// The host attention workers stream every key of a layer per decode step, so this is the number
// semantic-aware placement is about: keys on local DRAM should read at local bandwidth, keys
// interleaved onto a far (CXL) node should not. On a single-node machine every policy resolves
// to the same node and the results must agree within noise.
//
//   bench_mem [--benchmark_filter=...]
//   HG_BENCH_MEM_MIB   arena size (default 1024: 1 GiB of fp32 keys, far beyond the LLC)
//   HG_BENCH_THREADS   reader threads (default 2), pinned to the CPUs of the workers' node
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "mem/arena.h"
#include "mem/placement.h"
#include "mem/report.h"
#include "mem/topology.h"
#include "util/thread_pool.h"

namespace {

using namespace hg::mem;

constexpr size_t kChunkBytes = size_t{1} << 20;  // one parallel_for unit

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::max<size_t>(1, std::strtoull(v, nullptr, 10)) : fallback;
}

// Everything the benchmarks share: one arena alive at a time, so a 1 GiB run needs 1 GiB.
struct Bench {
  Topology topology = Topology::discover();
  NumaSupport support;
  Placement placement;
  hg::ThreadPool pool;
  size_t bytes;
  std::string current;
  std::unique_ptr<Arena> arena;
  std::string label;

  Bench()
      : support(NumaSupport::probe(topology.memory_nodes().front())),
        placement(resolve_placement(topology, {})),
        pool(static_cast<int>(env_size("HG_BENCH_THREADS", 2)), node_cpus(topology, placement.worker_node)),
        bytes(env_size("HG_BENCH_MEM_MIB", 1024) << 20) {}

  MemPolicy policy_named(const std::string& name) const {
    if (name == "local") return MemPolicy::bind(placement.k_node);
    if (name == "interleave") return MemPolicy::interleave(topology.memory_nodes());
    if (name == "v-node") return MemPolicy::bind(placement.v_node);
    return {};  // first-touch: what plain malloc gives
  }

  void prepare(const std::string& name) {
    if (current == name) return;
    arena.reset();  // free the previous policy's arena before committing the next
    ArenaOptions o;
    o.name = "K";
    o.reserve_bytes = bytes;
    o.policy = policy_named(name);
    arena = std::make_unique<Arena>(topology, o);
    arena->grow_to(bytes);
    std::byte* base = arena->data();
    pool.parallel_for(static_cast<int64_t>(bytes / kChunkBytes), [base](int64_t b, int64_t e, int) {
      auto* w = reinterpret_cast<uint64_t*>(base + b * kChunkBytes);
      const size_t n = static_cast<size_t>(e - b) * kChunkBytes / sizeof(uint64_t);
      for (size_t i = 0; i < n; ++i) w[i] = i * 0x9E3779B97F4A7C15ull;
    });
    const ArenaCheck c = verify_arena(*arena);
    std::string nodes;
    for (const auto& [node, b] : c.bytes_per_node) {
      nodes += nodes.empty() ? "n" : " n";
      nodes += std::to_string(node);
      nodes += "=";
      nodes += format_bytes(b);
    }
    label = o.policy.describe() + (c.matched() ? " ok " : " MISPLACED ") + nodes;
    current = name;
  }

  uint64_t read_all() {
    std::vector<uint64_t> partial(static_cast<size_t>(pool.size()), 0);
    const std::byte* base = arena->data();
    pool.parallel_for(static_cast<int64_t>(bytes / kChunkBytes), [&](int64_t b, int64_t e, int t) {
      const auto* w = reinterpret_cast<const uint64_t*>(base + b * kChunkBytes);
      const size_t n = static_cast<size_t>(e - b) * kChunkBytes / sizeof(uint64_t);
      // Four independent sums keep the loop bound by loads, not by add latency.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = 0; i < n; i += 4) {
        s0 += w[i];
        s1 += w[i + 1];
        s2 += w[i + 2];
        s3 += w[i + 3];
      }
      partial[static_cast<size_t>(t)] += s0 ^ s1 ^ s2 ^ s3;
    });
    uint64_t sum = 0;
    for (uint64_t p : partial) sum += p;
    return sum;
  }
};

void stream_read(benchmark::State& state, Bench& bench, const std::string& name) {
  bench.prepare(name);
  for (auto _ : state) benchmark::DoNotOptimize(bench.read_all());
  const double total = static_cast<double>(bench.bytes) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(total));
  state.counters["GB/s"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(bench.label);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    Bench bench;
    benchmark::AddCustomContext(
        "numa_nodes", std::to_string(bench.topology.nodes().size()) + " (" + bench.topology.node_list() + ")");
    benchmark::AddCustomContext("kv_placement", bench.placement.describe());
    benchmark::AddCustomContext("numa_syscalls", bench.support.describe());
    benchmark::AddCustomContext(
        "arena", format_bytes(bench.bytes) + ", " + std::to_string(bench.pool.size()) + " reader threads");
    std::vector<std::string> names = {"first-touch", "local", "interleave"};
    if (bench.placement.v_node != bench.placement.k_node) names.push_back("v-node");
    for (const auto& name : names) {
      benchmark::RegisterBenchmark(("stream_read/" + name).c_str(),
                                   [&bench, name](benchmark::State& s) { stream_read(s, bench, name); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
    benchmark::RunSpecifiedBenchmarks();
  } catch (const hg::Error& e) {
    std::fprintf(stderr, "bench_mem: %s\n", e.what());
    return 1;
  }
  benchmark::Shutdown();
  return 0;
}
