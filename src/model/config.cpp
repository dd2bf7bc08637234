#include "model/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"
#include "model/gguf.h"
#include "model/weight_table.h"

namespace hg {

using nlohmann::json;

namespace {

// Typed reads from config.json with messages that name the field.
class ConfigReader {
 public:
  ConfigReader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int get_int(const char* key) const {
    if (!has(key)) throw Error(file_ + ": missing field '" + key + "'");
    return to_int(j_[key], key);
  }
  int get_int(const char* key, int def) const { return has(key) ? to_int(j_[key], key) : def; }

  double get_float(const char* key, double def) const {
    if (!has(key)) return def;
    if (!j_[key].is_number()) throw Error(file_ + ": field '" + key + "': expected a number, got " + j_[key].dump());
    return j_[key].get<double>();
  }
  bool get_bool(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_[key].is_boolean()) throw Error(file_ + ": field '" + key + "': expected true or false, got " + j_[key].dump());
    return j_[key].get<bool>();
  }
  std::string get_string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    if (!j_[key].is_string()) throw Error(file_ + ": field '" + key + "': expected a string, got " + j_[key].dump());
    return j_[key].get<std::string>();
  }
  // Token ids may be one integer or a list (Llama 3.1 lists several eos ids): take the first.
  int get_token_id(const char* key) const {
    if (!has(key)) return -1;
    const json& v = j_[key];
    if (v.is_array()) return v.empty() ? -1 : to_int(v[0], key);
    return to_int(v, key);
  }
  const std::string& file() const { return file_; }
  const json& raw() const { return j_; }

 private:
  int to_int(const json& v, const char* key) const {
    if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
      throw Error(file_ + ": field '" + key + "': expected an integer, got " + v.dump());
    return static_cast<int>(v.get<int64_t>());
  }
  const json& j_;
  std::string file_;
};

void read_rope_scaling(const ConfigReader& c, ModelSpec& spec) {
  if (!c.has("rope_scaling")) return;
  const json& rs = c.raw()["rope_scaling"];
  if (!rs.is_object()) throw Error(c.file() + ": field 'rope_scaling': expected an object or null");
  ConfigReader r(rs, c.file() + ": rope_scaling");
  std::string type = r.get_string("rope_type", r.get_string("type", ""));
  if (type == "default" || type.empty()) return;
  if (type != "llama3")
    throw Error(c.file() + ": field 'rope_scaling.rope_type': '" + type + "' is not supported (expected llama3)");
  spec.rope_scaling.llama3 = true;
  spec.rope_scaling.factor = static_cast<float>(r.get_float("factor", 8.0));
  spec.rope_scaling.low_freq_factor = static_cast<float>(r.get_float("low_freq_factor", 1.0));
  spec.rope_scaling.high_freq_factor = static_cast<float>(r.get_float("high_freq_factor", 4.0));
  spec.rope_scaling.original_max_position = r.get_int("original_max_position_embeddings", 8192);
}

void read_opt(const ConfigReader& c, ModelSpec& spec) {
  spec.arch = Arch::Opt;
  spec.d_model = c.get_int("hidden_size");
  spec.n_layers = c.get_int("num_hidden_layers");
  spec.n_heads = c.get_int("num_attention_heads");
  spec.n_kv_heads = spec.n_heads;
  if (spec.n_heads > 0) spec.head_dim = spec.d_model / spec.n_heads;
  spec.d_ff = c.get_int("ffn_dim");
  spec.vocab_size = c.get_int("vocab_size");
  spec.max_ctx = c.get_int("max_position_embeddings");
  spec.norm_eps = static_cast<float>(c.get_float("layer_norm_eps", 1e-5));
  spec.do_layer_norm_before = c.get_bool("do_layer_norm_before", true);
  spec.word_embed_proj_dim = c.get_int("word_embed_proj_dim", spec.d_model);
  spec.tied_embeddings = true;  // OPTForCausalLM always ties lm_head to embed_tokens
  spec.pos_offset = 2;
  std::string act = c.get_string("activation_function", "relu");
  if (act != "relu") throw Error(c.file() + ": field 'activation_function': '" + act + "' is not supported (expected relu)");
  if (!c.get_bool("enable_bias", true))
    throw Error(c.file() + ": field 'enable_bias': false is not supported (OPT checkpoints have biases)");
  if (!c.get_bool("layer_norm_elementwise_affine", true))
    throw Error(c.file() + ": field 'layer_norm_elementwise_affine': false is not supported");
  if (c.get_bool("_remove_final_layer_norm", false))
    throw Error(c.file() + ": field '_remove_final_layer_norm': true is not supported");
}

