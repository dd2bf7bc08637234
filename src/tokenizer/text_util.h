// Small text operations shared by normalizers, pre-tokenizers, decoders and added-token matching.
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/regex.h"

namespace hg::tok {

// Unicode White_Space (what Rust's char::is_whitespace tests, which HF tokenizers use).
bool is_whitespace(char32_t cp);
// Letters, numbers and '_' (the \w of HF's single_word check).
bool is_word_char(char32_t cp);
// Bytes of whitespace at the start / end of s (whole characters; invalid bytes stop the scan).
size_t leading_whitespace(std::string_view s);
size_t trailing_whitespace(std::string_view s);
// The code point that ends just before byte `end` (or -1 when none / invalid).
long last_char_before(std::string_view s, size_t end);
long first_char_at(std::string_view s, size_t begin);

std::string regex_replace_all(const Regex& re, std::string_view text, std::string_view content);
void replace_all(std::string& text, std::string_view from, std::string_view to);

}  // namespace hg::tok
