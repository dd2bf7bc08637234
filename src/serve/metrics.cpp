#include "serve/metrics.h"

#include <cstdio>

namespace hg::serve {

namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void Metrics::request_done(int status) {
  std::lock_guard lock(mutex_);
  ++requests_[status];
}

void Metrics::tokens(int64_t prompt, int64_t cached, int64_t completion) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt;
  cached_tokens_ += cached;
  completion_tokens_ += completion;
}

void Metrics::first_token(double seconds) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < kTtftBuckets.size(); ++i)
    if (seconds <= kTtftBuckets[i]) ++ttft_counts_[i];
  ++ttft_count_;
  ttft_sum_ += seconds;
}

void Metrics::gauges(const Gauges& g) {
  std::lock_guard lock(mutex_);
  gauges_ = g;
}

Metrics::Gauges Metrics::current() const {
  std::lock_guard lock(mutex_);
  return gauges_;
}

void Metrics::decoded(int64_t tokens, std::chrono::steady_clock::time_point when) {
  std::lock_guard lock(mutex_);
  recent_.emplace_back(when, tokens);
  while (!recent_.empty() && recent_.front().first < when - kRateWindow) recent_.pop_front();
}

// Tokens of the decode steps in the last kRateWindow over the time they span (0 when idle).
double Metrics::decode_rate_locked(std::chrono::steady_clock::time_point now) const {
  int64_t tokens = 0;
  auto first = now;
  for (const auto& [when, n] : recent_) {
    if (when < now - kRateWindow) continue;
    tokens += n;
    first = std::min(first, when);
  }
  const double span = std::chrono::duration<double>(now - first).count();
  return span > 0 ? static_cast<double>(tokens) / span : 0.0;
}

std::string Metrics::prometheus_text() const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "hybridgen_requests_total", "counter", "HTTP requests answered, by status code.");
  for (const auto& [status, n] : requests_)
    out += "hybridgen_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  header(out, "hybridgen_prompt_tokens_total", "counter", "Prompt tokens of the requests run.");
  out += "hybridgen_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  header(out, "hybridgen_prompt_tokens_cached_total", "counter", "Prompt tokens placed from the prefix cache, not prefilled.");
  out += "hybridgen_prompt_tokens_cached_total " + std::to_string(cached_tokens_) + "\n";
  header(out, "hybridgen_completion_tokens_total", "counter", "Tokens generated.");
  out += "hybridgen_completion_tokens_total " + std::to_string(completion_tokens_) + "\n";
  header(out, "hybridgen_queue_depth", "gauge", "Requests waiting for a sequence slot.");
  out += "hybridgen_queue_depth " + std::to_string(gauges_.queued) + "\n";
  header(out, "hybridgen_running_sequences", "gauge", "Sequences prefilling or decoding.");
  out += "hybridgen_running_sequences " + std::to_string(gauges_.running) + "\n";
  header(out, "hybridgen_decode_tokens_per_second", "gauge", "Tokens decoded per second over the last 10 s, all sequences.");
  out += "hybridgen_decode_tokens_per_second " + number(decode_rate_locked(std::chrono::steady_clock::now())) + "\n";
  header(out, "hybridgen_time_to_first_token_seconds", "histogram", "From a request's arrival to its first token.");
  for (size_t i = 0; i < kTtftBuckets.size(); ++i)
    out += "hybridgen_time_to_first_token_seconds_bucket{le=\"" + number(kTtftBuckets[i]) + "\"} " +
           std::to_string(ttft_counts_[i]) + "\n";
  out += "hybridgen_time_to_first_token_seconds_bucket{le=\"+Inf\"} " + std::to_string(ttft_count_) + "\n";
  out += "hybridgen_time_to_first_token_seconds_sum " + number(ttft_sum_) + "\n";
  out += "hybridgen_time_to_first_token_seconds_count " + std::to_string(ttft_count_) + "\n";
  header(out, "hybridgen_kv_bytes", "gauge", "K and V bytes the running sequences hold, by memory.");
  out += "hybridgen_kv_bytes{memory=\"device\"} " + std::to_string(gauges_.kv_device_bytes) + "\n";
  out += "hybridgen_kv_bytes{memory=\"host\"} " + std::to_string(gauges_.kv_host_bytes) + "\n";
  header(out, "hybridgen_prefix_cache_bytes", "gauge", "Bytes of the prefill states the prefix cache holds in memory.");
  out += "hybridgen_prefix_cache_bytes " + std::to_string(gauges_.prefix_cache_bytes) + "\n";
  return out;
}

}  // namespace hg::serve
