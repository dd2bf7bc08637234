// safetensors reader, HF config.json parsing, and HF directory loading for OPT, Llama and Qwen2.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::expect_error;

// Builds a safetensors file: tensors are laid out in order; `header_patch` edits the JSON.
struct StWriter {
  json header = json::object();
  std::string data;
  void add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, int elem = 4,
           float fill = 0.5f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      if (elem == 4) data.append(reinterpret_cast<const char*>(&fill), 4);
      else data.append(static_cast<size_t>(elem), '\x3c');
    }
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string build(int64_t header_len_override = -1) const {
    std::string h = header.dump();
    uint64_t len = header_len_override >= 0 ? static_cast<uint64_t>(header_len_override) : h.size();
    std::string out(reinterpret_cast<const char*>(&len), 8);
    return out + h + data;
  }
  fs::path write(const fs::path& p, int64_t header_len_override = -1) const {
    std::ofstream f(p, std::ios::binary);
    std::string b = build(header_len_override);
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
    return p;
  }
};

class SafetensorsTest : public ::testing::Test {
 protected:
  fs::path dir = test::temp_dir("st");
};

TEST_F(SafetensorsTest, ReadsTensors) {
  StWriter w;
  w.header["__metadata__"] = {{"format", "pt"}};
  w.add("a", "F32", {2, 3});
  w.add("b", "F16", {4}, 2);
  w.add("c", "BF16", {1, 2, 2}, 2);
  auto set = SafetensorsSet::open_file(w.write(dir / "x.safetensors"));
  auto a = set->find("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  float v;
  std::memcpy(&v, a->data, 4);
  EXPECT_EQ(v, 0.5f);
  EXPECT_EQ(set->find("b")->dtype, DType::F16);
  EXPECT_EQ(set->find("c")->dtype, DType::BF16);
  EXPECT_FALSE(set->find("__metadata__"));
  EXPECT_EQ(set->names().size(), 3u);
}

TEST_F(SafetensorsTest, Malformed) {
  StWriter ok;
  ok.add("a", "F32", {2, 3});
  expect_error([&] { SafetensorsSet::open_file(ok.write(dir / "h.safetensors", 1 << 30)); },
               {"h.safetensors", "header length 1073741824 goes beyond the file"});
  {
    std::ofstream(dir / "tiny.safetensors") << "abc";
    expect_error([&] { SafetensorsSet::open_file(dir / "tiny.safetensors"); }, {"tiny.safetensors", "truncated"});
  }
  {
    std::string b = ok.build();
    std::string cut = b.substr(0, 8) + b.substr(8, 5);
    uint64_t len = 5;
    std::memcpy(cut.data(), &len, 8);
    expect_error([&] { SafetensorsSet::from_memory(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), "j"); },
                 {"j: header is not valid JSON"});
  }
  {
    StWriter w = ok;
    w.header["a"]["data_offsets"] = {0, 4096};
    expect_error([&] { SafetensorsSet::open_file(w.write(dir / "o.safetensors")); },
                 {"o.safetensors", "tensor 'a'", "[0, 4096]", "outside the data section of 24 bytes"});
  }
  {
    StWriter w = ok;
    w.header["a"]["data_offsets"] = {0, 20};
    expect_error([&] { SafetensorsSet::open_file(w.write(dir / "s.safetensors")); },
                 {"tensor 'a'", "span 20 bytes", "[2,3]"});
  }
  {
    StWriter w;
    w.add("a", "F32", {2, 3});
    w.add("b", "F32", {2, 3});
    w.header["b"]["data_offsets"] = {8, 32};
    expect_error([&] { SafetensorsSet::open_file(w.write(dir / "ov.safetensors")); },
                 {"ov.safetensors", "tensor 'b'", "overlaps tensor 'a'"});
  }
  {
    StWriter w;
    w.add("ids", "I64", {3}, 8);
    auto set = SafetensorsSet::open_file(w.write(dir / "i.safetensors"));
    expect_error([&] { set->find("ids"); }, {"i.safetensors", "tensor 'ids'", "dtype I64", "not supported"});
  }
  {
    StWriter w = ok;
    w.header["a"]["dtype"] = "F7";
    expect_error([&] { SafetensorsSet::open_file(w.write(dir / "u.safetensors")); }, {"tensor 'a'", "unknown dtype 'F7'"});
  }
  {
    StWriter w = ok;
    w.header["a"].erase("shape");
    expect_error([&] { SafetensorsSet::open_file(w.write(dir / "m.safetensors")); }, {"tensor 'a'", "'shape'"});
  }
  {
    StWriter w = ok;
    w.header["a"]["shape"] = {-2, 3};
    expect_error([&] { SafetensorsSet::open_file(w.write(dir / "n.safetensors")); }, {"tensor 'a'", "non-negative"});
  }
}

