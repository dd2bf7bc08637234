#include <cstdio>
#include <queue>

#include "hybridgen/error.h"
#include "tokenizer/model.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

namespace {
std::string byte_piece(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// A symbol of the word being merged: a doubly linked list over a vector, so merging is O(1).
struct Symbol {
  int32_t id;  // -1 once merged into its left neighbour
  int32_t prev, next;
};

struct Candidate {
  int32_t rank, pos, left, right, merged;
  // Lowest rank first; among equal ranks the leftmost, as HF and llama.cpp do.
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};
}  // namespace

void PairMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;  // load factor <= 1/2 keeps probe chains short
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
}

bool PairMap::insert(uint64_t key, int32_t rank, int32_t merged_id) {
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key) return false;
    if (e.key == kEmpty) {
      e = {key, rank, merged_id};
      return true;
    }
  }
}

StringIndex::StringIndex(const std::vector<std::string>* strings) : strings_(strings) {
  const size_t n = strings ? strings->size() : 0;
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;  // load factor <= 1/2
  slots_.assign(cap, Slot{0, -1});
  mask_ = cap - 1;
  for (size_t id = 0; id < n; ++id) {
    const std::string& s = (*strings)[id];
    if (s.empty()) continue;
    const uint32_t h = hash(s);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = {h, static_cast<int32_t>(id)};
        break;
      }
      if (slot.hash == h && (*strings)[static_cast<size_t>(slot.id)] == s) break;  // a lower id has it
    }
  }
}

int32_t StringIndex::find(std::string_view s) const {
  if (slots_.empty()) return -1;
  const uint32_t h = hash(s);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.id < 0) return -1;
    if (slot.hash == h && (*strings_)[static_cast<size_t>(slot.id)] == s) return slot.id;
  }
}

BpeModel::BpeModel(std::vector<std::string> keys, const std::vector<std::pair<std::string, std::string>>& merges,
                   const BpeOptions& options, const std::string& where)
    : options_(options), keys_(std::move(keys)), key_to_id_(&keys_) {
  for (int b = 0; b < 256; ++b)
    byte_ids_[b] = options_.byte_level ? key_to_id_.find(std::string(1, char(b))) : key_to_id_.find(byte_piece(b));
  for (int c = 0; c < 128; ++c) ascii_ids_[c] = key_to_id_.find(std::string(1, char(c)));
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = key_to_id_.find(a), ib = key_to_id_.find(b);
    joined.assign(a).append(b);
    const int32_t im = key_to_id_.find(joined);
    const char* missing = ia < 0 ? "left" : ib < 0 ? "right" : im < 0 ? "merged" : nullptr;
    if (missing)
      throw Error(where + ": merges[" + std::to_string(rank) + "]: the " + missing +
                  " token is not in the vocabulary");
    // The first occurrence of a pair wins, as in HF (later duplicates never fire).
    merges_.insert(pair_key(ia, ib), int32_t(rank), im);
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  bool previous_unk = false;
  auto push_unk = [&] {
    if (!options_.unk_id) return;  // no unk token: HF drops the character
    if (!(options_.fuse_unk && previous_unk)) ids.push_back(*options_.unk_id);
    previous_unk = true;
  };
  if (options_.byte_level) {
    for (char c : word) {
      int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) {
        ids.push_back(id);
        previous_unk = false;
      } else {
        push_unk();
      }
    }
    return;
  }
  for (size_t i = 0; i < word.size();) {
    auto c = static_cast<unsigned char>(word[i]);
    if (c < 128 && ascii_ids_[c] >= 0) {
      ids.push_back(ascii_ids_[c]);
      previous_unk = false;
      ++i;
      continue;
    }
    size_t n = utf8_char_len(word, i);
    if (const int32_t id = key_to_id_.find(word.substr(i, n)); id >= 0) {
      ids.push_back(id);
      previous_unk = false;
    } else if (options_.byte_fallback && [&] {
                 for (size_t k = 0; k < n; ++k)
                   if (byte_ids_[static_cast<uint8_t>(word[i + k])] < 0) return false;
                 return true;
               }()) {
      for (size_t k = 0; k < n; ++k) ids.push_back(byte_ids_[static_cast<uint8_t>(word[i + k])]);
      previous_unk = false;
    } else {
      push_unk();
    }
    i += n;
  }
}

void BpeModel::merge(std::vector<int32_t>& ids) const {
  if (ids.size() < 2) return;
  std::vector<Symbol> sym(ids.size());
  for (size_t k = 0; k < ids.size(); ++k)
    sym[k] = {ids[k], int32_t(k) - 1, k + 1 < ids.size() ? int32_t(k + 1) : -1};
  std::vector<Candidate> heap_storage;
  heap_storage.reserve(ids.size() * 2);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap(std::greater<>{},
                                                                              std::move(heap_storage));
  auto consider = [&](int32_t pos) {
    if (pos < 0) return;
    int32_t next = sym[pos].next;
    if (next < 0) return;
    if (const auto* e = merges_.find(pair_key(sym[pos].id, sym[next].id)))
      heap.push({e->rank, pos, sym[pos].id, sym[next].id, e->merged_id});
  };
  for (int32_t k = 0; k + 1 < int32_t(sym.size()); ++k) consider(k);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    // Stale candidates: one side was merged away or changed since the pair was queued.
    if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;
    int32_t right_pos = left.next;
    Symbol& right = sym[right_pos];
    left.id = c.merged;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    right.id = -1;
    right.next = -1;
    consider(left.prev);
    consider(c.pos);
  }
  ids.clear();
  for (int32_t k = 0; k >= 0; k = sym[k].next) ids.push_back(sym[k].id);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = key_to_id_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  initial_symbols(word, ids);
  merge(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace hg::tok
