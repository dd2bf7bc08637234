// Quest (Tang et al., ICML 2024, "Quest: Query-Aware Sparsity for Efficient Long-Context LLM
// Inference"; mit-han-lab/Quest, evaluation/quest_attention.py): the keys in pages of 16 tokens,
// per page and kv-head the element-wise min and max of its keys; at every step the upper bound of
// a head's logits over a page, Σ_d max(q_d·min_d, q_d·max_d), ranks the pages, and the best pages
// by budget are attended exactly: their K and V rows are fetched to the device, which scores them
// with the true query (Shipment::KeyValue, as InfiniGen's fetch).
//
// Where the host path differs from the paper's GPU kernels:
//  - the device keeps the policy's sinks and recent window, so Quest ranks the host tokens only;
//    pages start at host token 0 (the oldest);
//  - one selection per kv-head, shared by its query heads (the fetched rows are per kv-head): a
//    page's score is the largest of its bounds over the group's heads, so a page that one head
//    would rank first stays in front (Quest, written for MHA, ranks pages per head). Measured on
//    SmolLM2 (3 heads per kv-head, 2048 tokens, K 128): KL 0.0277 with the max, 0.0286 with the
//    sum;
//  - the budget is the step plan's K (--k), rounded down to whole pages, at least one (a budget
//    of every host token takes them all); when a chosen page is the newest, partial one, the
//    next page in rank fills up to the budget with its most recent tokens, so every kv-head
//    ships exactly K tokens;
//  - layers 0 and 1 attend every host token, as Quest's evaluation does (layer_id < 2).
// The bounds grow with the host store (choose_k, on one worker, before the kv-heads split), per
// (sequence, layer): [pages][n_kv_heads][head_dim] min and max in fp32, beside the host store.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "attention/host_ops.h"
#include "attention/selectors/selector.h"
#include "kernels/cpu/matmul.h"

namespace hg {

namespace {

constexpr int kQuestPageTokens = 16;
constexpr int kQuestDenseLayers = 2;

class QuestSelector final : public Selector {
 public:
  explicit QuestSelector(const SelectorContext& c)
      : spec_(c.spec), bounds_(static_cast<size_t>(c.n_seqs) * c.spec.n_layers) {}
  std::string name() const override { return "quest"; }
  bool post_qk() const override { return false; }
  Shipment ships() const override { return Shipment::KeyValue; }

  int choose_k(const SelectionRequest& r, SelectorScratch& scratch) override {
    catch_up(bounds(r.seq, r.layer), r.k, r.n_tokens, scratch);
    return planned_k(r.layer, r.K, r.n_tokens);
  }

  int planned_k(int layer, int K, int64_t n_tokens) const override {
    if (layer < kQuestDenseLayers || K >= n_tokens) return static_cast<int>(n_tokens);
    if (K <= 0) return 0;
    const int64_t pages = std::max<int64_t>(1, K / kQuestPageTokens);
    return static_cast<int>(std::min<int64_t>(n_tokens, pages * kQuestPageTokens));
  }

