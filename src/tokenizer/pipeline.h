// PipelineTokenizer: the one hg::Tokenizer implementation. Every format (tokenizer.json, GPT-2
// vocab.json + merges.txt, GGUF) is loaded into the same stages HF uses:
//   added tokens -> normalizer -> pre-tokenizer -> model -> post-processor   (encode)
//   pieces -> decoder                                                          (decode)
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hybridgen/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/decoder.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace hg::tok {

struct PipelineParts {
  std::vector<std::string> pieces;  // id -> piece as stored ("" for ids nobody defines)
  std::vector<AddedToken> added;    // ids must be < pieces.size()
  NormalizerPtr normalizer;         // each may be null (the stage is skipped)
  PreTokenizerPtr pre_tokenizer;
  std::unique_ptr<Model> model;     // required
  DecoderPtr decoder;
  // What the post-processor adds when encode(..., add_special = true).
  std::vector<int32_t> prefix, suffix;
  std::optional<int32_t> bos, eos;
  std::string chat_template;
  std::string source;  // the file, for error messages
};

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(PipelineParts parts);

// The id of `piece` in an id -> piece table, by a scan: for the handful of lookups a loader makes
// (unk, BOS/EOS, post-processor tokens) before any index exists. Empty pieces never match.
std::optional<int32_t> find_piece(const std::vector<std::string>& pieces, const std::string& piece);

}  // namespace hg::tok
