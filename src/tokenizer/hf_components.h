// Builds the normalizer, pre-tokenizer, decoder and post-processor stages from their
// tokenizer.json objects. An unknown or unsupported type is an hg::Error naming it: output that
// silently differs from the reference tokenizer is worse than no output.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/decoder.h"
#include "tokenizer/json_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace hg::tok {

NormalizerPtr parse_normalizer(const Json& j, const std::string& where);
PreTokenizerPtr parse_pre_tokenizer(const Json& j, const std::string& where);
DecoderPtr parse_decoder(const Json& j, const std::string& where);

// The ids a post-processor puts around a single sequence when special tokens are added.
struct PostProcess {
  std::vector<int32_t> prefix, suffix;
};
using TokenLookup = std::function<std::optional<int32_t>(const std::string&)>;
PostProcess parse_post_processor(const Json& j, const TokenLookup& lookup, const std::string& where);

}  // namespace hg::tok
