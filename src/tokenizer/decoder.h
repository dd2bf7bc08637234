// Decoders: turn the pieces of a token sequence back into text (HF "decoder"), as a chain of
// steps over the list of pieces.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace hg::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // raw: keep bytes that are not valid UTF-8 as they are (for streaming, which must see a
  // character's first bytes before its last); otherwise replace them as HF does.
  virtual void decode_chain(std::vector<std::string>& pieces, bool raw) const = 0;
  // True for exactly GPT-2's byte-level decoder, which has a per-token fast path.
  virtual bool is_byte_level() const { return false; }
};
using DecoderPtr = std::unique_ptr<Decoder>;

DecoderPtr make_byte_level_decoder();
// Replaces `pattern` (a literal string; HF decoders only use String patterns) by content.
DecoderPtr make_replace_decoder(std::string pattern, std::string content);
DecoderPtr make_byte_fallback_decoder();
DecoderPtr make_fuse_decoder();
// Removes up to `start` leading and `stop` trailing occurrences of `content` from each piece.
DecoderPtr make_strip_decoder(std::string content, size_t start, size_t stop);
// prepend: the pre-tokenizer added a replacement char in front, so the first piece loses it.
DecoderPtr make_metaspace_decoder(std::string replacement, bool prepend);
DecoderPtr make_sequence_decoder(std::vector<DecoderPtr> parts);

// The bytes a byte-level piece stands for (HF: a piece with a character outside GPT-2's byte
// alphabet is kept as its UTF-8 text).
std::string byte_level_piece_bytes(const std::string& piece);

}  // namespace hg::tok
