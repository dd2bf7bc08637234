// ModelSpec (architecture-neutral hyperparameters), tensor views into mapped files, and the
// per-architecture weight tables. Loaders live in src/model/.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hybridgen/dtype.h"

namespace hg {

enum class Arch { Opt, Llama, Qwen2 };
std::string_view arch_name(Arch a);

enum class RopeLayout {
  RotateHalf,   // HF layout: pairs (i, i + head_dim/2)
  Interleaved,  // pairs (2i, 2i+1): llama-architecture GGUF files store Wq/Wk permuted for this
};

struct RopeScaling {
  bool llama3 = false;  // rope_scaling.rope_type == "llama3"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;
};

struct ModelSpec {
  Arch arch = Arch::Llama;
  std::string name;
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int d_ff = 0;
  int vocab_size = 0;
  int max_ctx = 0;          // max_position_embeddings
  float norm_eps = 1e-5f;
  // Llama / Qwen2
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  // [head_dim / 2] GGUF's rope_freqs.weight (llama3 scaling written as data by llama.cpp's
  // converter): frequency i is divided by rope_freq_factors[i]. Empty: none.
  std::vector<float> rope_freq_factors;
  RopeLayout rope_layout = RopeLayout::RotateHalf;
  bool qkv_bias = false;    // Qwen2
  bool tied_embeddings = false;
  // OPT
  bool do_layer_norm_before = true;
  int word_embed_proj_dim = 0;  // == d_model unless project_in/out exist
  int pos_offset = 2;           // OPT learned positions start at index 2
  // special tokens as stored with the weights (-1: none)
  int bos_id = -1;
  int eos_id = -1;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  bool is_opt() const { return arch == Arch::Opt; }
};

// A read-only view of one tensor inside a mapped file or owned buffer.
// shape is row-major, outermost first: a linear layer's weight is [out_features, in_features].
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;

  bool present() const { return data != nullptr; }
  int64_t numel() const;
  int64_t rows() const { return shape.empty() ? 0 : (shape.size() == 1 ? 1 : shape[0]); }
  int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
};

// Weights of one transformer block. Absent optional tensors have data == nullptr.
struct LayerWeights {
  TensorView attn_norm, attn_norm_bias;  // [d_model] (bias: OPT LayerNorm)
  TensorView wq, wk, wv;                 // [q_dim, d_model], [kv_dim, d_model], [kv_dim, d_model]
  TensorView bq, bk, bv;                 // [q_dim], [kv_dim], [kv_dim] (OPT, Qwen2)
  TensorView wo, bo;                     // [d_model, q_dim], [d_model] (bo: OPT)
  TensorView ffn_norm, ffn_norm_bias;    // [d_model]
  TensorView w_gate;                     // [d_ff, d_model] (Llama/Qwen2 SwiGLU)
  TensorView w_up, b_up;                 // [d_ff, d_model], [d_ff] (OPT fc1)
  TensorView w_down, b_down;             // [d_model, d_ff], [d_model] (OPT fc2)
};

struct ModelWeights {
  TensorView tok_embed;                   // [vocab_size, word_embed_proj_dim or d_model]
  TensorView pos_embed;                   // [max_ctx + pos_offset, d_model] (OPT)
  TensorView project_in, project_out;     // [d_model, proj_dim], [proj_dim, d_model] (OPT)
  std::vector<LayerWeights> layers;
  TensorView final_norm, final_norm_bias; // [d_model]
  TensorView lm_head;                     // [vocab_size, d_model or proj_dim]; == tok_embed if tied
};

// A loaded model: spec, weights, and the storage (mapped files, owned buffers) behind the views.
class Model {
 public:
  ModelSpec spec;
  ModelWeights weights;
  std::filesystem::path source;  // file or directory it came from
  std::string format;            // "safetensors", "gguf" or "synthetic"

  // Keeps mmaps and owned buffers alive as long as the model.
  std::vector<std::shared_ptr<void>> storage;

  int64_t n_params() const;
  size_t weight_bytes() const;
  // Bytes of the distinct weight tensors as `bytes_of` counts each (a device's stored size).
  size_t weight_bytes(const std::function<size_t(const TensorView&)>& bytes_of) const;
};

// Loads an HF directory (config.json + safetensors) or a .gguf file. `name_or_path` may be the
// alias of a cached real model: "smollm2" (the default) or "qwen2.5-0.5b" (see tools/fetch_model.sh).
std::unique_ptr<Model> load_model(const std::string& name_or_path);
// Builds a seeded random model from a shape config (configs/models/NAME.yaml).
std::unique_ptr<Model> make_synthetic_model(const std::filesystem::path& shape_yaml, DType weight_dtype,
                                            uint64_t seed);
// Reads a shape config (configs/models/NAME.yaml) without building weights.
ModelSpec load_shape_config(const std::filesystem::path& shape_yaml);
// Parameters a model of this spec has (tied weights once), without loading it.
int64_t count_params(const ModelSpec& spec);
// Resolves aliases ("smollm2", "qwen2.5-0.5b") to a path; returns the input otherwise. Throws hg::Error
// (telling the user to run tools/fetch_model.sh) when the alias's file is not cached.
std::filesystem::path resolve_model_path(const std::string& name_or_path);
// ${HG_CACHE:-~/.cache/hybridgen}: cached models (models/) and K_min profiles (profiles/).
std::filesystem::path cache_dir();
// 16 hex digits identifying the weights (src/model/fingerprint.cpp): what K_min profiles and
// prefill state files are keyed by.
std::string model_fingerprint(const Model& model);
// Parses a weight dtype name (case-insensitive): a type the quantizers write, f32 … q5_1.
DType parse_weight_dtype(const std::string& name);
// Multi-line human-readable summary for `hybridgen info`: spec, parameters, bytes, dtypes.
std::string describe(const Model& model);

}  // namespace hg