void read_llama_like(const ConfigReader& c, ModelSpec& spec, bool qwen2) {
  spec.arch = qwen2 ? Arch::Qwen2 : Arch::Llama;
  spec.d_model = c.get_int("hidden_size");
  spec.n_layers = c.get_int("num_hidden_layers");
  spec.n_heads = c.get_int("num_attention_heads");
  spec.n_kv_heads = c.get_int("num_key_value_heads", spec.n_heads);
  spec.head_dim = c.get_int("head_dim", spec.n_heads > 0 ? spec.d_model / spec.n_heads : 0);
  spec.d_ff = c.get_int("intermediate_size");
  spec.vocab_size = c.get_int("vocab_size");
  spec.max_ctx = c.get_int("max_position_embeddings");
  spec.norm_eps = static_cast<float>(c.get_float("rms_norm_eps", 1e-6));
  spec.rope_theta = static_cast<float>(c.get_float("rope_theta", qwen2 ? 1e6 : 10000.0));
  spec.tied_embeddings = c.get_bool("tie_word_embeddings", false);
  spec.qkv_bias = qwen2;  // Qwen2 always has q/k/v biases
  spec.word_embed_proj_dim = spec.d_model;
  spec.pos_offset = 0;
  read_rope_scaling(c, spec);
  std::string act = c.get_string("hidden_act", "silu");
  if (act != "silu") throw Error(c.file() + ": field 'hidden_act': '" + act + "' is not supported (expected silu)");
  if (c.get_bool("attention_bias", false) && !qwen2)
    throw Error(c.file() + ": field 'attention_bias': true is not supported for llama");
  if (c.get_bool("mlp_bias", false)) throw Error(c.file() + ": field 'mlp_bias': true is not supported");
}

}  // namespace

ModelSpec spec_from_hf_config_text(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(file + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(file + ": expected a JSON object");
  ConfigReader c(j, file);
  if (!c.has("model_type")) throw Error(file + ": missing field 'model_type'");
  std::string type = c.get_string("model_type", "");
  ModelSpec spec;
  if (type == "opt") read_opt(c, spec);
  else if (type == "llama") read_llama_like(c, spec, false);
  else if (type == "qwen2") read_llama_like(c, spec, true);
  else throw Error(file + ": field 'model_type': '" + type + "' is not supported (expected opt, llama or qwen2)");
  spec.bos_id = c.get_token_id("bos_token_id");
  spec.eos_id = c.get_token_id("eos_token_id");
  spec.rope_layout = RopeLayout::RotateHalf;
  validate_spec(spec, file);
  return spec;
}

ModelSpec spec_from_hf_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) throw Error(config_json.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  ModelSpec spec = spec_from_hf_config_text(ss.str(), config_json.string());
  spec.name = config_json.parent_path().filename().string();
  return spec;
}

// Llama 3.x GGUF files carry their llama3 rope scaling as a tensor: llama.cpp's converter writes
// rope_freqs.weight, f32 [head_dim / 2], one divisor per rotary pair (1 for high frequencies,
// `factor` for low ones, the smooth blend between), which ggml's rope applies to each pair's
// frequency. Read after head_dim is known.
void read_rope_freqs(const gguf::File& f, ModelSpec& spec) {
  const std::optional<TensorView> t = f.find_tensor("rope_freqs.weight");
  if (!t) return;
  const std::string what = f.path().string() + ": tensor 'rope_freqs.weight'";
  const int64_t half = spec.head_dim / 2;
  if (t->dtype != DType::F32) throw Error(what + ": expected f32, got " + std::string(dtype_name(t->dtype)));
  if (t->shape.size() != 1 || t->shape[0] != half)
    throw Error(what + ": expected shape [" + std::to_string(half) + "] (head_dim / 2), got " + shape_str(t->shape));
  const auto* factors = static_cast<const float*>(t->data);
  spec.rope_freq_factors.assign(factors, factors + half);
  for (int64_t i = 0; i < half; ++i)
    if (!(spec.rope_freq_factors[i] > 0.0f) || !std::isfinite(spec.rope_freq_factors[i]))
      throw Error(what + ": element " + std::to_string(i) + " is " + std::to_string(spec.rope_freq_factors[i]) +
                  ", expected a positive finite frequency divisor");
}

