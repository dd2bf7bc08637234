// membw: streaming read bandwidth of this machine, the yardstick for the GEMV and KV-cache
// benchmarks (bench/bench_matmul.cpp reports achieved GB/s against it).
//
// Each thread sums its slice of a buffer much larger than the last-level cache with AVX2 loads
// (8 independent accumulators, so the loop is bound by memory, not by add latency); the sums are
// combined and printed so the compiler cannot drop the loads. The buffer is written once first
// so its pages are really backed. Reports the best of several runs.
//
//   membw [-t THREADS] [-m MIB] [-r RUNS] [--json]
#include <immintrin.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  size_t mib = 1024;
  int runs = 5;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "membw: %s\nusage: membw [-t THREADS] [-m MIB] [-r RUNS] [--json]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> long {
      if (i + 1 >= argc) usage((std::string(name) + " needs a value").c_str());
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0) usage((std::string("bad value for ") + name).c_str());
      return v;
    };
    if (a == "-t") o.threads = static_cast<int>(value("-t"));
    else if (a == "-m") o.mib = static_cast<size_t>(value("-m"));
    else if (a == "-r") o.runs = static_cast<int>(value("-r"));
    else if (a == "--json") o.json = true;
    else usage(("unknown argument " + a).c_str());
  }
  return o;
}

// Sum of floats in [p, p + n), n a multiple of 64.
__m256 sum_slice(const float* p, size_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (size_t i = 0; i < n; i += 64)
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_load_ps(p + i + 8 * k));
  for (int k = 1; k < 8; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  return acc[0];
}

// Best GB/s over `runs` passes of `threads` threads each reading an equal slice. Each thread
// timestamps its own slice and a pass lasts from the first start to the last end, so a main
// thread descheduled between the barriers cannot shrink the measured time.
double measure(const float* buf, size_t n_floats, int threads, int runs, float& checksum) {
  using Clock = std::chrono::steady_clock;
  const size_t slice = n_floats / static_cast<size_t>(threads) / 64 * 64;
  std::vector<float> sums(static_cast<size_t>(threads));
  std::vector<Clock::time_point> begin(static_cast<size_t>(threads)), end(begin.size());
  std::barrier start(threads + 1), done(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const auto i = static_cast<size_t>(t);
      for (int r = 0; r < runs; ++r) {
        start.arrive_and_wait();
        begin[i] = Clock::now();
        const __m256 s = sum_slice(buf + i * slice, slice);
        end[i] = Clock::now();
        float lanes[8];
        _mm256_storeu_ps(lanes, s);
        for (float v : lanes) sums[i] += v;
        done.arrive_and_wait();
      }
    });
  double best = 0.0;
  for (int r = 0; r < runs; ++r) {
    start.arrive_and_wait();
    done.arrive_and_wait();
    const auto first = *std::min_element(begin.begin(), begin.end());
    const auto last = *std::max_element(end.begin(), end.end());
    const double s = std::chrono::duration<double>(last - first).count();
    best = std::max(best, static_cast<double>(slice) * threads * sizeof(float) / s / 1e9);
  }
  for (auto& th : pool) th.join();
  for (float v : sums) checksum += v;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const size_t bytes = o.mib << 20;
  auto* buf = static_cast<float*>(std::aligned_alloc(4096, bytes));
  if (!buf) usage("cannot allocate the buffer");
  const size_t n = bytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023) * 1e-3f;

  float checksum = 0.0f;
  const double multi = measure(buf, n, o.threads, o.runs, checksum);
  const double single = measure(buf, n, 1, o.runs, checksum);
  std::free(buf);
  if (o.json) {
    std::printf(
        "{\"read_gbps\": %.2f, \"read_gbps_single_thread\": %.2f, \"threads\": %d, "
        "\"buffer_mib\": %zu, \"runs\": %d, \"checksum\": %g}\n",
        multi, single, o.threads, o.mib, o.runs, static_cast<double>(checksum));
  } else {
    std::printf("read bandwidth: %.1f GB/s (threads=%d, buffer=%zu MiB)\n", multi, o.threads, o.mib);
    std::printf("read bandwidth: %.1f GB/s (threads=1, buffer=%zu MiB)\n", single, o.mib);
    std::printf("(checksum %g)\n", static_cast<double>(checksum));
  }
  return 0;
}
