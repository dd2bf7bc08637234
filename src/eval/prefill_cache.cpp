#include "eval/prefill_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "hybridgen/error.h"
#include "util/hash.h"

namespace hg::eval {

PrefillCache::PrefillCache(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw Error("--prefill-cache: cannot make the directory " + dir_.string() + (ec ? ": " + ec.message() : ""));
}

std::filesystem::path PrefillCache::path_of(const std::string& fingerprint, const std::string& device,
                                            std::span<const int32_t> ids) const {
  Fnv1a h;
  h.add(fingerprint);
  h.add(device);
  h.add(static_cast<int64_t>(ids.size()));
  h.add(ids.data(), ids.size_bytes());
  return dir_ / (h.hex() + ".hgstate");
}

std::optional<PrefillState> PrefillCache::find(const std::string& fingerprint, const std::string& device,
                                               std::span<const int32_t> ids) const {
  const std::filesystem::path path = path_of(fingerprint, device, ids);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  PrefillState s;
  try {
    s = load_prefill_state(path);
  } catch (const Error& e) {
    spdlog::warn("prefill cache: {}; prefilling again and writing the entry anew", e.what());
    return std::nullopt;
  }
  if (s.fingerprint != fingerprint || !std::equal(s.tokens.begin(), s.tokens.end(), ids.begin(), ids.end()) ||
      s.logits.empty()) {
    spdlog::warn("prefill cache: {} holds another model's or another prompt's state; prefilling again", path.string());
    return std::nullopt;
  }
  return s;
}

void PrefillCache::store(const PrefillState& state, const std::string& device) const {
  save_prefill_state(state, path_of(state.fingerprint, device, state.tokens));
}

}  // namespace hg::eval