  void select(const SelectionRequest& r, int g_begin, int g_end, SelectedTokens out, SelectorScratch& s) override {
    const int K = r.K;
    if (K <= 0) return;
    const PageBounds& b = bounds(r.seq, r.layer);
    const int hd = spec_.head_dim, n_kv = spec_.n_kv_heads, group = r.n_heads / n_kv;
    const int64_t n_pages = (r.n_tokens + kQuestPageTokens - 1) / kQuestPageTokens;
    for (int g = g_begin; g < g_end; ++g) {
      int32_t* idx = out.idx + static_cast<int64_t>(g) * K;
      if (K >= r.n_tokens) {
        std::iota(idx, idx + K, 0);
        continue;
      }
      s.scores.resize(static_cast<size_t>(n_pages));
      for (int64_t p = 0; p < n_pages; ++p) {
        const float* lo = b.min.data() + (static_cast<size_t>(p) * n_kv + g) * hd;
        const float* hi = b.max.data() + (static_cast<size_t>(p) * n_kv + g) * hd;
        float bound = -INFINITY;
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const float* q = r.q + static_cast<size_t>(h) * hd;
          float b = 0;
          for (int d = 0; d < hd; ++d) b += std::max(q[d] * lo[d], q[d] * hi[d]);
          bound = std::max(bound, b);
        }
        s.scores[static_cast<size_t>(p)] = bound;
      }
      // pages by bound, highest first; ties to the more recent page
      s.order.resize(static_cast<size_t>(n_pages));
      std::iota(s.order.begin(), s.order.end(), 0);
      std::sort(s.order.begin(), s.order.end(), [&](int32_t a, int32_t c) {
        const float sa = s.scores[static_cast<size_t>(a)], sc = s.scores[static_cast<size_t>(c)];
        return sa != sc ? sa > sc : a > c;
      });
      int taken = 0;
      for (int32_t p : s.order) {
        const int64_t first = static_cast<int64_t>(p) * kQuestPageTokens;
        const int64_t end = std::min<int64_t>(first + kQuestPageTokens, r.n_tokens);
        const int64_t from = std::max<int64_t>(first, end - (K - taken));  // the page's newest, to fill up
        for (int64_t t = from; t < end; ++t) idx[taken++] = static_cast<int32_t>(t);
        if (taken == K) break;
      }
      std::sort(idx, idx + K);
    }
    if (out.logits) host_logits_selected(r.k, r.q, r.n_heads, r.scale, out.idx, K, g_begin, g_end, out.logits);
  }

  void reset(int seq) override {
    for (int l = 0; l < spec_.n_layers; ++l) bounds(seq, l) = PageBounds{};
  }

 private:
  struct PageBounds {
    int64_t n_tokens = 0;        // host tokens folded in
    std::vector<float> min, max;  // [pages][n_kv_heads][head_dim]
  };
  PageBounds& bounds(int seq, int layer) { return bounds_[static_cast<size_t>(seq) * spec_.n_layers + layer]; }

  // Folds host tokens [b.n_tokens, n_tokens) into their pages' bounds.
  void catch_up(PageBounds& b, const KvLayout& k, int64_t n_tokens, SelectorScratch& s) const {
    const int hd = spec_.head_dim, n_kv = spec_.n_kv_heads;
    const size_t page_floats = static_cast<size_t>(n_kv) * hd;
    const size_t floats = static_cast<size_t>((n_tokens + kQuestPageTokens - 1) / kQuestPageTokens) * page_floats;
    if (b.min.size() < floats) {
      b.min.resize(floats);
      b.max.resize(floats);
    }
    s.row.resize(static_cast<size_t>(hd));
    for (int64_t t = b.n_tokens; t < n_tokens; ++t) {
      const size_t page = static_cast<size_t>(t / kQuestPageTokens);
      for (int g = 0; g < n_kv; ++g) {
        cpu::dequantize_row(k.dtype, k.row(g, t), hd, 0, s.row.data());
        float* lo = b.min.data() + page * page_floats + static_cast<size_t>(g) * hd;
        float* hi = b.max.data() + page * page_floats + static_cast<size_t>(g) * hd;
        const bool first = t % kQuestPageTokens == 0;
        for (int d = 0; d < hd; ++d) {
          const float x = s.row[static_cast<size_t>(d)];
          lo[d] = first ? x : std::min(lo[d], x);
          hi[d] = first ? x : std::max(hi[d], x);
        }
      }
    }
    b.n_tokens = n_tokens;
  }

  const ModelSpec& spec_;
  std::vector<PageBounds> bounds_;  // [seq * n_layers + layer]
};

}  // namespace

std::unique_ptr<Selector> make_quest_selector(const SelectorContext& c) { return std::make_unique<QuestSelector>(c); }

}  // namespace hg
