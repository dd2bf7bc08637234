// Token ids given as JSON text (`--ids "[1, 2, 3]"`, `--ids-file F`): untrusted input.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hg {

// Parses a JSON array of token ids; each must be an integer in [0, 2^31 - 1] (the vocabulary
// bound is checked where the model is known). `what` names the source in errors.
std::vector<int32_t> parse_ids(const std::string& json, const std::string& what);

}  // namespace hg
