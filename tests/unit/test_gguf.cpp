// GGUF reader and GGUF model loading: valid files, every kind of malformed file, the real
// SmolLM2 file when it is cached.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gguf_writer.h"
#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "model/gguf.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using test::GgufWriter;

using test::expect_error;

struct Tiny {
  int n_layers = 2, d_model = 64, n_heads = 4, n_kv_heads = 2, head_dim = 16, d_ff = 96, vocab = 50;
};

// A complete tiny llama/qwen2 GGUF with f32 tensors. Hooks let tests drop or alter pieces.
void write_tiny_model(GgufWriter& w, const std::string& arch = "llama", bool with_output = false,
                      const std::string& skip_key = "", const std::string& skip_tensor = "") {
  Tiny t;
  w.kv_string("general.architecture", arch);
  w.kv_string("general.name", "tiny");
  auto kv = [&](const std::string& k, uint32_t v) {
    if (arch + "." + k != skip_key) w.kv_u32(arch + "." + k, v);
  };
  kv("block_count", t.n_layers);
  kv("context_length", 128);
  kv("embedding_length", t.d_model);
  kv("feed_forward_length", t.d_ff);
  kv("attention.head_count", t.n_heads);
  kv("attention.head_count_kv", t.n_kv_heads);
  if (arch + ".attention.layer_norm_rms_epsilon" != skip_key) w.kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_f32(arch + ".rope.freq_base", 10000.0f);
  std::vector<std::string> tokens;
  for (int i = 0; i < t.vocab; ++i) tokens.push_back("t" + std::to_string(i));
  w.kv_strings("tokenizer.ggml.tokens", tokens);
  w.kv_u32("tokenizer.ggml.bos_token_id", 1);
  w.kv_u32("tokenizer.ggml.eos_token_id", 2);
  const int64_t d = t.d_model, q = t.n_heads * t.head_dim, kvd = t.n_kv_heads * t.head_dim;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    if (name != skip_tensor) w.tensor_f32(name, std::move(shape));
  };
  add("token_embd.weight", {t.vocab, d});
  for (int i = 0; i < t.n_layers; ++i) {
    std::string p = "blk." + std::to_string(i) + ".";
    add(p + "attn_norm.weight", {d});
    add(p + "attn_q.weight", {q, d});
    add(p + "attn_k.weight", {kvd, d});
    add(p + "attn_v.weight", {kvd, d});
    if (arch == "qwen2") {
      add(p + "attn_q.bias", {q});
      add(p + "attn_k.bias", {kvd});
      add(p + "attn_v.bias", {kvd});
    }
    add(p + "attn_output.weight", {d, q});
    add(p + "ffn_norm.weight", {d});
    add(p + "ffn_gate.weight", {t.d_ff, d});
    add(p + "ffn_up.weight", {t.d_ff, d});
    add(p + "ffn_down.weight", {d, t.d_ff});
  }
  add("output_norm.weight", {d});
  if (with_output) add("output.weight", {t.vocab, d});
}

