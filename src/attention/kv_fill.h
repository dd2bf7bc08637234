// Filling a sequence's KV cache without a prefill: the rows a prefill of that length would store,
// from a source, placed by the attention stage's own begin_step / store / end_step, no attention
// computed. Two sources:
//  - seeded random rows (`bench --depth-fill random`): decode at a depth needs a KV cache that
//    long, not the quadratic prefill that would make it (hours at 32K on 2 cores). The rows are a
//    function of (seed, layer, position) only, so every policy gets the same context. What decode
//    costs depends on the cache's size and layout, not on its values — except what a selection
//    picks, which random keys make uniform; such numbers measure speed, never quality;
//  - the rows a real prefill recorded (hybridgen/prefill_state.h): one prefill shared by every
//    policy whose prefill is exact attention, and `generate --load-state`.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "attention/layer_attention.h"
#include "device/device.h"

namespace hg {

// k, v [n][kv_dim] fp32 for positions [pos0, pos0 + n) of `layer`: values of mean 0 and variance 1.
void random_kv_rows(uint64_t seed, int layer, int64_t pos0, int64_t n, int kv_dim, float* k, float* v);
KvRowSource random_kv_source(uint64_t seed, int kv_dim);

// Drives the fill in chunks of rows: for each chunk, begin(rows); store(layer, n, k_dev, v_dev,
// k_host, v_host) per layer, with the chunk's rows on the device and on the host; end(rows).
class KvFill {
 public:
  static constexpr int kChunk = 512;
  // chunk: rows per chunk, at most kChunk (the heavy-hitter policies fill a window at a time, so
  // that every token leaves the window through its retainer, never skipping it).
  KvFill(Device& device, int kv_dim, int chunk = kChunk);
  ~KvFill();
  KvFill(const KvFill&) = delete;
  KvFill& operator=(const KvFill&) = delete;

  template <typename Begin, typename Store, typename End>
  void run(int seq, int n_tokens, const KvRowSource& source, int n_layers, Begin&& begin, Store&& store, End&& end) {
    for (int p0 = 0; p0 < n_tokens; p0 += chunk_) {
      const int n = std::min(chunk_, n_tokens - p0);
      rows_.clear();
      for (int p = p0; p < p0 + n; ++p) rows_.push_back({seq, p, 0});
      begin(rows_);
      for (int layer = 0; layer < n_layers; ++layer) {
        source(layer, p0, n, k_host_.data(), v_host_.data());
        const size_t bytes = sizeof(float) * static_cast<size_t>(n) * kv_dim_;
        device_.copy_to_device(k_dev_, k_host_.data(), bytes);
        device_.copy_to_device(v_dev_, v_host_.data(), bytes);
        store(layer, n, static_cast<const float*>(k_dev_), static_cast<const float*>(v_dev_), k_host_.data(),
              v_host_.data());
      }
      end(rows_);
    }
  }

 private:
  Device& device_;
  int kv_dim_;
  int chunk_;
  std::vector<TokenRow> rows_;
  std::vector<float> k_host_, v_host_;  // [kChunk][kv_dim]
  void* k_dev_ = nullptr;
  void* v_dev_ = nullptr;
};

}  // namespace hg