ModelSpec spec_from_gguf(const gguf::File& f) {
  const std::string file = f.path().string();
  const std::string arch = f.get_string("general.architecture");
  ModelSpec spec;
  if (arch == "llama") {
    spec.arch = Arch::Llama;
    // convert_hf_to_gguf permutes Wq/Wk so that RoPE rotates adjacent pairs.
    spec.rope_layout = RopeLayout::Interleaved;
  } else if (arch == "qwen2") {
    spec.arch = Arch::Qwen2;
    spec.rope_layout = RopeLayout::RotateHalf;
    spec.qkv_bias = true;
  } else {
    throw Error(file + ": metadata 'general.architecture': '" + arch + "' is not supported (expected llama or qwen2)");
  }
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  auto get_int32 = [&](const std::string& k) {
    int64_t v = f.get_int(k);
    if (v <= 0 || v > INT32_MAX) throw Error(file + ": metadata '" + k + "': expected a positive integer, got " + std::to_string(v));
    return static_cast<int>(v);
  };
  spec.name = f.find_string("general.name").value_or(f.path().stem().string());
  spec.n_layers = get_int32(key("block_count"));
  spec.max_ctx = get_int32(key("context_length"));
  spec.d_model = get_int32(key("embedding_length"));
  spec.d_ff = get_int32(key("feed_forward_length"));
  spec.n_heads = get_int32(key("attention.head_count"));
  spec.n_kv_heads = f.has(key("attention.head_count_kv")) ? get_int32(key("attention.head_count_kv")) : spec.n_heads;
  if (f.has(key("attention.key_length"))) spec.head_dim = get_int32(key("attention.key_length"));
  else if (f.has(key("rope.dimension_count"))) spec.head_dim = get_int32(key("rope.dimension_count"));
  else spec.head_dim = spec.d_model / spec.n_heads;
  spec.rope_theta = static_cast<float>(f.find_float(key("rope.freq_base")).value_or(arch == "qwen2" ? 1e6 : 10000.0));
  spec.norm_eps = static_cast<float>(f.get_float(key("attention.layer_norm_rms_epsilon")));
  if (f.has(key("vocab_size"))) spec.vocab_size = get_int32(key("vocab_size"));
  else if (auto n = f.find_array_size("tokenizer.ggml.tokens")) spec.vocab_size = static_cast<int>(*n);
  else throw Error(file + ": metadata '" + key("vocab_size") + "' and 'tokenizer.ggml.tokens' are both missing");
  if (auto type = f.find_string(key("rope.scaling.type")); type && *type != "none")
    throw Error(file + ": metadata '" + key("rope.scaling.type") + "': '" + *type + "' is not supported");
  read_rope_freqs(f, spec);
  // Each block has at least 9 tensors: a block_count the file cannot hold is caught here, before
  // per-layer tables are allocated.
  if (static_cast<size_t>(spec.n_layers) * 9 > f.tensors().size())
    throw Error(file + ": metadata '" + key("block_count") + "' is " + std::to_string(spec.n_layers) +
                " but the file holds only " + std::to_string(f.tensors().size()) + " tensors");
  bool has_output = false;
  for (const auto& t : f.tensors()) has_output |= t.name == "output.weight";
  spec.tied_embeddings = !has_output;
  spec.word_embed_proj_dim = spec.d_model;
  spec.pos_offset = 0;
  spec.bos_id = static_cast<int>(f.find_int("tokenizer.ggml.bos_token_id").value_or(-1));
  spec.eos_id = static_cast<int>(f.find_int("tokenizer.ggml.eos_token_id").value_or(-1));
  validate_spec(spec, file);
  return spec;
}

void validate_spec(const ModelSpec& s, const std::string& origin) {
  auto positive = [&](const char* field, int v) {
    if (v <= 0) throw Error(origin + ": " + field + " must be positive, got " + std::to_string(v));
  };
  positive("n_layers", s.n_layers);
  positive("d_model", s.d_model);
  positive("n_heads", s.n_heads);
  positive("n_kv_heads", s.n_kv_heads);
  positive("head_dim", s.head_dim);
  positive("d_ff", s.d_ff);
  positive("vocab_size", s.vocab_size);
  positive("max_ctx", s.max_ctx);
  // Upper bounds keep every derived size (n_heads * head_dim, max_ctx + offset, per-layer tables)
  // far from overflow and stop a corrupt header from allocating before tensors are checked.
  auto at_most = [&](const char* field, int v, int limit) {
    if (v > limit)
      throw Error(origin + ": " + field + " " + std::to_string(v) + " is implausibly large (limit " + std::to_string(limit) + ")");
  };
  at_most("n_layers", s.n_layers, 4096);
  at_most("d_model", s.d_model, 1 << 20);
  at_most("n_heads", s.n_heads, 1 << 16);
  at_most("head_dim", s.head_dim, 1 << 16);
  at_most("d_ff", s.d_ff, 1 << 22);
  at_most("vocab_size", s.vocab_size, 1 << 24);
  at_most("max_ctx", s.max_ctx, 1 << 28);
  if (static_cast<int64_t>(s.n_heads) * s.head_dim > (1 << 20))
    throw Error(origin + ": n_heads x head_dim = " + std::to_string(static_cast<int64_t>(s.n_heads) * s.head_dim) +
                " is implausibly large");
  if (s.n_heads % s.n_kv_heads != 0)
    throw Error(origin + ": n_heads " + std::to_string(s.n_heads) + " is not a multiple of n_kv_heads " +
                std::to_string(s.n_kv_heads));
  if (s.head_dim % 2 != 0) throw Error(origin + ": head_dim " + std::to_string(s.head_dim) + " must be even");
  if (s.head_dim > cpu::kMaxHeadDim)
    throw Error(origin + ": head_dim " + std::to_string(s.head_dim) + " is larger than " +
                std::to_string(cpu::kMaxHeadDim) + ", the most the attention kernels support");
  if (s.is_opt()) {
    positive("word_embed_proj_dim", s.word_embed_proj_dim);
    if (s.q_dim() != s.d_model)
      throw Error(origin + ": n_heads x head_dim = " + std::to_string(s.q_dim()) + ", expected d_model " +
                  std::to_string(s.d_model));
  }
}

}  // namespace hg