// ---- HF directories ----

struct TinyShape {
  int n_layers = 2, d_model = 32, n_heads = 4, n_kv_heads = 2, head_dim = 8, d_ff = 48, vocab = 40, max_ctx = 64;
};

json llama_config(const std::string& type, bool tied) {
  TinyShape t;
  return {{"model_type", type},          {"hidden_size", t.d_model},     {"num_hidden_layers", t.n_layers},
          {"num_attention_heads", t.n_heads}, {"num_key_value_heads", t.n_kv_heads}, {"intermediate_size", t.d_ff},
          {"vocab_size", t.vocab},        {"max_position_embeddings", t.max_ctx}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},       {"tie_word_embeddings", tied},   {"bos_token_id", 1},
          {"eos_token_id", json::array({2, 3})}};
}

void add_llama_tensors(StWriter& w, bool qwen2, bool tied, const std::string& skip = "") {
  TinyShape t;
  const int64_t d = t.d_model, q = t.n_heads * t.head_dim, kv = t.n_kv_heads * t.head_dim;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    if (name != skip) w.add(name, "F32", std::move(shape));
  };
  add("model.embed_tokens.weight", {t.vocab, d});
  for (int i = 0; i < t.n_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {d});
    add(p + "self_attn.q_proj.weight", {q, d});
    add(p + "self_attn.k_proj.weight", {kv, d});
    add(p + "self_attn.v_proj.weight", {kv, d});
    if (qwen2) {
      add(p + "self_attn.q_proj.bias", {q});
      add(p + "self_attn.k_proj.bias", {kv});
      add(p + "self_attn.v_proj.bias", {kv});
    }
    add(p + "self_attn.o_proj.weight", {d, q});
    add(p + "post_attention_layernorm.weight", {d});
    add(p + "mlp.gate_proj.weight", {t.d_ff, d});
    add(p + "mlp.up_proj.weight", {t.d_ff, d});
    add(p + "mlp.down_proj.weight", {d, t.d_ff});
  }
  add("model.norm.weight", {d});
  if (!tied) add("lm_head.weight", {t.vocab, d});
}

void write_config(const fs::path& dir, const json& cfg) { std::ofstream(dir / "config.json") << cfg.dump(2); }

