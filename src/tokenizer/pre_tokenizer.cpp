#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "hybridgen/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/text_util.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

struct Piece {
  size_t begin, end;
  bool is_match;
};

// Turns the regex matches over `word` into pieces and appends them to `out`, following HF's
// SplitDelimiterBehavior (the merge rules follow its semantics, including the fact that a match
// only joins a neighbour that is not itself a match). `pieces` is scratch space.
void split_word(const std::string& word, const std::vector<Regex::Match>& matches,
                SplitBehavior behavior, bool invert, std::vector<Piece>& pieces,
                std::vector<std::string>& out) {
  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.emplace_back(word, b, e - b);
  };
  if (behavior == SplitBehavior::Isolated) {  // the common case, without scratch space
    size_t prev = 0;
    for (const auto& m : matches) {
      emit(prev, m.begin);
      emit(m.begin, m.end);
      prev = m.end;
    }
    emit(prev, word.size());
    return;
  }
  pieces.clear();
  size_t prev = 0;
  for (const auto& m : matches) {
    if (m.begin > prev) pieces.push_back({prev, m.begin, invert});
    pieces.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  if (prev < word.size()) pieces.push_back({prev, word.size(), invert});

  // Merge in place: `kept` pieces are compacted to the front.
  size_t kept = 0;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const auto& p : pieces)
        if (!p.is_match) pieces[kept++] = p;
      break;
    case SplitBehavior::Isolated: kept = pieces.size(); break;
    case SplitBehavior::MergedWithPrevious:
      for (size_t k = 0; k < pieces.size(); ++k) {
        Piece p = pieces[k];
        if (p.is_match && !previous_match && kept) pieces[kept - 1].end = p.end;
        else pieces[kept++] = p;
        previous_match = p.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext: {
      // Walk right to left, compacting to the back, then slide to the front.
      size_t front = pieces.size();
      for (size_t k = pieces.size(); k-- > 0;) {
        Piece p = pieces[k];
        if (p.is_match && !previous_match && front < pieces.size()) pieces[front].begin = p.begin;
        else pieces[--front] = p;
        previous_match = p.is_match;
      }
      for (size_t k = front; k < pieces.size(); ++k) pieces[kept++] = pieces[k];
      break;
    }
    case SplitBehavior::Contiguous:
      for (size_t k = 0; k < pieces.size(); ++k) {
        Piece p = pieces[k];
        if (p.is_match == previous_match && kept) pieces[kept - 1].end = p.end;
        else pieces[kept++] = p;
        previous_match = p.is_match;
      }
      break;
  }
  for (size_t k = 0; k < kept; ++k) emit(pieces[k].begin, pieces[k].end);
}

class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(const std::string& pattern, bool literal, SplitBehavior behavior, bool invert,
             const std::string& where)
      : regex_(pattern, literal, where), behavior_(behavior), invert_(invert) {}
  void split(std::vector<std::string>& words, bool) const override {
    std::vector<std::string> out;
    out.reserve(words.size() * 4);
    std::vector<Regex::Match> matches;
    std::vector<Piece> scratch;
    for (const auto& w : words) {
      regex_.find_all(w, matches);
      split_word(w, matches, behavior_, invert_, scratch, out);
    }
    words = std::move(out);
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex)
      regex_ = std::make_unique<RegexSplit>(kGpt2Pattern, false, SplitBehavior::Isolated, false,
                                            "ByteLevel pre-tokenizer");
  }
  void split(std::vector<std::string>& words, bool first_segment) const override {
    if (add_prefix_space_)
      for (auto& w : words)
        if (w.empty() || w[0] != ' ') w.insert(w.begin(), ' ');
    if (regex_) regex_->split(words, first_segment);
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<RegexSplit> regex_;
};

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void split(std::vector<std::string>& words, bool first_segment) const override {
    std::vector<std::string> out;
    for (size_t k = 0; k < words.size(); ++k) {
      std::string w = words[k];
      replace_all(w, " ", replacement_);
      bool prepend = scheme_ == PrependScheme::Always ||
                     (scheme_ == PrependScheme::First && first_segment && k == 0);
      if (prepend && w.compare(0, replacement_.size(), replacement_) != 0) w.insert(0, replacement_);
      if (!split_) {
        out.push_back(std::move(w));
        continue;
      }
      // Each word starts at a replacement character (MergedWithNext on it).
      size_t start = 0;
      for (size_t pos = w.find(replacement_, 1); pos != std::string::npos;
           pos = w.find(replacement_, pos + 1)) {
        if (pos > start) out.emplace_back(w, start, pos - start);
        start = pos;
      }
      if (start < w.size()) out.emplace_back(w, start);
    }
    words = std::move(out);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<PreTokenizerPtr> parts) : parts_(std::move(parts)) {}
  void split(std::vector<std::string>& words, bool first_segment) const override {
    for (const auto& p : parts_) p->split(words, first_segment);
  }
  bool byte_level() const override { return !parts_.empty() && parts_.back()->byte_level(); }

 private:
  std::vector<PreTokenizerPtr> parts_;
};

}  // namespace

PreTokenizerPtr make_split_pre_tokenizer(const std::string& pattern, bool literal,
                                         SplitBehavior behavior, bool invert, const std::string& where) {
  return std::make_unique<RegexSplit>(pattern, literal, behavior, invert, where);
}
PreTokenizerPtr make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevel>(add_prefix_space, use_regex);
}
PreTokenizerPtr make_metaspace_pre_tokenizer(std::string replacement, PrependScheme scheme, bool split) {
  return std::make_unique<Metaspace>(std::move(replacement), scheme, split);
}
PreTokenizerPtr make_digits_pre_tokenizer(bool individual_digits) {
  return std::make_unique<RegexSplit>(individual_digits ? R"(\p{N})" : R"(\p{N}+)", false,
                                      SplitBehavior::Isolated, false, "Digits pre-tokenizer");
}
PreTokenizerPtr make_whitespace_pre_tokenizer() {
  return std::make_unique<RegexSplit>(R"(\w+|[^\w\s]+)", false, SplitBehavior::Removed, true,
                                      "Whitespace pre-tokenizer");
}
PreTokenizerPtr make_whitespace_split_pre_tokenizer() {
  return std::make_unique<RegexSplit>(R"(\s+)", false, SplitBehavior::Removed, false,
                                      "WhitespaceSplit pre-tokenizer");
}
PreTokenizerPtr make_sequence_pre_tokenizer(std::vector<PreTokenizerPtr> parts, const std::string& where) {
  for (size_t k = 0; k + 1 < parts.size(); ++k)
    if (parts[k]->byte_level())
      throw Error(where + ": a ByteLevel pre-tokenizer followed by another pre-tokenizer is not supported");
  return std::make_unique<Sequence>(std::move(parts));
}

}  // namespace hg::tok
