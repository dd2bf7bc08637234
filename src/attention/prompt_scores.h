// The prompt's attention scores that a dropping policy keeps its tokens by once the prompt is
// prefilled: H2O's accumulated attention and Keyformer's accumulated Gumbel-softmax, summed over
// every prompt row. The reference code of both (FMInference/H2O's H2OKVCache_LayerWise,
// d-matrix-ai/keyformer-llm) prefills the whole prompt with full attention, sums each key's scores
// over the prompt's query rows, and then evicts once: the recent window and the top-scored tokens
// before it stay. Here the scores are computed beside any exact prefill, from its queries and its
// keys as the cache holds them (RecordingAttention, engine/prefill_recorder.h; on the CPU device from
// the prefill attention's own score tiles), and kept in the prefill state under their name, so
// that one prefill serves h2o, keyformer and every exact policy together.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "device/device.h"
#include "hybridgen/model.h"
#include "kernels/cpu/prefill_attention.h"
#include "util/thread_pool.h"

namespace hg {

// Where a recorded prefill wants its rows' prompt scores from an attention's own scores:
// cpu::PrefillAttentionArgs's mass fields (softmax s's sums of work item i at mass[s] + i * ld_mass).
struct PromptMassSink {
  std::span<const cpu::MassSoftmax> softmax;
  float* const* mass = nullptr;
  int64_t ld_mass = 0;
};

struct PromptScoreSpec {
  enum class Kind { Attention, Gumbel };  // h2o, keyformer
  Kind kind = Kind::Attention;
  uint64_t seed = 0;  // Gumbel: the noise's seed (the policy's --seed)
  float tau = 1.0f;   // Gumbel: the prompt rows' temperature (--tau-init)

  // "h2o", or "keyformer seed=S tau=T" (T as %.9g, which gives the float back): what the prefill
  // state keys the scores by.
  std::string name() const;
  // The spec a name names; hg::Error for any other string.
  static PromptScoreSpec parse(const std::string& name);
};

// Adds prefill chunks' scores, layer by layer.
class PromptScorer {
 public:
  // Rows at positions [pos0, pos0 + n_rows) of `layer` (q: [n_rows][q_dim] after RoPE) over the
  // keys k: [pos0 + n_rows][kv_dim] fp32 (every row sees the keys up to its own position), rounded
  // to k_dtype, the cache's (bf16 keys take the bf16 Q·Kᵀ of the CPU device's prefill attention
  // where it runs one: kernels/cpu/prefill_attention_bf16.h).
  // scores[i], spec i's: [tokens][n_kv_heads], grown to pos0 + n_rows tokens (new ones 0) and
  // added to. The specs share one Q·Kᵀ; each one's scores are the bits a call with it alone gives,
  // and do not depend on the pool's size.
  void add_chunk(ThreadPool& pool, std::span<const PromptScoreSpec> specs, const ModelSpec& m, int layer,
                 const float* q, int n_rows, int64_t pos0, const float* k, DType k_dtype,
                 std::span<std::vector<float>> scores);

  // add_chunk in three steps, for a prefill whose attention computes the sums from its own Q·Kᵀ
  // (PromptState::attend_scored, attention/prompt_state.h): begin_chunk sizes the work items' buffers and returns where they
  // are; the attention fills them, or compute_chunk does (add_chunk's q and k); end_chunk adds them
  // onto the scores in item order.
  // bf16: as the attention's (Device::bf16_compute), for the same bits.
  PromptMassSink begin_chunk(std::span<const PromptScoreSpec> specs, const ModelSpec& m, int layer, int n_rows,
                             int64_t pos0, DType k_dtype, bool bf16 = true);
  void compute_chunk(ThreadPool& pool, const float* q, const float* k);
  void end_chunk(ThreadPool& pool, std::span<std::vector<float>> scores);

 private:
  // What the Gumbel noise of a spec is drawn from (keyformer_scores.h's gumbel_noise_row).
  struct Noise {
    uint64_t seed;
    int layer;
    int64_t pos0;
    const int32_t* key_pos;
  };
  std::vector<cpu::AttentionMassScratch> scratch_;  // per pool thread
  std::vector<float> items_;                        // [spec][item][keys]: each item's sums
  std::vector<int64_t> visible_;
  std::vector<int32_t> key_pos_;  // 0, 1, 2, ...: the Gumbel noise's key positions
  std::vector<Noise> noise_;      // per spec
  std::vector<cpu::MassSoftmax> softmax_;
  cpu::AttentionMassArgs args_;  // the chunk's, between begin_chunk and end_chunk
  std::vector<float*> mass_;     // per spec: its first item's buffer in items_
  int64_t n_items_ = 0, n_keys_ = 0;
};

}  // namespace hg
