// libFuzzer target: tokenizer.json loading. Any input must either load or throw hg::Error; a loaded
// tokenizer must encode and decode a fixed text without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "tokenizer/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    auto tok = hg::tok::load_hf_json(json, "fuzz.json", {});
    auto ids = tok->encode("Hello, world! 123 \xE6\x9D\xB1 <s>  x\xFF", true);
    (void)tok->decode(ids);
    (void)tok->decode_raw(ids, true);
  } catch (const hg::Error&) {
  }
  return 0;
}
