// Added tokens (special and normal) are cut out of the text before normalization and
// pre-tokenization, so "<|im_start|>" in a prompt becomes one id instead of seven.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hg::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;       // swallow whitespace to the left of a match
  bool rstrip = false;       // swallow whitespace to the right of a match
  bool single_word = false;  // match only where not inside a word
  bool normalized = false;   // match in the normalized text instead of the raw text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);
  bool empty() const { return tokens_.empty(); }

  struct Segment {
    size_t begin, end;
    int32_t id;  // -1: plain text to be tokenized by the model
  };
  // Leftmost-longest matches; the text between them comes back as plain segments.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  bool try_match(std::string_view text, size_t pos, size_t& len, const AddedToken*& which) const;
  std::vector<AddedToken> tokens_;
  // Token indices by first byte, longest content first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace hg::tok
