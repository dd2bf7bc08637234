// libFuzzer target for config.json: any text must give a spec that passes validate_spec (every
// size positive and bounded, heads dividing) or raise hg::Error; never crash or overflow.
// Run: build-san/bin/fuzz_hf_config -max_len=4096 build-san/corpus/fuzz_hf_config tests/fuzz/corpus/fuzz_hf_config
#include <cstddef>
#include <cstdint>
#include <string>

#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const hg::ModelSpec s = hg::spec_from_hf_config_text(text, "fuzz/config.json");
    hg::validate_spec(s, "fuzz/config.json");  // what the loader promises the rest of the engine
    (void)hg::count_params(s);
  } catch (const hg::Error&) {
  }
  return 0;
}
