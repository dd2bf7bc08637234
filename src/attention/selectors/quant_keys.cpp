#include "attention/selectors/quant_keys.h"

#include <algorithm>

#include "attention/host_ops.h"
#include "attention/selectors/top_k.h"
#include "hybridgen/error.h"
#include "kernels/cpu/key_scores_q4.h"
#include "kernels/cpu/matmul.h"
#include "model/quantize.h"

namespace hg {

namespace {
constexpr DType kCopyType = DType::Q4_1;
}

QuantKeySelector::QuantKeySelector(const SelectorContext& c)
    : row_bytes_(dtype_row_bytes(kCopyType, c.spec.head_dim)),
      tile_bytes_(cpu::q4_tile_bytes(c.spec.head_dim)),
      copies_(c.n_seqs, c.spec.n_layers, c.spec.n_kv_heads) {
  if (c.spec.head_dim % dtype_block_elems(kCopyType) != 0)
    throw Error("--predictor q4: head_dim " + std::to_string(c.spec.head_dim) + " is not a multiple of " +
                std::to_string(dtype_block_elems(kCopyType)) + " (the 4-bit blocks of its key copy)");
}

void QuantKeySelector::reset(int seq) { copies_.reset(seq); }

void QuantKeySelector::catch_up(Copy& c, const KvLayout& k, int g, int64_t n_tokens, SelectorScratch& s) const {
  const int hd = k.head_dim;
  if (n_tokens < c.n_tokens) c.n_tokens = 0;  // a new request on the store: fold it again
  const size_t need = static_cast<size_t>(cpu::q4_tile_count(n_tokens)) * tile_bytes_;
  if (c.tiles.size() < need) c.tiles.resize(std::max(need, c.tiles.size() * 3 / 2 / tile_bytes_ * tile_bytes_));
  s.row.resize(static_cast<size_t>(hd));
  s.q4_row.resize(row_bytes_);
  for (int64_t t = c.n_tokens; t < n_tokens; ++t) {
    cpu::dequantize_row(k.dtype, k.row(g, t), hd, 0, s.row.data());
    quantize_row(kCopyType, s.row.data(), hd, s.q4_row.data());
    cpu::q4_put_token(c.tiles.data(), t, s.q4_row.data(), hd);
  }
  c.n_tokens = n_tokens;
}

void QuantKeySelector::select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out,
                              SelectorScratch& s) {
  const KvLayout& k = r.k;
  const int group = r.n_heads / k.n_kv_heads, hd = k.head_dim;
  const int64_t n = r.n_tokens;
  const int64_t n_tiles = cpu::q4_tile_count(n);
  s.scores.resize(static_cast<size_t>(n_tiles * cpu::kQ4TileTokens));
  for (int g = g_begin; g < g_end; ++g) {
    Copy& c = copies_.at(r.seq, r.layer, g);
    catch_up(c, k, g, n, s);
    // The group's query heads against every key of the copy (unscaled: only the order counts).
    cpu::q4_query(r.q + static_cast<size_t>(g) * group * hd, group, hd, s.q4_query);
    cpu::q4_key_scores(c.tiles.data(), n_tiles, s.q4_query, s.scores.data());
    top_k_indices(s.scores.data(), n, r.K, out.idx + static_cast<int64_t>(g) * r.K, s.order);
  }
  if (out.logits) host_logits_selected(k, r.q, r.n_heads, r.scale, out.idx, r.K, g_begin, g_end, out.logits);
}

}  // namespace hg
