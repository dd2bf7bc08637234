#include "serve/prefix_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hybridgen/error.h"

namespace hg::serve {

namespace {

// The files of a previous server indexed at start, newest first: a bound on the time it takes.
constexpr size_t kMaxIndexedFiles = 256;

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<size_t>(ia - a.begin());
}

}  // namespace

PrefixCache::PrefixCache(size_t max_bytes, const std::filesystem::path& dir, std::string fingerprint,
                         std::string device)
    : max_bytes_(max_bytes), fingerprint_(std::move(fingerprint)), device_(std::move(device)) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("--state-cache " + dir.string() + ": " + ec.message());
  disk_.emplace(dir);
  index_directory();
}

// The prompts of the files in the directory that this model and device made.
void PrefixCache::index_directory() {
  std::vector<std::filesystem::directory_entry> files;
  for (const auto& f : std::filesystem::directory_iterator(disk_->dir()))
    if (f.is_regular_file() && f.path().extension() == ".hgstate") files.push_back(f);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.last_write_time() > b.last_write_time(); });
  if (files.size() > kMaxIndexedFiles) files.resize(kMaxIndexedFiles);
  for (const auto& f : files) {
    try {
      PrefillState s = load_prefill_state(f.path());
      if (s.fingerprint != fingerprint_ || disk_->path_of(fingerprint_, device_, s.tokens) != f.path()) continue;
      entries_.push_back(Entry{std::move(s.tokens), nullptr, 0, true});
    } catch (const Error& e) {
      spdlog::warn("--state-cache: skipping {}: {}", f.path().string(), e.what());
    }
  }
  spdlog::info("--state-cache {}: {} prefill states of this model", disk_->dir().string(), entries_.size());
}

std::optional<PrefixCache::Hit> PrefixCache::find(std::span<const int32_t> prompt, int min_tokens) {
  auto best = entries_.end();
  size_t best_len = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const size_t n = common_prefix(it->tokens, prompt);
    if (n > best_len) {
      best_len = n;
      best = it;
    }
  }
  if (best == entries_.end() || best_len < static_cast<size_t>(std::max(min_tokens, 1))) return std::nullopt;
  if (!best->state) {  // only on disk: read it back (into memory when the budget allows)
    auto state = disk_->find(fingerprint_, device_, best->tokens);
    if (!state) {
      entries_.erase(best);
      return std::nullopt;
    }
    best->state = std::make_shared<const PrefillState>(std::move(*state));
    best->bytes = best->state->bytes();
    bytes_ += best->bytes;
  }
  entries_.splice(entries_.begin(), entries_, best);
  Hit hit{entries_.front().state, static_cast<int>(best_len)};
  evict();
  return hit;
}

void PrefixCache::insert(PrefillState state) {
  if (!enabled() || state.tokens.empty()) return;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->tokens == state.tokens) {
      bytes_ -= it->bytes;
      entries_.erase(it);
      break;
    }
  }
  bool on_disk = false;
  if (disk_) {
    try {
      disk_->store(state, device_);
      on_disk = true;
    } catch (const Error& e) {
      spdlog::warn("--state-cache: {}", e.what());
    }
  }
  Entry entry{state.tokens, nullptr, 0, on_disk};
  if (max_bytes_ > 0) {
    entry.bytes = state.bytes();
    entry.state = std::make_shared<const PrefillState>(std::move(state));
  }
  bytes_ += entry.bytes;
  entries_.push_front(std::move(entry));
  evict();
}

// Least recently used first: past the budget a state leaves memory; one that is not on disk is
// forgotten. The front (the one just used) stays, even alone past the budget, until the next.
void PrefixCache::evict() {
  if (entries_.empty()) return;
  for (auto it = std::prev(entries_.end()); bytes_ > max_bytes_ && it != entries_.begin();) {
    auto victim = it--;
    if (!victim->state) continue;
    bytes_ -= victim->bytes;
    victim->bytes = 0;
    victim->state.reset();
    if (!victim->on_disk) entries_.erase(victim);
  }
  if (bytes_ > max_bytes_ && entries_.front().state) {
    // The newest alone is over the budget: keep it only where the disk holds it.
    Entry& front = entries_.front();
    bytes_ -= front.bytes;
    front.bytes = 0;
    front.state.reset();
    if (!front.on_disk) entries_.pop_front();
  }
}

}  // namespace hg::serve
