// UTF-8 helpers shared by the tokenizer stages: decoding that tolerates invalid bytes (the
// tokenizer must encode any byte string), GPT-2's byte <-> printable-character map, and Unicode
// normalization through utf8proc.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hg::tok {

// Length of the UTF-8 sequence starting at s[i], or 0 when the bytes there are not a valid
// (complete, shortest-form, non-surrogate) sequence.
size_t utf8_valid_len(std::string_view s, size_t i);
// Length of the next "character": a valid sequence, or 1 for a byte that starts none.
inline size_t utf8_char_len(std::string_view s, size_t i) {
  size_t n = utf8_valid_len(s, i);
  return n ? n : 1;
}
// Decodes the valid sequence at s[i] (call only where utf8_valid_len > 0).
char32_t utf8_decode(std::string_view s, size_t i);
void utf8_append(std::string& out, char32_t cp);
bool utf8_is_valid(std::string_view s);
// The longest prefix of s that does not end inside a sequence that could still become valid
// when more bytes arrive. Invalid bytes count as complete (they will never become valid).
size_t utf8_complete_prefix(std::string_view s);
// Replaces each maximal invalid subsequence by U+FFFD, as Rust's String::from_utf8_lossy does.
std::string utf8_lossy(std::string_view s);

// GPT-2's reversible map from bytes to printable characters ("Ġ" stands for a space).
class ByteMap {
 public:
  ByteMap();
  const std::string& encode(uint8_t b) const { return byte_to_text_[b]; }
  // The byte a mapped character stands for; nullopt for characters outside the map.
  std::optional<uint8_t> decode(char32_t cp) const;
  // Maps every character back to its byte; nullopt when one is outside the map.
  std::optional<std::string> decode_text(std::string_view text) const;
  std::string encode_text(std::string_view bytes) const;

 private:
  std::array<std::string, 256> byte_to_text_;
  std::array<int16_t, 512> cp_to_byte_{};  // every mapped code point is < 512
};
const ByteMap& byte_map();  // immutable after first use

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Normalizes the valid UTF-8 runs of s; invalid bytes pass through untouched.
std::string unicode_normalize(std::string_view s, NormalForm form);
std::string unicode_lowercase(std::string_view s);

}  // namespace hg::tok
