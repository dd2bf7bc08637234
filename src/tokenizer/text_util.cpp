#include "tokenizer/text_util.h"

#include <utf8proc.h>

#include <vector>

#include "tokenizer/utf8.h"

namespace hg::tok {

bool is_whitespace(char32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_word_char(char32_t cp) {
  if (cp == '_') return true;
  auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
         (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME);
}

size_t leading_whitespace(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_valid_len(s, i);
    if (!n || !is_whitespace(utf8_decode(s, i))) break;
    i += n;
  }
  return i;
}

long first_char_at(std::string_view s, size_t begin) {
  if (begin >= s.size()) return -1;
  size_t n = utf8_valid_len(s, begin);
  return n ? long(utf8_decode(s, begin)) : -1;
}

long last_char_before(std::string_view s, size_t end) {
  // Step back over at most three continuation bytes to the lead byte.
  for (size_t k = 1; k <= 4 && k <= end; ++k) {
    size_t start = end - k;
    if ((static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) continue;
    return utf8_valid_len(s, start) == k ? long(utf8_decode(s, start)) : -1;
  }
  return -1;
}

size_t trailing_whitespace(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    long cp = last_char_before(s, end);
    if (cp < 0 || !is_whitespace(char32_t(cp))) break;
    std::string tmp;
    utf8_append(tmp, char32_t(cp));
    end -= tmp.size();
  }
  return s.size() - end;
}

std::string regex_replace_all(const Regex& re, std::string_view text, std::string_view content) {
  std::vector<Regex::Match> matches;
  re.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  for (const auto& m : matches) {
    out.append(text.substr(prev, m.begin - prev));
    out.append(content);
    prev = m.end;
  }
  out.append(text.substr(prev));
  return out;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty() || text.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  size_t prev = 0, pos;
  while ((pos = text.find(from, prev)) != std::string::npos) {
    out.append(text, prev, pos - prev);
    out.append(to);
    prev = pos + from.size();
  }
  out.append(text, prev);
  text = std::move(out);
}

}  // namespace hg::tok
