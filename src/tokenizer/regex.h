// PCRE2 wrapper for pre-tokenizer patterns: UTF + UCP so \p{L}, \s and friends are Unicode-aware,
// JIT-compiled for speed, and tolerant of invalid UTF-8 in the subject (such bytes never match a
// character class, so they end up in the gaps between matches and are still encoded).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hg::tok {

class Regex {
 public:
  // literal: match the pattern as a plain string. Throws hg::Error naming `where` on a bad pattern.
  Regex(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  struct Match {
    size_t begin, end;
  };
  // All non-overlapping, non-empty matches, left to right.
  void find_all(std::string_view subject, std::vector<Match>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so the PCRE2 header stays in regex.cpp
};

}  // namespace hg::tok
