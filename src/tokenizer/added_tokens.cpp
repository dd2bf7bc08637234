#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/text_util.h"

namespace hg::tok {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  for (const auto& t : tokens)
    if (!t.content.empty()) tokens_.push_back(t);
  for (uint32_t k = 0; k < tokens_.size(); ++k)
    by_first_byte_[static_cast<uint8_t>(tokens_[k].content[0])].push_back(k);
  for (auto& bucket : by_first_byte_)
    std::stable_sort(bucket.begin(), bucket.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

bool AddedTokenMatcher::try_match(std::string_view text, size_t pos, size_t& len,
                                  const AddedToken*& which) const {
  for (uint32_t k : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    const AddedToken& t = tokens_[k];
    if (text.compare(pos, t.content.size(), t.content) != 0) continue;
    if (t.single_word) {
      long before = last_char_before(text, pos);
      long after = first_char_at(text, pos + t.content.size());
      if ((before >= 0 && is_word_char(char32_t(before))) || (after >= 0 && is_word_char(char32_t(after))))
        continue;
    }
    len = t.content.size();
    which = &t;
    return true;
  }
  return false;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  size_t plain_begin = 0;  // start of the text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    const AddedToken* t = nullptr;
    if (by_first_byte_[static_cast<uint8_t>(text[pos])].empty() || !try_match(text, pos, len, t)) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + len;
    if (t->lstrip) begin -= trailing_whitespace(text.substr(plain_begin, begin - plain_begin));
    if (t->rstrip) end += leading_whitespace(text.substr(end));
    if (begin > plain_begin) out.push_back({plain_begin, begin, -1});
    out.push_back({begin, end, t->id});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) out.push_back({plain_begin, text.size(), -1});
}

}  // namespace hg::tok
