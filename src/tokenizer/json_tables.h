// Fast parse of tokenizer.json's big tables. model.vocab and model.merges (hundreds of thousands
// of entries, nearly all of an 11 MB file) are read by a small scanner straight into flat
// vectors; everything else, a few hundred KB at most, is handed to nlohmann as a DOM with those two
// values emptied. A DOM (or SAX events) for the big tables cost most of the load time.
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

// A JSON object {piece: id, ...} (GPT-2's vocab.json) into `out`, in file order.
void parse_vocab_object(std::string_view text, const std::string& name,
                        std::vector<std::pair<std::string, int64_t>>& out);

}  // namespace hg::tok