class GgufTest : public ::testing::Test {
 protected:
  fs::path dir = test::temp_dir("gguf");
  fs::path write(const GgufWriter& w, const std::string& name = "m.gguf") { return w.write(dir / name); }
  fs::path write_bytes(const std::string& bytes, const std::string& name = "raw.gguf") {
    std::ofstream f(dir / name, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return dir / name;
  }
};

TEST_F(GgufTest, ReadsAllMetadataTypes) {
  GgufWriter w;
  w.kv_u8("a.u8", 200);
  w.kv_i8("a.i8", -100);
  w.kv_u16("a.u16", 60000);
  w.kv_i16("a.i16", -30000);
  w.kv_u32("a.u32", 4000000000u);
  w.kv_i32("a.i32", -2000000000);
  w.kv_u64("a.u64", 1ull << 40);
  w.kv_i64("a.i64", -(1ll << 40));
  w.kv_f32("a.f32", 0.25f);
  w.kv_f64("a.f64", 1e-300);
  w.kv_bool("a.bool", true);
  w.kv_string("a.str", "héllo");
  w.kv_strings("a.strs", {"x", "", "zz"});
  w.kv_i32s("a.ints", {1, -2, 3});
  w.kv_f32s("a.floats", {0.5f, -1.5f});
  auto f = gguf::File::open(write(w));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_int("a.u8"), 200);
  EXPECT_EQ(f->get_int("a.i8"), -100);
  EXPECT_EQ(f->get_int("a.u16"), 60000);
  EXPECT_EQ(f->get_int("a.i16"), -30000);
  EXPECT_EQ(f->get_int("a.u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("a.i32"), -2000000000);
  EXPECT_EQ(f->get_int("a.u64"), 1ll << 40);
  EXPECT_EQ(f->get_int("a.i64"), -(1ll << 40));
  EXPECT_FLOAT_EQ(f->get_float("a.f32"), 0.25);
  EXPECT_DOUBLE_EQ(f->get_float("a.f64"), 1e-300);
  EXPECT_DOUBLE_EQ(f->get_float("a.i32"), -2e9);  // integers read as numbers
  EXPECT_TRUE(f->get_bool("a.bool"));
  EXPECT_EQ(f->get_string("a.str"), "héllo");
  EXPECT_EQ(f->get_string_array("a.strs"), (std::vector<std::string>{"x", "", "zz"}));
  EXPECT_EQ(f->get_int_array("a.ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f->get_float_array("a.floats"), (std::vector<double>{0.5, -1.5}));
  EXPECT_EQ(f->find_array_size("a.strs"), 3u);
  EXPECT_FALSE(f->find_int("nope").has_value());
  EXPECT_EQ(f->find_string("a.str"), "héllo");
  expect_error([&] { f->get_int("a.str"); }, {"m.gguf", "a.str", "expected an integer", "string"});
  expect_error([&] { f->get_string("missing.key"); }, {"m.gguf", "missing.key", "missing"});
  expect_error([&] { f->get_string_array("a.ints"); }, {"a.ints", "array of strings"});
  expect_error([&] { f->get_bool("a.u8"); }, {"a.u8", "bool"});
}

TEST_F(GgufTest, TensorShapesAreReversedAndDataAligned) {
  for (uint32_t align : {32u, 64u}) {
    GgufWriter w;
    w.alignment = align;
    if (align != 32) w.kv_u32("general.alignment", align);
    w.kv_string("general.architecture", "llama");
    std::string q8(2 * 34 * 3, '\x01');  // 3 rows of 64 q8_0 elements
    w.tensor("a", 0, {2, 3}, std::string(24, '\x02'));
    w.tensor("b", 8, {3, 64}, q8);
    w.tensor("c", 1, {5}, std::string(10, '\x03'));
    auto f = gguf::File::open(write(w, "al" + std::to_string(align) + ".gguf"));
    EXPECT_EQ(f->alignment(), align);
    EXPECT_EQ(f->data_offset() % align, 0u);
    TensorView a = f->tensor("a"), b = f->tensor("b"), c = f->tensor("c");
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.dtype, DType::F32);
    EXPECT_EQ(a.nbytes, 24u);
    EXPECT_EQ(static_cast<const uint8_t*>(a.data)[0], 2);
    EXPECT_EQ(b.shape, (std::vector<int64_t>{3, 64}));
    EXPECT_EQ(b.dtype, DType::Q8_0);
    EXPECT_EQ(b.nbytes, q8.size());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % align, reinterpret_cast<uintptr_t>(a.data) % align);
    EXPECT_EQ(c.dtype, DType::F16);
    EXPECT_EQ(static_cast<const uint8_t*>(c.data)[9], 3);
    EXPECT_FALSE(f->find_tensor("zz").has_value());
    expect_error([&] { f->tensor("zz"); }, {"tensor 'zz'", "missing"});
  }
}

TEST_F(GgufTest, V2IsAccepted) {
  GgufWriter w;
  w.version = 2;
  w.kv_string("general.architecture", "llama");
  EXPECT_EQ(gguf::File::open(write(w))->version(), 2u);
}

TEST_F(GgufTest, EveryTruncationIsAnError) {
  GgufWriter w;
  w.kv_string("general.architecture", "llama");
  w.kv_strings("tokenizer.ggml.tokens", {"a", "bb", "ccc"});
  w.tensor_f32("t", {4, 8});
  const std::string full = w.build();
  ASSERT_NO_THROW(gguf::File::from_memory(reinterpret_cast<const uint8_t*>(full.data()), full.size(), "full"));
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_THROW(gguf::File::from_memory(reinterpret_cast<const uint8_t*>(full.data()), n, "cut"), Error) << n;
  }
  expect_error([&] { gguf::File::open(write_bytes(full.substr(0, 20))); }, {"raw.gguf", "truncated", "metadata count"});
  expect_error([&] { gguf::File::open(write_bytes("")); }, {"raw.gguf", "truncated", "magic"});
}

TEST_F(GgufTest, BadMagicAndVersion) {
  expect_error([&] { gguf::File::open(write_bytes(std::string("GGML") + std::string(40, '\0'))); }, {"not a GGUF file"});
  GgufWriter w;
  w.version = 1;
  expect_error([&] { gguf::File::open(write(w)); }, {"version 1", "not supported"});
  w.version = 7;
  expect_error([&] { gguf::File::open(write(w)); }, {"version 7", "expected 2 or 3"});
  w.version = 3u << 24;  // a big-endian v3 file read as little-endian
  expect_error([&] { gguf::File::open(write(w)); }, {"big-endian"});
}

TEST_F(GgufTest, StringLengthBeyondFile) {
  GgufWriter w;
  std::string bad;
  uint64_t len = 1ull << 40;
  bad.append("\x03\x00\x00\x00\x00\x00\x00\x00key", 11);
  bad.append("\x08\x00\x00\x00", 4);
  bad.append(reinterpret_cast<const char*>(&len), 8);
  bad += "short";
  w.kv_raw(bad);
  expect_error([&] { gguf::File::open(write(w)); }, {"m.gguf", "metadata 'key'", "string length 1099511627776", "exceeds"});
}

TEST_F(GgufTest, ArrayCountBeyondFile) {
  GgufWriter w;
  std::string bad;
  uint64_t count = 1ull << 50;
  bad.append("\x03\x00\x00\x00\x00\x00\x00\x00" "arr", 11);
  bad.append("\x09\x00\x00\x00", 4);
  bad.append("\x08\x00\x00\x00", 4);  // array of strings
  bad.append(reinterpret_cast<const char*>(&count), 8);
  w.kv_raw(bad);
  expect_error([&] { gguf::File::open(write(w)); }, {"metadata 'arr'", "array of 1125899906842624 elements cannot fit"});
}

TEST_F(GgufTest, UnknownValueTypeAndNestedArrays) {
  GgufWriter w;
  w.kv_raw(std::string("\x01\x00\x00\x00\x00\x00\x00\x00k\x0d\x00\x00\x00", 13));
  expect_error([&] { gguf::File::open(write(w)); }, {"metadata 'k'", "unknown metadata value type 13"});
  GgufWriter w2;
  w2.kv_raw(std::string("\x01\x00\x00\x00\x00\x00\x00\x00k\x09\x00\x00\x00\x09\x00\x00\x00\x01\0\0\0\0\0\0\0", 25));
  expect_error([&] { gguf::File::open(write(w2, "n.gguf")); }, {"metadata 'k'", "array element type 9"});
}

TEST_F(GgufTest, AbsurdHeaderCounts) {
  GgufWriter w;
  w.kv_count_override = 1ll << 60;
  expect_error([&] { gguf::File::open(write(w)); }, {"m.gguf", "metadata count 1152921504606846976 cannot fit"});
  GgufWriter w2;
  w2.tensor_count_override = 1ll << 40;
  expect_error([&] { gguf::File::open(write(w2, "t.gguf")); }, {"t.gguf", "tensor count 1099511627776 cannot fit"});
}

TEST_F(GgufTest, BadAlignment) {
  GgufWriter w;
  w.kv_u32("general.alignment", 48);
  expect_error([&] { gguf::File::open(write(w)); }, {"general.alignment", "power of two", "48"});
}

TEST_F(GgufTest, TensorOutsideData) {
  GgufWriter w;
  w.tensor_f32("a", {4, 8});
  w.tensor("b", 0, {4, 8}, "", 1024);
  expect_error([&] { gguf::File::open(write(w)); }, {"m.gguf", "tensor 'b'", "[1024, 1152)", "outside the data section of 128 bytes"});
}

TEST_F(GgufTest, OffsetOverflowIsCaught) {
  GgufWriter w;
  w.tensor("a", 0, {4, 8}, "", static_cast<int64_t>(0x7fffffffffffffe0ll));
  expect_error([&] { gguf::File::open(write(w)); }, {"tensor 'a'", "outside the data section"});
}

TEST_F(GgufTest, OverlappingTensors) {
  GgufWriter w;
  w.tensor_f32("a", {4, 8});
  w.tensor_f32("b", {4, 8});
  w.tensor("c", 0, {2, 8}, "", 96);  // inside b = [128, 256)? no: a=[0,128), b=[128,256); c=[96,160)
  expect_error([&] { gguf::File::open(write(w)); }, {"m.gguf", "overlaps tensor"});
}

TEST_F(GgufTest, MisalignedOffset) {
  GgufWriter w;
  w.tensor_f32("a", {4, 8});
  w.tensor("b", 0, {1, 1}, "", 4);
  expect_error([&] { gguf::File::open(write(w)); }, {"tensor 'b'", "offset 4", "alignment 32"});
}

TEST_F(GgufTest, UnknownGgmlType) {
  GgufWriter w;
  w.tensor("weird", 77, {4, 8}, std::string(128, '\0'));
  expect_error([&] { gguf::File::open(write(w)); }, {"m.gguf", "tensor 'weird'", "unknown ggml type 77"});
}

TEST_F(GgufTest, UnsupportedGgmlTypeNamedOnUse) {
  GgufWriter w;
  w.tensor("iq2", 16, {2, 256}, std::string(2 * 66, '\0'));  // iq2_xxs: valid GGUF, we do not compute on it
  auto f = gguf::File::open(write(w));
  ASSERT_EQ(f->tensors().size(), 1u);
  expect_error([&] { f->tensor("iq2"); }, {"m.gguf", "tensor 'iq2'", "ggml type 16 (iq2_xxs)", "not supported", "q5_k"});
}

TEST_F(GgufTest, TooManyDimsAndBadRowLength) {
  GgufWriter w;
  w.tensor("five", 0, {1, 1, 1, 1, 2}, std::string(8, '\0'));
  expect_error([&] { gguf::File::open(write(w)); }, {"tensor 'five'", "n_dims 5", "expected 1..4"});
  GgufWriter w2;
  w2.tensor("q", 8, {2, 40}, std::string(200, '\0'));
  expect_error([&] { gguf::File::open(write(w2, "q.gguf")); }, {"tensor 'q'", "row length 40", "q8_0", "32"});
}

TEST_F(GgufTest, DuplicateNames) {
  GgufWriter w;
  w.kv_u32("k", 1);
  w.kv_u32("k", 2);
  expect_error([&] { gguf::File::open(write(w)); }, {"metadata key 'k' appears twice"});
  GgufWriter w2;
  w2.tensor_f32("t", {2});
  w2.tensor_f32("t", {2});
  expect_error([&] { gguf::File::open(write(w2, "d.gguf")); }, {"tensor 't' appears twice"});
}

TEST_F(GgufTest, LoadsTinyLlama) {
  GgufWriter w;
  write_tiny_model(w);
  auto m = load_model(write(w, "tiny.gguf").string());
  const ModelSpec& s = m->spec;
  EXPECT_EQ(s.arch, Arch::Llama);
  EXPECT_EQ(s.n_layers, 2);
  EXPECT_EQ(s.d_model, 64);
  EXPECT_EQ(s.n_heads, 4);
  EXPECT_EQ(s.n_kv_heads, 2);
  EXPECT_EQ(s.head_dim, 16);
  EXPECT_EQ(s.d_ff, 96);
  EXPECT_EQ(s.vocab_size, 50);  // from the tokens array
  EXPECT_EQ(s.max_ctx, 128);
  EXPECT_EQ(s.rope_layout, RopeLayout::Interleaved);
  EXPECT_TRUE(s.tied_embeddings);
  EXPECT_EQ(s.bos_id, 1);
  EXPECT_EQ(s.eos_id, 2);
  EXPECT_EQ(m->format, "gguf");
  EXPECT_EQ(m->weights.lm_head.data, m->weights.tok_embed.data);
  ASSERT_EQ(m->weights.layers.size(), 2u);
  EXPECT_EQ(m->weights.layers[1].wk.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(m->weights.layers[1].w_down.shape, (std::vector<int64_t>{64, 96}));
  EXPECT_FALSE(m->weights.layers[0].bq.present());
  const int64_t per_layer = 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 64 + 3 * 96 * 64;
  EXPECT_EQ(m->n_params(), 50 * 64 + 2 * per_layer + 64);
  EXPECT_EQ(m->weight_bytes(), static_cast<size_t>(m->n_params()) * 4);
  EXPECT_NE(describe(*m).find("interleaved"), std::string::npos);
}

TEST_F(GgufTest, LoadsTinyQwen2WithOutput) {
  GgufWriter w;
  write_tiny_model(w, "qwen2", true);
  auto m = load_model(write(w, "q.gguf").string());
  EXPECT_EQ(m->spec.arch, Arch::Qwen2);
  EXPECT_EQ(m->spec.rope_layout, RopeLayout::RotateHalf);
  EXPECT_FALSE(m->spec.tied_embeddings);
  EXPECT_TRUE(m->weights.layers[0].bq.present());
  EXPECT_EQ(m->weights.layers[0].bk.shape, (std::vector<int64_t>{32}));
  EXPECT_NE(m->weights.lm_head.data, m->weights.tok_embed.data);
}

// Llama 3.x files: llama3 rope scaling as rope_freqs.weight, f32 [head_dim / 2].
TEST_F(GgufTest, RopeFreqsAreLoadedAndChecked) {
  {
    GgufWriter w;
    write_tiny_model(w);
    w.tensor_f32("rope_freqs.weight", {8}, 8.0f);
    auto m = load_model(write(w, "rf.gguf").string());
    EXPECT_EQ(m->spec.rope_freq_factors, std::vector<float>(8, 8.0f));
    EXPECT_FALSE(m->spec.rope_scaling.llama3);
    EXPECT_NE(describe(*m).find("rope_freqs.weight"), std::string::npos);
  }
  {
    GgufWriter w;
    write_tiny_model(w);
    w.tensor_f32("rope_freqs.weight", {16});
    expect_error([&] { load_model(write(w, "rf_shape.gguf").string()); },
                 {"rf_shape.gguf: tensor 'rope_freqs.weight'", "expected shape [8] (head_dim / 2), got [16]"});
  }
  {
    GgufWriter w;
    write_tiny_model(w);
    w.tensor("rope_freqs.weight", 1, {8}, std::string(16, '\0'));
    expect_error([&] { load_model(write(w, "rf_dtype.gguf").string()); },
                 {"rope_freqs.weight", "expected f32, got f16"});
  }
  {
    GgufWriter w;
    write_tiny_model(w);
    w.tensor_f32("rope_freqs.weight", {8}, 0.0f);
    expect_error([&] { load_model(write(w, "rf_zero.gguf").string()); },
                 {"rope_freqs.weight", "element 0", "positive finite"});
  }
}

TEST_F(GgufTest, ModelErrors) {
  {
    GgufWriter w;
    write_tiny_model(w, "gpt2");
    expect_error([&] { load_model(write(w, "a.gguf").string()); }, {"a.gguf", "general.architecture", "'gpt2'", "not supported"});
  }
  {
    GgufWriter w;
    write_tiny_model(w, "llama", false, "llama.block_count");
    expect_error([&] { load_model(write(w, "b.gguf").string()); }, {"b.gguf", "llama.block_count", "missing"});
  }
  {
    GgufWriter w;
    write_tiny_model(w, "llama", false, "", "blk.1.ffn_up.weight");
    expect_error([&] { load_model(write(w, "c.gguf").string()); }, {"c.gguf", "tensor 'blk.1.ffn_up.weight'", "missing", "[96, 64]"});
  }
  {
    GgufWriter w;
    write_tiny_model(w, "llama", false, "", "blk.0.attn_k.weight");
    w.tensor_f32("blk.0.attn_k.weight", {64, 64});
    expect_error([&] { load_model(write(w, "d.gguf").string()); },
                 {"d.gguf: tensor 'blk.0.attn_k.weight': expected shape [32, 64], got [64, 64]"});
  }
  {
    GgufWriter w;
    write_tiny_model(w, "llama", false, "", "blk.0.attn_norm.weight");
    w.tensor("blk.0.attn_norm.weight", 8, {64}, std::string(68, '\0'));
    expect_error([&] { load_model(write(w, "e.gguf").string()); }, {"e.gguf", "attn_norm", "q8_0", "not allowed"});
  }
  {
    // Found by fuzzing: a huge block_count must fail before per-layer tables are allocated.
    GgufWriter w;
    write_tiny_model(w, "llama", false, "llama.block_count");
    w.kv_u32("llama.block_count", 1000000);
    expect_error([&] { load_model(write(w, "f.gguf").string()); }, {"f.gguf", "llama.block_count", "1000000", "holds only"});
  }
  {
    GgufWriter w;
    write_tiny_model(w, "llama", false, "llama.attention.key_length");
    w.kv_u32("llama.attention.key_length", 1024);
    expect_error([&] { load_model(write(w, "g.gguf").string()); }, {"g.gguf", "head_dim 1024 is larger than 512"});
  }
  expect_error([&] { load_model((dir / "nothing.gguf").string()); }, {"nothing.gguf", "no such file"});
  expect_error([&] { load_model(write_bytes("x", "model.bin").string()); }, {"model.bin", "not a model"});
}

TEST(GgufReal, SmolLM2) {
  std::string path = test::smollm2_path();
  if (path.empty()) GTEST_SKIP() << hg::test::kNoSmolLM2Message;
  auto m = load_model(path);
  const ModelSpec& s = m->spec;
  EXPECT_EQ(s.arch, Arch::Llama);
  EXPECT_EQ(s.n_layers, 30);
  EXPECT_EQ(s.d_model, 576);
  EXPECT_EQ(s.n_heads, 9);
  EXPECT_EQ(s.n_kv_heads, 3);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.d_ff, 1536);
  EXPECT_EQ(s.vocab_size, 49152);
  EXPECT_EQ(s.max_ctx, 8192);
  EXPECT_FLOAT_EQ(s.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(s.norm_eps, 1e-5f);
  EXPECT_TRUE(s.tied_embeddings);
  EXPECT_EQ(s.rope_layout, RopeLayout::Interleaved);
  EXPECT_EQ(s.bos_id, 1);
  EXPECT_EQ(s.eos_id, 2);
  EXPECT_EQ(m->weights.tok_embed.dtype, DType::Q8_0);
  EXPECT_EQ(m->weights.lm_head.data, m->weights.tok_embed.data);
  EXPECT_EQ(m->weights.layers[0].wq.dtype, DType::Q4_1);
  EXPECT_EQ(m->weights.layers[29].w_down.dtype, DType::Q4_1);
  EXPECT_EQ(m->weights.layers[29].w_down.shape, (std::vector<int64_t>{576, 1536}));
  EXPECT_EQ(m->weights.final_norm.dtype, DType::F32);
  EXPECT_EQ(m->n_params(), 134515008);
  EXPECT_EQ(m->n_params(), count_params(load_shape_config(test::source_dir() / "configs/models/smollm2-135m.yaml")));
  // The alias resolves to the same file.
  EXPECT_EQ(resolve_model_path("smollm2"), fs::path(path));
}

}  // namespace
}  // namespace hg
