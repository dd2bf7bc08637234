#include "tokenizer/pipeline.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "hybridgen/error.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

namespace {

// Words longer than this are not worth caching: they rarely repeat (and SentencePiece-style
// tokenizers without a pre-tokenizer hand the whole text over as one word).
constexpr size_t kMaxCachedWord = 48;
// The word cache is cleared when it grows past this many words (bounded memory on odd input).
constexpr size_t kMaxCacheEntries = 1 << 18;

class PipelineTokenizer final : public Tokenizer {
 public:
  explicit PipelineTokenizer(PipelineParts p) : p_(std::move(p)) {
    if (!p_.model) throw Error(p_.source + ": tokenizer has no model");
    const auto n = p_.pieces.size();
    special_.assign(n, false);
    for (const auto& t : p_.added) {
      if (t.id < 0 || size_t(t.id) >= n)
        throw Error(p_.source + ": added token '" + t.content + "' has id " + std::to_string(t.id) +
                    " outside the vocabulary of " + std::to_string(n));
      if (t.special) special_[t.id] = true;
    }
    std::vector<AddedToken> raw, normalized;
    for (const auto& t : p_.added) (t.normalized && p_.normalizer ? normalized : raw).push_back(t);
    raw_matcher_ = AddedTokenMatcher(raw);
    normalized_matcher_ = AddedTokenMatcher(normalized);
    piece_to_id_ = StringIndex(&p_.pieces);
    for (const auto& t : p_.added) added_to_id_[t.content] = t.id;
    if (p_.decoder && p_.decoder->is_byte_level()) {
      piece_bytes_.resize(n);
      for (size_t id = 0; id < n; ++id) piece_bytes_[id] = byte_level_piece_bytes(p_.pieces[id]);
    }
    for (int32_t id : {p_.bos.value_or(-1), p_.eos.value_or(-1)})
      if (id >= 0 && size_t(id) >= n)
        throw Error(p_.source + ": special token id " + std::to_string(id) + " outside the vocabulary");
    if (p_.eos) stop_ids_.push_back(*p_.eos);
    for (const char* name : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>",
                             "<|endoftext|>", "</s>", "<end_of_turn>"}) {
      auto id = token_to_id(name);
      if (id && special_[*id] && std::find(stop_ids_.begin(), stop_ids_.end(), *id) == stop_ids_.end())
        stop_ids_.push_back(*id);
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special) out = p_.prefix;
    Cache& cache = cache_;
    std::vector<AddedTokenMatcher::Segment> segments, inner;
    raw_matcher_.split(text, segments);
    for (const auto& seg : segments) {
      if (seg.id >= 0) {
        out.push_back(seg.id);
        continue;
      }
      std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
      bool first = seg.begin == 0;
      if (!p_.normalizer) {
        encode_normalized(std::string(part), first, cache, out);
        continue;
      }
      std::string norm = p_.normalizer->normalize(std::string(part));
      if (normalized_matcher_.empty()) {
        encode_normalized(std::move(norm), first, cache, out);
        continue;
      }
      normalized_matcher_.split(norm, inner);
      for (const auto& s : inner) {
        if (s.id >= 0) out.push_back(s.id);
        else encode_normalized(norm.substr(s.begin, s.end - s.begin), first && s.begin == 0, cache, out);
      }
    }
    if (add_special) out.insert(out.end(), p_.suffix.begin(), p_.suffix.end());
    return out;
  }

  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    return decode_impl(ids, skip_special, false);
  }
  std::string decode_raw(std::span<const int32_t> ids, bool skip_special) const override {
    return decode_impl(ids, skip_special, true);
  }

  int32_t vocab_size() const override { return int32_t(p_.pieces.size()); }
  std::string piece(int32_t id) const override {
    check_id(id);
    return p_.pieces[id];
  }
  std::optional<int32_t> token_to_id(std::string_view piece) const override {
    if (auto it = added_to_id_.find(piece); it != added_to_id_.end()) return it->second;
    if (const int32_t id = piece_to_id_.find(piece); id >= 0) return id;
    return std::nullopt;
  }
  bool is_special(int32_t id) const override {
    return id >= 0 && size_t(id) < special_.size() && special_[id];
  }
  std::optional<int32_t> bos_id() const override { return p_.bos; }
  std::optional<int32_t> eos_id() const override { return p_.eos; }
  std::vector<int32_t> stop_ids() const override { return stop_ids_; }
  std::string chat_template() const override { return p_.chat_template; }

 private:
  using Cache = std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>;

  void encode_normalized(std::string text, bool first, Cache& cache, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    if (!p_.pre_tokenizer) {
      p_.model->encode_word(text, out);
      return;
    }
    std::vector<std::string> words;
    words.push_back(std::move(text));
    p_.pre_tokenizer->split(words, first);
    for (const auto& w : words) {
      if (w.size() > kMaxCachedWord) {
        p_.model->encode_word(w, out);
        continue;
      }
      {
        std::lock_guard lock(cache_mutex_);
        auto it = cache.find(std::string_view(w));
        if (it != cache.end()) {
          out.insert(out.end(), it->second.begin(), it->second.end());
          continue;
        }
      }
      size_t before = out.size();
      p_.model->encode_word(w, out);
      std::lock_guard lock(cache_mutex_);
      if (cache.size() >= kMaxCacheEntries) cache.clear();
      cache.emplace(w, std::vector<int32_t>(out.begin() + before, out.end()));
    }
  }

  void check_id(int32_t id) const {
    if (id < 0 || size_t(id) >= p_.pieces.size())
      throw Error(p_.source + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(p_.pieces.size()) + ")");
  }

  std::string decode_impl(std::span<const int32_t> ids, bool skip_special, bool raw) const {
    for (int32_t id : ids) check_id(id);
    if (!piece_bytes_.empty()) {
      std::string bytes;
      for (int32_t id : ids)
        if (!(skip_special && special_[id])) bytes += piece_bytes_[id];
      return raw ? bytes : utf8_lossy(bytes);
    }
    std::vector<std::string> pieces;
    pieces.reserve(ids.size());
    for (int32_t id : ids)
      if (!(skip_special && special_[id])) pieces.push_back(p_.pieces[id]);
    std::string text;
    if (p_.decoder) {
      p_.decoder->decode_chain(pieces, raw);
      for (const auto& s : pieces) text += s;
    } else {
      // HF joins the pieces with spaces when there is no decoder.
      for (size_t k = 0; k < pieces.size(); ++k) text += (k ? " " : "") + pieces[k];
    }
    return raw ? text : utf8_lossy(text);
  }

  PipelineParts p_;
  // Words already encoded (shared by all calls; encode is const and may run on several threads).
  mutable std::mutex cache_mutex_;
  mutable Cache cache_;
  std::vector<bool> special_;
  AddedTokenMatcher raw_matcher_, normalized_matcher_;
  StringIndex piece_to_id_;  // over p_.pieces
  StringIdMap added_to_id_;  // added tokens' contents, looked up first
  std::vector<std::string> piece_bytes_;  // byte-level decoding fast path
  std::vector<int32_t> stop_ids_;
};

}  // namespace

std::optional<int32_t> find_piece(const std::vector<std::string>& pieces, const std::string& piece) {
  if (piece.empty()) return std::nullopt;
  auto it = std::find(pieces.begin(), pieces.end(), piece);
  if (it == pieces.end()) return std::nullopt;
  return static_cast<int32_t>(it - pieces.begin());
}

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(PipelineParts parts) {
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

}  // namespace hg::tok
