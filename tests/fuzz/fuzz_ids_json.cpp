// libFuzzer target for `--ids`, `--ids-file` and `tokenize --decode` text: a JSON array of token
// ids in [0, 2^31 - 1] or hg::Error; never crash, never a silently wrapped id.
// Run: build-san/bin/fuzz_ids_json -max_len=1024 build-san/corpus/fuzz_ids_json tests/fuzz/corpus/fuzz_ids_json
#include <cstddef>
#include <cstdint>
#include <string>

#include "hybridgen/error.h"
#include "util/token_ids.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (int32_t id : hg::parse_ids(text, "--ids"))
      if (id < 0) __builtin_trap();
  } catch (const hg::Error&) {
  }
  return 0;
}
