#include "tokenizer/json_tables.h"

#include <cstring>

#include "hybridgen/error.h"

namespace hg::tok {

namespace {

constexpr int kMaxDepth = 512;  // nesting deeper than this is rejected, not recursed into

// A cursor over JSON text. Structural errors say "not valid JSON ... near byte N"; errors about
// what a table holds (a float id, a merge of three parts) go through `table_error`.
class Scanner {
 public:
  Scanner(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  size_t pos() const { return i_; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool at_end() {
    ws();
    return i_ >= s_.size();
  }
  char peek() {
    ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail();
    ++i_;
  }
  // After an element: true for ',' (another follows), false for `close`.
  bool next(char close) {
    const char c = peek();
    if (c == ',') {
      ++i_;
      return true;
    }
    if (c != close) fail();
    ++i_;
    return false;
  }
  [[noreturn]] void fail() const {
    throw Error(name_ + ": not valid JSON (malformed or truncated) near byte " + std::to_string(i_));
  }

  // The string at the cursor, unescaped (UTF-8), into `out`.
  void string(std::string& out) {
    expect('"');
    out.clear();
    for (;;) {
      size_t j = i_;
      while (j < s_.size() && s_[j] != '"' && s_[j] != '\\' && static_cast<unsigned char>(s_[j]) >= 0x20) ++j;
      out.append(s_.data() + i_, j - i_);
      i_ = j;
      if (i_ >= s_.size() || static_cast<unsigned char>(s_[i_]) < 0x20) fail();
      if (s_[i_++] == '"') return;
      escape(out);
    }
  }

  // An integer value at the cursor into v; false when the value is not a number. A fraction or
  // exponent sets saw_float(), more than int64 saw_huge() (the caller reports them).
  bool integer(int64_t& v) {
    const char c = peek();
    if (c != '-' && (c < '0' || c > '9')) return false;
    const bool neg = c == '-';
    if (neg) ++i_;
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail();
    uint64_t u = 0;
    bool huge = false;
    for (; i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9'; ++i_) {
      if (u > (UINT64_MAX - 9) / 10) huge = true;
      u = u * 10 + static_cast<uint64_t>(s_[i_] - '0');
    }
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) throw_float_ = true;
    if (huge || u > static_cast<uint64_t>(INT64_MAX)) throw_huge_ = true;
    v = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
    return true;
  }
  bool saw_float() const { return throw_float_; }
  bool saw_huge() const { return throw_huge_; }

  // Skips any value. Checked for structure only: what is kept is parsed again by nlohmann.
  void skip_value(int depth = 0) {
    if (depth > kMaxDepth) throw Error(name_ + ": JSON nested more than " + std::to_string(kMaxDepth) + " levels deep");
    const char c = peek();
    if (c == '"') {
      skip_string();
    } else if (c == '{') {
      ++i_;
      if (peek() == '}') {
        ++i_;
        return;
      }
      do {
        skip_string();
        expect(':');
        skip_value(depth + 1);
      } while (next('}'));
    } else if (c == '[') {
      ++i_;
      if (peek() == ']') {
        ++i_;
        return;
      }
      do skip_value(depth + 1);
      while (next(']'));
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
      const size_t start = i_;
      while (i_ < s_.size() && std::strchr("0123456789+-.eEtruefalsn", s_[i_]) != nullptr && s_[i_] != '\0') ++i_;
      if (i_ == start) fail();
    } else {
      fail();
    }
  }

  // What kind of value starts at the cursor, for messages.
  const char* kind() {
    switch (peek()) {
      case '"': return "a string";
      case '{': return "an object";
      case '[': return "an array";
      case 't':
      case 'f': return "a boolean";
      case 'n': return "null";
      default: return "a number";
    }
  }

 private:
  void skip_string() {
    expect('"');
    for (;;) {
      while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\' && static_cast<unsigned char>(s_[i_]) >= 0x20) ++i_;
      if (i_ >= s_.size() || static_cast<unsigned char>(s_[i_]) < 0x20) fail();
      if (s_[i_++] == '"') return;
      if (i_ >= s_.size()) fail();
      ++i_;  // the escaped character (\uXXXX: its hex digits are plain characters)
    }
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail();
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
      else fail();
    }
    return v;
  }

