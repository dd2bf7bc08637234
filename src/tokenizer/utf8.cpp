#include "tokenizer/utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace hg::tok {

size_t utf8_valid_len(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  size_t left = s.size() - i;
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto cont = [&](size_t k) { return k < left && (p[k] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;  // overlong
    if (c == 0xED && p[1] >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && p[1] < 0x90) return 0;  // overlong
    if (c == 0xF4 && p[1] >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

char32_t utf8_decode(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  if (p[0] < 0x80) return p[0];
  if (p[0] < 0xE0) return char32_t(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
  if (p[0] < 0xF0) return char32_t(p[0] & 0x0F) << 12 | char32_t(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
  return char32_t(p[0] & 0x07) << 18 | char32_t(p[1] & 0x3F) << 12 | char32_t(p[2] & 0x3F) << 6 |
         (p[3] & 0x3F);
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

bool utf8_is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_valid_len(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

namespace {
// Number of bytes a sequence led by c needs, or 0 when c cannot lead one.
size_t expected_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}
}  // namespace

namespace {
// Whether s[i], s[i+1], ... (fewer bytes than the lead announces) can still begin a valid sequence.
bool could_continue(std::string_view s, size_t i, size_t count) {
  auto lead = static_cast<unsigned char>(s[i]);
  for (size_t k = 1; k < count; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    if (k == 1 && ((lead == 0xE0 && b < 0xA0) || (lead == 0xED && b >= 0xA0) ||
                   (lead == 0xF0 && b < 0x90) || (lead == 0xF4 && b >= 0x90)))
      return false;
  }
  return true;
}
}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last 3 bytes can belong to an unfinished sequence.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    size_t need = expected_len(static_cast<unsigned char>(s[i]));
    if (need <= 1 || i + need <= s.size()) continue;
    if (could_continue(s, i, s.size() - i)) return i;
  }
  return s.size();
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_valid_len(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // One U+FFFD per maximal prefix of a would-be sequence, as from_utf8_lossy does.
    size_t need = expected_len(static_cast<unsigned char>(s[i]));
    size_t skip = 1;
    while (need > 1 && skip < need && i + skip < s.size() && could_continue(s, i, skip + 1)) ++skip;
    out += "\xEF\xBF\xBD";
    i += skip;
  }
  return out;
}

ByteMap::ByteMap() {
  cp_to_byte_.fill(-1);
  // Printable Latin-1 bytes stand for themselves; the rest are shifted to U+0100 and up.
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    char32_t cp = printable ? char32_t(b) : char32_t(256 + shifted++);
    byte_to_text_[b].clear();
    utf8_append(byte_to_text_[b], cp);
    cp_to_byte_[cp] = int16_t(b);
  }
}

std::optional<uint8_t> ByteMap::decode(char32_t cp) const {
  if (cp >= cp_to_byte_.size() || cp_to_byte_[cp] < 0) return std::nullopt;
  return uint8_t(cp_to_byte_[cp]);
}

std::optional<std::string> ByteMap::decode_text(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_valid_len(text, i);
    if (!n) return std::nullopt;
    auto b = decode(utf8_decode(text, i));
    if (!b) return std::nullopt;
    out += char(*b);
    i += n;
  }
  return out;
}

std::string ByteMap::encode_text(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_to_text_[static_cast<uint8_t>(c)];
  return out;
}

const ByteMap& byte_map() {
  static const ByteMap map;  // immutable: initialised once, thread-safe
  return map;
}

namespace {
struct FreeDeleter {
  void operator()(utf8proc_uint8_t* p) const { std::free(p); }
};

std::string normalize_valid(std::string_view s, utf8proc_option_t options) {
  if (s.empty()) return {};
  utf8proc_uint8_t* raw = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                        static_cast<utf8proc_ssize_t>(s.size()), &raw, options);
  std::unique_ptr<utf8proc_uint8_t, FreeDeleter> owned(raw);
  if (n < 0) return std::string(s);  // cannot happen on valid input; keep the text unchanged
  return std::string(reinterpret_cast<const char*>(raw), static_cast<size_t>(n));
}

// Applies f to every maximal valid run of s, copying invalid bytes through.
template <typename F>
std::string map_valid_runs(std::string_view s, F f) {
  if (utf8_is_valid(s)) return f(s);
  std::string out;
  size_t run = 0, i = 0;
  while (i < s.size()) {
    size_t n = utf8_valid_len(s, i);
    if (n) {
      i += n;
      continue;
    }
    out += f(s.substr(run, i - run));
    out += s[i];
    run = ++i;
  }
  out += f(s.substr(run));
  return out;
}
}  // namespace

std::string unicode_normalize(std::string_view s, NormalForm form) {
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: opts |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  auto options = static_cast<utf8proc_option_t>(opts);
  return map_valid_runs(s, [&](std::string_view run) { return normalize_valid(run, options); });
}

std::string unicode_lowercase(std::string_view s) {
  return map_valid_runs(s, [](std::string_view run) {
    std::string out;
    out.reserve(run.size());
    for (size_t i = 0; i < run.size();) {
      size_t n = utf8_valid_len(run, i);
      utf8_append(out, char32_t(utf8proc_tolower(utf8proc_int32_t(utf8_decode(run, i)))));
      i += n;
    }
    return out;
  });
}

}  // namespace hg::tok
