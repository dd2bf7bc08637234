// The model stage: turns one pre-tokenized word into token ids (BPE by merge rank, or
// SentencePiece-style BPE by piece score).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hg::tok {

// Hash for string-keyed maps that can be probed with a string_view (no temporary std::string).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Index from string to id over a table the owner keeps (id -> string): open addressing over ids
// with a stored hash, no node per entry. Building one over a 150K-piece vocabulary is several
// times cheaper than a StringIdMap (one malloc per node), which dominated tokenizer load time.
class StringIndex {
 public:
  // Indexes strings[id] for every non-empty entry; for equal strings the lowest id wins.
  // `strings` must outlive the index and not change.
  explicit StringIndex(const std::vector<std::string>* strings = nullptr);
  // -1 when absent.
  int32_t find(std::string_view s) const;

 private:
  struct Slot {
    uint32_t hash;
    int32_t id;  // -1: free
  };
  static uint32_t hash(std::string_view s) { return static_cast<uint32_t>(std::hash<std::string_view>{}(s)); }

  const std::vector<std::string>* strings_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Open-addressing map from a packed (left id, right id) pair to its merge: the merge loop probes
// it for every adjacent pair, and std::unordered_map's node chasing dominated encode time.
class PairMap {
 public:
  struct Entry {
    uint64_t key;  // kEmpty marks a free slot
    int32_t rank;
    int32_t merged_id;
  };
  void reserve(size_t n);
  // Keeps the first value inserted for a key; returns false when the key was already present.
  bool insert(uint64_t key, int32_t rank, int32_t merged_id);
  const Entry* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static size_t hash(uint64_t k) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20); }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void encode_word(std::string_view word, std::vector<int32_t>& out) const = 0;
};

struct BpeOptions {
  // Keys are raw bytes and words are raw bytes: each byte starts as its own symbol.
  bool byte_level = false;
  // A character absent from the vocabulary becomes its UTF-8 bytes as <0xNN> tokens.
  bool byte_fallback = false;
  // Consecutive unknown characters become one unk token.
  bool fuse_unk = false;
  // A word that is itself in the vocabulary is emitted whole, without merging (Llama-3).
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
};

// keys[id]: the token as the model matches it ("" for ids the model does not own, e.g. added
// tokens). merges: pairs of keys, highest priority first. `where` prefixes error messages.
class BpeModel final : public Model {
 public:
  BpeModel(std::vector<std::string> keys, const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeOptions& options, const std::string& where);
  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  static uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  void merge(std::vector<int32_t>& ids) const;

  BpeOptions options_;
  std::vector<std::string> keys_;  // id -> the bytes (byte-level) or text the model matches
  StringIndex key_to_id_;
  PairMap merges_;
  int32_t byte_ids_[256];   // byte-level: the single-byte token; byte fallback: the <0xNN> token
  int32_t ascii_ids_[128];  // non-byte-level: the token of each ASCII character (-1: none)
};

// SentencePiece BPE as llama.cpp runs it on GGUF "llama" vocabularies: repeatedly merge the
// adjacent pair whose concatenation is the highest-scoring piece; characters absent from the
// vocabulary fall back to <0xNN> byte tokens (or unk).
class SpmModel final : public Model {
 public:
  SpmModel(const std::vector<std::string>& pieces, std::vector<float> scores,
           std::optional<int32_t> unk_id, const std::string& where);
  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  std::vector<std::string> pieces_;
  StringIndex piece_to_id_;
  std::vector<float> scores_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];
};

}  // namespace hg::tok
