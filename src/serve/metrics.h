// What `GET /metrics` reports, in Prometheus' text exposition format: requests by HTTP status,
// prompt and completion tokens, the queue, the sequences running, decode tokens/s, time to first
// token (a histogram), and the KV bytes held on the device and on the host. The HTTP threads and
// the batcher's thread update it; every member is guarded by one mutex.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace hg::serve {

class Metrics {
 public:
  void request_done(int status);
  void tokens(int64_t prompt, int64_t cached, int64_t completion);
  void first_token(double seconds);
  // The batcher after each of its steps: what it holds now, and the tokens a decode step made.
  struct Gauges {
    int64_t queued = 0, running = 0, kv_device_bytes = 0, kv_host_bytes = 0, prefix_cache_bytes = 0;
  };
  void gauges(const Gauges& g);
  void decoded(int64_t tokens, std::chrono::steady_clock::time_point when);
  Gauges current() const;
  std::string prometheus_text() const;

  static constexpr std::array<double, 10> kTtftBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120};

 private:
  double decode_rate_locked(std::chrono::steady_clock::time_point now) const;

  mutable std::mutex mutex_;
  std::map<int, int64_t> requests_;  // by HTTP status
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  std::array<int64_t, kTtftBuckets.size()> ttft_counts_{};
  int64_t ttft_count_ = 0;
  double ttft_sum_ = 0;
  Gauges gauges_;
  // Decode steps of the last kRateWindow: (when, tokens), for the tokens/s gauge.
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;
  static constexpr std::chrono::seconds kRateWindow{10};
};

}  // namespace hg::serve