TEST_F(SafetensorsTest, LoadsLlamaDir) {
  write_config(dir, llama_config("llama", false));
  StWriter w;
  add_llama_tensors(w, false, false);
  w.write(dir / "model.safetensors");
  auto m = load_model(dir.string());
  EXPECT_EQ(m->format, "safetensors");
  EXPECT_EQ(m->spec.arch, Arch::Llama);
  EXPECT_EQ(m->spec.head_dim, 8);
  EXPECT_EQ(m->spec.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(m->spec.rope_theta, 500000.0f);
  EXPECT_EQ(m->spec.rope_layout, RopeLayout::RotateHalf);
  EXPECT_EQ(m->spec.eos_id, 2);
  EXPECT_FALSE(m->spec.tied_embeddings);
  EXPECT_NE(m->weights.lm_head.data, m->weights.tok_embed.data);
  EXPECT_EQ(m->weights.layers[1].w_gate.shape, (std::vector<int64_t>{48, 32}));
}

TEST_F(SafetensorsTest, LoadsShardedQwen2Tied) {
  write_config(dir, llama_config("qwen2", true));
  StWriter a, b;
  // Split the tensors over two shards by layer.
  StWriter all;
  add_llama_tensors(all, true, true);
  json weight_map;
  for (auto it = all.header.begin(); it != all.header.end(); ++it) {
    bool second = it.key().find("layers.1.") != std::string::npos || it.key() == "model.norm.weight";
    StWriter& s = second ? b : a;
    std::vector<int64_t> shape = it.value()["shape"];
    s.add(it.key(), "F32", shape);
    weight_map[it.key()] = second ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  a.write(dir / "model-00001-of-00002.safetensors");
  b.write(dir / "model-00002-of-00002.safetensors");
  std::ofstream(dir / "model.safetensors.index.json") << json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
  auto m = load_model(dir.string());
  EXPECT_EQ(m->spec.arch, Arch::Qwen2);
  EXPECT_TRUE(m->spec.qkv_bias);
  EXPECT_TRUE(m->spec.tied_embeddings);
  EXPECT_EQ(m->weights.lm_head.data, m->weights.tok_embed.data);
  EXPECT_TRUE(m->weights.layers[1].bv.present());
  EXPECT_EQ(m->storage.size(), 2u);

  // A weight_map entry pointing at a shard that does not hold the tensor.
  weight_map["model.norm.weight"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
  expect_error([&] { load_model(dir.string()); }, {"index.json", "model.norm.weight", "does not hold it"});
  weight_map["model.norm.weight"] = "../evil.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
  expect_error([&] { load_model(dir.string()); }, {"index.json", "not a plain file name"});
  weight_map["model.norm.weight"] = "gone.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
  expect_error([&] { load_model(dir.string()); }, {"index.json", "gone.safetensors", "does not exist"});
}

TEST_F(SafetensorsTest, LlamaDirErrors) {
  write_config(dir, llama_config("llama", false));
  {
    StWriter w;
    add_llama_tensors(w, false, false, "lm_head.weight");
    w.write(dir / "model.safetensors");
    expect_error([&] { load_model(dir.string()); }, {"model.safetensors", "tensor 'lm_head.weight' is missing"});
  }
  {
    StWriter w;
    add_llama_tensors(w, false, false, "model.layers.0.self_attn.o_proj.weight");
    w.add("model.layers.0.self_attn.o_proj.weight", "F32", {32, 16});
    w.write(dir / "model.safetensors");
    expect_error([&] { load_model(dir.string()); },
                 {"model.safetensors: tensor 'model.layers.0.self_attn.o_proj.weight': expected shape [32, 32], got [32, 16]"});
  }
  fs::remove(dir / "model.safetensors");
  expect_error([&] { load_model(dir.string()); }, {"no model.safetensors"});
  fs::remove(dir / "config.json");
  expect_error([&] { load_model(dir.string()); }, {"no config.json"});
}

// ---- OPT ----

json opt_config(bool pre_ln, int proj_dim) {
  return {{"model_type", "opt"},        {"hidden_size", 32},          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},   {"ffn_dim", 64},              {"vocab_size", 40},
          {"max_position_embeddings", 16}, {"do_layer_norm_before", pre_ln}, {"word_embed_proj_dim", proj_dim},
          {"activation_function", "relu"}, {"enable_bias", true},    {"bos_token_id", 2},
          {"eos_token_id", 2}};
}

void add_opt_tensors(StWriter& w, bool pre_ln, int proj, const std::string& prefix) {
  const int64_t d = 32, ff = 64;
  w.add(prefix + "embed_tokens.weight", "F32", {40, proj});
  w.add(prefix + "embed_positions.weight", "F32", {18, d});
  if (proj != d) {
    w.add(prefix + "project_in.weight", "F32", {d, proj});
    w.add(prefix + "project_out.weight", "F32", {proj, d});
  }
  for (int i = 0; i < 2; ++i) {
    std::string p = prefix + "layers." + std::to_string(i) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      w.add(p + "self_attn." + n + ".weight", "F32", {d, d});
      w.add(p + "self_attn." + n + ".bias", "F32", {d});
    }
    for (const char* n : {"self_attn_layer_norm", "final_layer_norm"}) {
      w.add(p + n + ".weight", "F32", {d});
      w.add(p + n + ".bias", "F32", {d});
    }
    w.add(p + "fc1.weight", "F32", {ff, d});
    w.add(p + "fc1.bias", "F32", {ff});
    w.add(p + "fc2.weight", "F32", {d, ff});
    w.add(p + "fc2.bias", "F32", {d});
  }
  if (pre_ln) {
    w.add(prefix + "final_layer_norm.weight", "F32", {d});
    w.add(prefix + "final_layer_norm.bias", "F32", {d});
  }
}

TEST_F(SafetensorsTest, LoadsOptPreLn) {
  write_config(dir, opt_config(true, 32));
  StWriter w;
  add_opt_tensors(w, true, 32, "model.decoder.");
  w.write(dir / "model.safetensors");
  auto m = load_model(dir.string());
  EXPECT_EQ(m->spec.arch, Arch::Opt);
  EXPECT_TRUE(m->spec.do_layer_norm_before);
  EXPECT_EQ(m->spec.head_dim, 8);
  EXPECT_EQ(m->spec.n_kv_heads, 4);
  EXPECT_EQ(m->spec.pos_offset, 2);
  EXPECT_TRUE(m->spec.tied_embeddings);
  EXPECT_EQ(m->weights.lm_head.data, m->weights.tok_embed.data);
  EXPECT_TRUE(m->weights.final_norm_bias.present());
  EXPECT_TRUE(m->weights.layers[1].b_down.present());
  EXPECT_FALSE(m->weights.project_in.present());
  EXPECT_EQ(m->weights.pos_embed.shape, (std::vector<int64_t>{18, 32}));
}

TEST_F(SafetensorsTest, LoadsOptPostLnWithProjection) {
  // The OPT-350m shape: post-LayerNorm, no final LayerNorm, word_embed_proj_dim != hidden_size,
  // and (older checkpoints) names without the "model." prefix.
  write_config(dir, opt_config(false, 16));
  StWriter w;
  add_opt_tensors(w, false, 16, "decoder.");
  w.write(dir / "model.safetensors");
  auto m = load_model(dir.string());
  EXPECT_FALSE(m->spec.do_layer_norm_before);
  EXPECT_EQ(m->spec.word_embed_proj_dim, 16);
  EXPECT_FALSE(m->weights.final_norm.present());
  EXPECT_EQ(m->weights.project_in.shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(m->weights.project_out.shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(m->weights.lm_head.shape, (std::vector<int64_t>{40, 16}));
}

TEST(HfConfig, Errors) {
  json c = llama_config("llama", false);
  c.erase("hidden_size");
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"config.json: missing field 'hidden_size'"});
  c = llama_config("gpt_neox", false);
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"config.json", "'gpt_neox'", "not supported"});
  c = llama_config("llama", false);
  c.erase("model_type");
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"missing field 'model_type'"});
  c = llama_config("llama", false);
  c["num_hidden_layers"] = "two";
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"'num_hidden_layers'", "expected an integer"});
  c = llama_config("llama", false);
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"rope_scaling", "'yarn'"});
  c = llama_config("llama", false);
  c["num_key_value_heads"] = 3;
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"n_heads 4", "n_kv_heads 3"});
  c = llama_config("llama", false);
  c["num_hidden_layers"] = 100000;
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); }, {"n_layers 100000", "implausibly large"});
  json o = opt_config(true, 32);
  o.erase("ffn_dim");
  expect_error([&] { spec_from_hf_config_text(o.dump(), "config.json"); }, {"missing field 'ffn_dim'"});
  expect_error([&] { spec_from_hf_config_text("{not json", "config.json"); }, {"config.json", "not valid JSON"});
}

