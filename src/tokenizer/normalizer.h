// Normalizers: rewrite the text of a segment before it is pre-tokenized (HF "normalizer").
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace hg::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};
using NormalizerPtr = std::unique_ptr<Normalizer>;

NormalizerPtr make_unicode_normalizer(NormalForm form);
// Prepends `prefix` to non-empty text (SentencePiece's dummy "▁" prefix).
NormalizerPtr make_prepend_normalizer(std::string prefix);
// Replaces every occurrence of pattern (a literal string or a regex) by content.
NormalizerPtr make_replace_normalizer(const std::string& pattern, bool literal, std::string content,
                                      const std::string& where);
NormalizerPtr make_lowercase_normalizer();
NormalizerPtr make_strip_normalizer(bool left, bool right);
NormalizerPtr make_sequence_normalizer(std::vector<NormalizerPtr> parts);

}  // namespace hg::tok
