#include <cstdio>
#include <queue>

#include "hybridgen/error.h"
#include "tokenizer/model.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

namespace {
struct Symbol {
  size_t begin, len;  // bytes of the word; len == 0 once merged into its left neighbour
  int32_t prev, next;
};

struct Bigram {
  float score;
  int32_t left, right;
  size_t len;  // combined length when queued: a mismatch later means the pair is stale
  // Highest score first; among equal scores the leftmost (llama.cpp's order).
  bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
};
}  // namespace

SpmModel::SpmModel(const std::vector<std::string>& pieces, std::vector<float> scores,
                   std::optional<int32_t> unk_id, const std::string& where)
    : pieces_(pieces), piece_to_id_(&pieces_), scores_(std::move(scores)), unk_id_(unk_id) {
  if (scores_.size() != pieces.size())
    throw Error(where + ": " + std::to_string(scores_.size()) + " scores for " +
                std::to_string(pieces.size()) + " tokens");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    byte_ids_[b] = piece_to_id_.find(std::string_view(buf));
  }
}

void SpmModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  std::vector<Symbol> sym;
  for (size_t i = 0; i < word.size();) {
    size_t n = utf8_char_len(word, i);
    int32_t idx = int32_t(sym.size());
    sym.push_back({i, n, idx - 1, -1});
    if (idx > 0) sym[idx - 1].next = idx;
    i += n;
  }
  std::priority_queue<Bigram> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    size_t len = sym[left].len + sym[right].len;
    const int32_t id = piece_to_id_.find(word.substr(sym[left].begin, len));
    if (id < 0) return;
    queue.push({scores_[static_cast<size_t>(id)], left, right, len});
  };
  for (int32_t k = 1; k < int32_t(sym.size()); ++k) consider(k - 1, k);
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& left = sym[b.left];
    Symbol& right = sym[b.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len || left.next != b.right) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = b.left;
    consider(left.prev, b.left);
    consider(b.left, left.next);
  }
  // Every merged symbol is a piece by construction; single characters may not be.
  for (int32_t k = 0; k >= 0; k = sym[k].next) {
    std::string_view text = word.substr(sym[k].begin, sym[k].len);
    if (const int32_t id = piece_to_id_.find(text); id >= 0) {
      out.push_back(id);
      continue;
    }
    bool all_bytes = true;
    for (char c : text) all_bytes &= byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : text) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    } else if (unk_id_) {
      out.push_back(*unk_id_);
    }
  }
}

}  // namespace hg::tok