// The CPU attention kernels keep one fp32 row per head on the stack (cpu::kMaxHeadDim): a config
// asking for more is refused at load, not overflowed at the first decode step.
TEST(HfConfig, HeadDimAboveTheKernelsLimitIsRefused) {
  json c = llama_config("llama", false);
  c["num_attention_heads"] = 1;
  c["num_key_value_heads"] = 1;
  c["head_dim"] = 512;
  EXPECT_EQ(spec_from_hf_config_text(c.dump(), "config.json").head_dim, 512);
  c["head_dim"] = 514;
  expect_error([&] { spec_from_hf_config_text(c.dump(), "config.json"); },
               {"config.json: head_dim 514 is larger than 512", "attention kernels"});
}

TEST(HfConfig, Llama3RopeScalingAndDefaults) {
  json c = llama_config("llama", true);
  c.erase("num_key_value_heads");
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  ModelSpec s = spec_from_hf_config_text(c.dump(), "config.json");
  EXPECT_EQ(s.n_kv_heads, s.n_heads);
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_TRUE(s.rope_scaling.llama3);
  EXPECT_FLOAT_EQ(s.rope_scaling.factor, 32.0f);
  EXPECT_EQ(s.rope_scaling.original_max_position, 8192);
  EXPECT_TRUE(s.tied_embeddings);
  json q = llama_config("qwen2", false);
  q.erase("rope_theta");
  q.erase("tie_word_embeddings");
  q["head_dim"] = 16;
  ModelSpec qs = spec_from_hf_config_text(q.dump(), "config.json");
  EXPECT_FLOAT_EQ(qs.rope_theta, 1e6f);
  EXPECT_FALSE(qs.tied_embeddings);
  EXPECT_EQ(qs.head_dim, 16);
  EXPECT_EQ(qs.q_dim(), 64);
}

}  // namespace
}  // namespace hg
