// What a prefill leaves behind, kept so that it runs once: the prompt, its last token's logits,
// every layer's K and V rows, each layer's first query rows (what a predictor learns from the
// prompt: InfiniGen's skew) and, when asked for, the prompt's attention scores by which h2o and
// keyformer keep tokens (attention/prompt_scores.h). Every policy's prefill of a prompt is exact
// attention over the whole prompt (the dropping ones, streaming, h2o and keyformer, evict once
// after it, as their papers' code does, unless --exact-prefill false), so one recorded prefill
// serves them all: the engine places the rows as its own prefill would (Engine::load_state).
//
// The file (`generate --save-state`, `--load-state`; llama.cpp's --prompt-cache): the magic
// "HGSTATE\0", a u32 format version, a u32 header length, a JSON header (model fingerprint,
// shapes, counts, the names of the scores), then little-endian arrays: tokens i32[n], logits
// f32[vocab], then per layer K f32[n][kv_dim], V f32[n][kv_dim], Q f32[q_rows][q_dim] and each
// score's f32[n][n_kv_heads]. K and V are kept in fp32, as the forward pass hands them to the
// cache, so a loaded state stores the same cache values (in any --kv-dtype) as the prefill did.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace hg {

class Model;

struct PrefillState {
  static constexpr uint32_t kVersion = 2;  // 2: the prompt scores
  static constexpr int kQueryRows = 2048;  // query rows kept per layer (InfiniGen's skew reads 2048)

  std::string fingerprint;  // model_fingerprint() of the model that made it
  int n_layers = 0, kv_dim = 0, q_dim = 0, n_kv_heads = 0, vocab = 0;
  std::vector<int32_t> tokens;  // the prompt, from position 0
  std::vector<float> logits;    // [vocab]: the last token's
  // The prompt scores kept (PromptScoreSpec::name: "h2o", "keyformer seed=S tau=T"); a prefill
  // recording into this state computes the ones named here before it starts.
  std::vector<std::string> score_names;
  struct Layer {
    std::vector<float> k, v;  // [tokens][kv_dim]
    std::vector<float> q;     // [min(tokens, kQueryRows)][q_dim]
    std::vector<std::vector<float>> scores;  // [score][tokens][n_kv_heads], as score_names
  };
  std::vector<Layer> layers;

  // An empty state for `model`, ready to record a prefill into.
  static PrefillState for_model(const Model& model);
  int n_tokens() const { return static_cast<int>(tokens.size()); }
  int q_rows() const { return layers.empty() ? 0 : static_cast<int>(layers[0].q.size() / q_dim); }
  // hg::Error naming `what` when the state was made by another model. model_print: the model's
  // (model_fingerprint), when the caller keeps it; computed otherwise.
  void check_model(const Model& model, const std::string& what, std::string model_print = {}) const;
  // The first n tokens of the state (n <= n_tokens(); the logits and the scores, which later rows
  // added to, are dropped unless n is all).
  PrefillState prefix(int n) const;
  // The index of the score named `name` in score_names, or -1.
  int score_index(const std::string& name) const;
  // True when the state holds every score of `names`.
  bool holds_scores(const std::vector<std::string>& names) const;
  size_t bytes() const;
};

// Writes the state (to a temporary file, renamed over `path`: a reader never sees half of one).
void save_prefill_state(const PrefillState& s, const std::filesystem::path& path);
// hg::Error naming the file when it is not a state file, has another version, is truncated or
// inconsistent.
PrefillState load_prefill_state(const std::filesystem::path& path);
// The same from `size` bytes of a stream (the fuzz target); `name` names it in errors.
PrefillState read_prefill_state(std::istream& in, uint64_t size, const std::string& name);

}  // namespace hg
