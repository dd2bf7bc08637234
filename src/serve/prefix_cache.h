// The server's prefix cache: prefill states (hybridgen/prefill_state.h) of prompts it has run, so
// that a prompt beginning with one of them (a shared system prompt, a conversation's earlier turns,
// a document asked about again) places those tokens instead of prefilling them.
//
// In memory the states are bounded by bytes and evicted least recently used first. With a
// directory (`serve --state-cache DIR`) every state is also written there (eval/prefill_cache.h's
// files, keyed by the model, the device and the prompt), an evicted state stays findable and is
// read back from its file, and the files a previous server left are indexed at start (each read
// once, for its tokens; its K/V are dropped until a prompt needs them). Used by the batcher's
// thread only: no lock.
#pragma once
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "eval/prefill_cache.h"
#include "hybridgen/prefill_state.h"

namespace hg::serve {

class PrefixCache {
 public:
  // max_bytes: the states held in memory (0: none; with `dir`, every hit is then read from disk).
  // fingerprint and device: what the states' files are keyed by (the model; where and in what
  // chunks the prefill ran, eval::prefill_computed_on).
  PrefixCache(size_t max_bytes, const std::filesystem::path& dir, std::string fingerprint, std::string device);

  bool enabled() const { return max_bytes_ > 0 || disk_.has_value(); }
  struct Hit {
    std::shared_ptr<const PrefillState> state;
    int tokens = 0;  // the prompt's first tokens it holds
  };
  // The state sharing the longest prefix with `prompt`, when that prefix has at least min_tokens.
  std::optional<Hit> find(std::span<const int32_t> prompt, int min_tokens);
  // Keeps the state of a prompt just prefilled (replacing one of the same tokens).
  void insert(PrefillState state);
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::shared_ptr<const PrefillState> state;  // null when only its file holds it
    size_t bytes = 0;
    bool on_disk = false;
  };
  void index_directory();
  void evict();

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::optional<eval::PrefillCache> disk_;
  std::string fingerprint_, device_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace hg::serve