  void escape(std::string& out) {
    if (i_ >= s_.size()) fail();
    const char e = s_[i_++];
    switch (e) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: fail();
    }
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail();  // a lone low surrogate
    if (cp >= 0xD800 && cp <= 0xDBFF) {        // a high surrogate: its low half must follow
      if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') fail();
      i_ += 2;
      const uint32_t lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail();
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
  bool throw_float_ = false, throw_huge_ = false;
};

[[noreturn]] void table_error(const std::string& name, const char* table, const std::string& what) {
  throw Error(name + ": " + table + ": unexpected " + what);
}

// {piece: id, ...} at the cursor.
void scan_vocab(Scanner& sc, const std::string& name, const char* table,
                std::vector<std::pair<std::string, int64_t>>& out) {
  sc.expect('{');
  if (sc.peek() == '}') {
    sc.expect('}');
    return;
  }
  std::string key;
  do {
    sc.string(key);
    sc.expect(':');
    int64_t id = 0;
    if (!sc.integer(id)) table_error(name, table, sc.kind());
    if (sc.saw_float()) table_error(name, table, "a float");
    if (sc.saw_huge()) table_error(name, table, "a huge number");
    out.emplace_back(key, id);
  } while (sc.next('}'));
}

// ["left right", ...] or [["left", "right"], ...] at the cursor.
void scan_merges(Scanner& sc, const std::string& name, std::vector<std::pair<std::string, std::string>>& out) {
  constexpr const char* kTable = "model.merges";
  sc.expect('[');
  if (sc.peek() == ']') {
    sc.expect(']');
    return;
  }
  std::string s;
  do {
    const char c = sc.peek();
    if (c == '"') {
      sc.string(s);
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        table_error(name, kTable, "a merge that is not \"left right\"");
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (c == '[') {
      sc.expect('[');
      auto& m = out.emplace_back();
      if (sc.peek() != '"') table_error(name, kTable, sc.kind());
      sc.string(m.first);
      if (sc.peek() != ',') table_error(name, kTable, "a pair that is not [left, right]");
      sc.expect(',');
      if (sc.peek() != '"') table_error(name, kTable, sc.kind());
      sc.string(m.second);
      if (sc.peek() != ']') table_error(name, kTable, "a pair of more than two strings");
      sc.expect(']');
    } else {
      table_error(name, kTable, sc.kind());
    }
  } while (sc.next(']'));
}

}  // namespace

Json parse_tokenizer_json(std::string_view text, const std::string& name, BpeTables& tables) {
  Scanner sc(text, name);
  // [begin, end) of the vocab and merges values, replaced by {} and [] for the DOM.
  struct Cut {
    size_t begin, end;
    const char* empty;
  };
  std::vector<Cut> cuts;
  if (sc.peek() == '{') {
    sc.expect('{');
    std::string key, model_key;
    if (sc.peek() != '}') {
      do {
        sc.string(key);
        sc.expect(':');
        if (key != "model" || sc.peek() != '{') {
          sc.skip_value();
          continue;
        }
        sc.expect('{');
        if (sc.peek() == '}') {
          sc.expect('}');
          continue;
        }
        do {
          sc.string(model_key);
          sc.expect(':');
          const char c = sc.peek();
          const size_t begin = sc.pos();
          if (model_key == "vocab" && c == '{') {
            scan_vocab(sc, name, "model.vocab", tables.vocab);
            tables.has_vocab = true;
            cuts.push_back({begin, sc.pos(), "{}"});
          } else if (model_key == "merges" && c == '[') {
            scan_merges(sc, name, tables.merges);
            tables.has_merges = true;
            cuts.push_back({begin, sc.pos(), "[]"});
          } else {
            sc.skip_value(1);
          }
        } while (sc.next('}'));
      } while (sc.next('}'));
    } else {
      sc.expect('}');
    }
    if (!sc.at_end()) sc.fail();
  }
  std::string rest;
  size_t at = 0;
  for (const Cut& c : cuts) {
    rest.append(text.substr(at, c.begin - at)).append(c.empty);
    at = c.end;
  }
  rest.append(text.substr(at));
  Json root = Json::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) throw Error(name + ": not valid JSON (malformed or truncated)");
  return root;
}

void parse_vocab_object(std::string_view text, const std::string& name,
                        std::vector<std::pair<std::string, int64_t>>& out) {
  Scanner sc(text, name);
  scan_vocab(sc, name, "vocab", out);
  if (!sc.at_end()) sc.fail();
}

}  // namespace hg::tok
