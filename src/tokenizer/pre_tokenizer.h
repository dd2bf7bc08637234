// Pre-tokenizers: split a normalized segment into the words the model encodes one at a time
// (HF "pre_tokenizer"). Words are byte strings; the ByteLevel pre-tokenizer does not rewrite them
// into GPT-2's printable alphabet, the byte-level model works on raw bytes instead (BpeModel, src/tokenizer/model.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace hg::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `words` by their splits. first_segment: the words start at offset 0 of the input
  // (Metaspace's prepend_scheme "first" only adds its prefix there).
  virtual void split(std::vector<std::string>& words, bool first_segment) const = 0;
  // True when the model should see raw bytes mapped through GPT-2's byte alphabet.
  virtual bool byte_level() const { return false; }
};
using PreTokenizerPtr = std::unique_ptr<PreTokenizer>;

// The pattern GPT-2 (and HF's ByteLevel use_regex) splits on.
extern const char* const kGpt2Pattern;

PreTokenizerPtr make_split_pre_tokenizer(const std::string& pattern, bool literal,
                                         SplitBehavior behavior, bool invert, const std::string& where);
PreTokenizerPtr make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);
enum class PrependScheme { Always, Never, First };
PreTokenizerPtr make_metaspace_pre_tokenizer(std::string replacement, PrependScheme scheme, bool split);
PreTokenizerPtr make_digits_pre_tokenizer(bool individual_digits);
PreTokenizerPtr make_whitespace_pre_tokenizer();        // \w+|[^\w\s]+
PreTokenizerPtr make_whitespace_split_pre_tokenizer();  // split on whitespace, drop it
// Throws hg::Error naming `where` when a ByteLevel part is followed by another part: words would
// then have to be rewritten into the byte alphabet mid-pipeline, which we do not do.
PreTokenizerPtr make_sequence_pre_tokenizer(std::vector<PreTokenizerPtr> parts, const std::string& where);

}  // namespace hg::tok
