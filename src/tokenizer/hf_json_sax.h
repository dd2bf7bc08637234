// Streaming parse of tokenizer.json: model.vocab and model.merges (hundreds of thousands of
// entries) go straight into flat vectors, everything else into an nlohmann DOM. Building a DOM for
// the big tables costs most of the load time of a 10 MB tokenizer.json.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_util.h"

namespace hg::tok {

struct BpeTables {
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;  // model.vocab in file order
  std::vector<std::pair<std::string, std::string>> merges;
};

// Returns the DOM with model.vocab = {} and model.merges = [] (their contents are in `tables`).
// Throws hg::Error naming `name` and the field on malformed input.
Json parse_tokenizer_json(std::string_view text, const std::string& name, BpeTables& tables);

}  // namespace hg::tok
