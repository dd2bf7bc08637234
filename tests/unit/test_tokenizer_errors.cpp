// Bad input: invalid UTF-8 text, malformed or truncated files, unsupported components and
// inconsistent vocabularies each give an hg::Error naming the problem (never a crash or a
// silently different tokenization).
#include <gtest/gtest.h>

#include <fstream>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "test_util.h"
#include "tokenizer/loaders.h"

namespace fs = std::filesystem;
using hg::tok::load_hf_json;

namespace {

// A tiny byte-level BPE tokenizer.json; `patch` replaces the marked parts.
std::string tiny_json(const std::string& pre = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
                      const std::string& model_type = "BPE", const std::string& merges = R"(["a b", "ab c"])") {
  return R"({"version": "1.0", "added_tokens": [{"id": 6, "content": "<s>", "special": true}],
    "normalizer": null, "pre_tokenizer": )" + pre + R"(, "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": ")" + model_type + R"(", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "Ġ": 5},
              "merges": )" + merges + "}}";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hg::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerErrors, TinyTokenizerWorks) {
  auto tok = load_hf_json(tiny_json(), "tiny.json", {});
  EXPECT_EQ(tok->encode("abc", false), std::vector<int32_t>{4});
  EXPECT_EQ(tok->encode("ab<s>c", false), (std::vector<int32_t>{3, 6, 2}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{3, 6, 2}, true), "abc");
}

TEST(TokenizerErrors, InvalidUtf8StillEncodes) {
  // The Llama 2 tokenizer (SentencePiece-style, byte fallback) is checked where HG_TEST_DATA has it.
  std::vector<fs::path> files = {hg::test::data_dir() / "tokenizers/qwen3/tokenizer.json",
                                 hg::test::data_dir() / "tokenizers/gpt2/vocab.json"};
  if (auto licensed = hg::test::licensed_data_dir(); !licensed.empty())
    files.push_back(licensed / "tokenizers/llama2/tokenizer.json");
  for (const fs::path& file : files) {
    const std::string name = file.parent_path().filename().string() + "/" + file.filename().string();
    auto tok = hg::load_tokenizer(file);
    std::string bad = "ok \xFF\xFE bad \xE6\x9D tail \xC0\x80 \xED\xA0\x80 end\x80";
    auto ids = tok->encode(bad, false);
    EXPECT_FALSE(ids.empty()) << name;
    std::string back = tok->decode_raw(ids);
    if (std::string(name) != "llama2/tokenizer.json") {
      EXPECT_EQ(back, bad) << name;  // byte-level: lossless
    }
    // decode() never returns invalid UTF-8.
    EXPECT_EQ(tok->decode(ids).find('\xFF'), std::string::npos) << name;
  }
}

TEST(TokenizerErrors, MalformedAndTruncatedJson) {
  std::string good = tiny_json();
  EXPECT_NE(error_of([&] { load_hf_json(good.substr(0, good.size() / 2), "t.json", {}); }).find("t.json"), std::string::npos);
  EXPECT_NE(error_of([&] { load_hf_json("{\"model\": 3}", "t.json", {}); }).find("model"), std::string::npos);
  EXPECT_NE(error_of([&] { load_hf_json("[]", "t.json", {}); }).find("t.json"), std::string::npos);
  EXPECT_NE(error_of([&] { load_hf_json("", "t.json", {}); }).find("not valid JSON"), std::string::npos);
  EXPECT_THROW(load_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})", "t", {}), hg::Error);
  EXPECT_THROW(load_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [[1, 2]]}})", "t", {}), hg::Error);
  EXPECT_THROW(load_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})", "t", {}), hg::Error);
}

TEST(TokenizerErrors, UnknownComponentTypesAreNamed) {
  EXPECT_NE(error_of([&] { load_hf_json(tiny_json("null", "Unigram"), "t.json", {}); }).find("Unigram"), std::string::npos);
  EXPECT_NE(error_of([&] { load_hf_json(tiny_json(R"({"type": "BertPreTokenizer"})"), "t.json", {}); })
                .find("BertPreTokenizer"),
            std::string::npos);
  std::string bad_split = R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})";
  EXPECT_NE(error_of([&] { load_hf_json(tiny_json(bad_split), "t.json", {}); }).find("bad regex"), std::string::npos);
  std::string bad_behavior = R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": false})";
  EXPECT_NE(error_of([&] { load_hf_json(tiny_json(bad_behavior), "t.json", {}); }).find("Sideways"), std::string::npos);
}

TEST(TokenizerErrors, MergesNamingAbsentTokens) {
  std::string msg = error_of([&] { load_hf_json(tiny_json("null", "BPE", R"(["a z"])"), "t.json", {}); });
  EXPECT_NE(msg.find("merges[0]"), std::string::npos) << msg;
  msg = error_of([&] { load_hf_json(tiny_json("null", "BPE", R"(["b c"])"), "t.json", {}); });  // "bc" absent
  EXPECT_NE(msg.find("merged token"), std::string::npos) << msg;
}

TEST(TokenizerErrors, Gpt2FilesAndGgufVocab) {
  EXPECT_THROW(hg::tok::load_gpt2_vocab("{\"a\": 0", "", "vocab.json", {}), hg::Error);
  EXPECT_THROW(hg::tok::load_gpt2_vocab(R"({"a": 0, "b": 1})", "#version: 0.2\na b\n", "vocab.json", {}), hg::Error);
  hg::tok::GgufVocab v;
  v.model = "bert";
  v.tokens = {"a"};
  EXPECT_NE(error_of([&] { hg::tok::load_gguf_vocab(v, "m.gguf"); }).find("bert"), std::string::npos);
  v.model = "gpt2";
  v.pre = "klingon";
  EXPECT_NE(error_of([&] { hg::tok::load_gguf_vocab(v, "m.gguf"); }).find("klingon"), std::string::npos);
  v.model = "llama";
  EXPECT_NE(error_of([&] { hg::tok::load_gguf_vocab(v, "m.gguf"); }).find("scores"), std::string::npos);
  EXPECT_THROW(hg::load_tokenizer("/nonexistent/tokenizer.json"), hg::Error);
}

TEST(TokenizerErrors, DecodeRejectsOutOfRangeIds) {
  auto tok = load_hf_json(tiny_json(), "tiny.json", {});
  EXPECT_THROW(tok->decode(std::vector<int32_t>{99}), hg::Error);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}), hg::Error);
}

TEST(Chat, TemplatesAndUnknownTemplateError) {
  auto tok = load_hf_json(tiny_json(), "tiny.json", {});
  EXPECT_NE(error_of([&] { hg::format_chat(*tok, hg::ChatTemplate::Auto, "hi"); }).find("--chat-template"),
            std::string::npos);
  EXPECT_EQ(hg::format_chat(*tok, hg::ChatTemplate::ChatML, "hi"),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(hg::format_chat(*tok, hg::ChatTemplate::Llama3, "hi"),
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(hg::format_chat(*tok, hg::ChatTemplate::Llama2, "hi", "sys"), "[INST] <<SYS>>\nsys\n<</SYS>>\n\nhi [/INST]");
  EXPECT_THROW(hg::parse_chat_template_name("vicuna"), hg::Error);
  EXPECT_EQ(hg::parse_chat_template_name("llama3"), hg::ChatTemplate::Llama3);
}

}  // namespace
