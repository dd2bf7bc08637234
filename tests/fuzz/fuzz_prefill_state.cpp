// libFuzzer target for the prefill state reader (`generate --load-state`): any byte string must
// either read into a state whose arrays have the sizes its header promises or raise hg::Error:
// never a read past the input, never an allocation larger than the input (every array is checked
// against the bytes left before it is allocated).
// Run: build-san/bin/fuzz_prefill_state -max_len=16384 build-san/corpus/fuzz_prefill_state
// tests/fuzz/corpus/fuzz_prefill_state
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "hybridgen/error.h"
#include "hybridgen/prefill_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const hg::PrefillState s = hg::read_prefill_state(in, size, "fuzz.hgstate");
    const size_t n = s.tokens.size(), kv = n * static_cast<size_t>(s.kv_dim);
    if (s.layers.size() != static_cast<size_t>(s.n_layers)) std::abort();
    if (!s.logits.empty() && s.logits.size() != static_cast<size_t>(s.vocab)) std::abort();
    for (const hg::PrefillState::Layer& l : s.layers)
      if (l.k.size() != kv || l.v.size() != kv || l.q.size() % static_cast<size_t>(s.q_dim) != 0) std::abort();
  } catch (const hg::Error&) {
  }
  return 0;
}
