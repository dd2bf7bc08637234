// Prefill states kept on disk between runs (`--prefill-cache DIR` of the eval tasks that prefill a
// prompt: fidelity --tail, passkey, ruler). shared_prefill makes one prefill serve every policy in
// one process; a sweep runs each point in a process of its own, so at 32K the same prompt would be
// prefilled once per point, minutes each. With a cache the first point records the state
// (hybridgen/prefill_state.h) and the others load it.
//
// An entry is keyed by the model's fingerprint, what computed it (the device: cpu (avx512_bf16),
// cuda: another kernel sums in another order; and the prefill chunk, --ubatch: a prompt's last,
// short chunk may take another GEMM path) and the prompt's tokens; the model and the prompt are
// checked again when it is read: a stale or colliding file is a miss, recomputed and written over. An
// entry that cannot be read (truncated, another format version) is a miss with a warning. Files
// are written whole (save_prefill_state renames a finished file into place), so concurrent runs
// sharing a directory see an entry whole or not at all. Nothing evicts: a 32K state of a 0.5B
// model is ~1 GB (fp32 K/V); remove the directory to free it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "hybridgen/prefill_state.h"

namespace hg::eval {

class PrefillCache {
 public:
  explicit PrefillCache(std::filesystem::path dir);

  // The state recorded for this model, device and prompt, if the cache holds one.
  std::optional<PrefillState> find(const std::string& fingerprint, const std::string& device,
                                   std::span<const int32_t> ids) const;
  // Keeps `state` (its tokens are the prompt) for `device`; hg::Error when it cannot be written.
  void store(const PrefillState& state, const std::string& device) const;
  // The entry's file: DIR/<16 hex digits>.hgstate.
  std::filesystem::path path_of(const std::string& fingerprint, const std::string& device,
                                std::span<const int32_t> ids) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace hg::eval
