// libFuzzer target: encode arbitrary bytes with small tokenizers of each kind (byte-level BPE with
// a split regex, SentencePiece-style BPE with byte fallback, GGUF SentencePiece), then check that
// byte-level decoding gives the input back and that streaming decoding never crashes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "tokenizer/loaders.h"
#include "tokenizer/utf8.h"

namespace {

std::string byte_level_json() {
  // Every byte as a token (GPT-2 alphabet) plus a few merges and added tokens.
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string piece = hg::tok::byte_map().encode(uint8_t(b));
    std::string escaped;
    for (char c : piece) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += c;
    }
    vocab += "\"" + escaped + "\": " + std::to_string(b) + ", ";
  }
  vocab += R"("ab": 256, "abc": 257, "Ġa": 258)";
  return R"({"added_tokens": [{"id": 259, "content": "<|x|>", "special": true},
      {"id": 260, "content": "yy", "special": false, "lstrip": true, "rstrip": true, "single_word": true, "normalized": true}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": ["a b", "ab c", "Ġ a"]}})";
}

std::string sentencepiece_json() {
  return R"({"added_tokens": [{"id": 1, "content": "<s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
      "vocab": {"<unk>": 0, "<s>": 1, "<0x41>": 2, "<0xE6>": 3, "▁": 4, "a": 5, "b": 6, "▁a": 7, "ab": 8, "▁ab": 9},
      "merges": ["▁ a", "a b", "▁a b"]}})";
}

struct Tokenizers {
  std::unique_ptr<hg::Tokenizer> byte_level, sentencepiece, spm_gguf;
  Tokenizers() {
    byte_level = hg::tok::load_hf_json(byte_level_json(), "fuzz-bytelevel", {});
    sentencepiece = hg::tok::load_hf_json(sentencepiece_json(), "fuzz-sp", {});
    hg::tok::GgufVocab v;
    v.model = "llama";
    v.tokens = {"<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab"};
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      v.tokens.push_back(buf);
    }
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      v.scores.push_back(-float(i));
      v.token_types.push_back(i < 3 ? 3 : i < 9 ? 1 : 6);
    }
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    spm_gguf = hg::tok::load_gguf_vocab(v, "fuzz-gguf");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers toks;  // built once; the fuzzer process is single-threaded
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto* tok : {toks.byte_level.get(), toks.sentencepiece.get(), toks.spm_gguf.get()}) {
    auto ids = tok->encode(text, true);
    std::string decoded = tok->decode(ids);
    if (!hg::tok::utf8_is_valid(decoded)) std::abort();
    hg::StreamDecoder stream(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (!hg::tok::utf8_is_valid(streamed)) std::abort();
  }
  // Byte-level BPE is lossless unless the input contains an added token or NFC changes it.
  auto ids = toks.byte_level->encode(text, false);
  std::string raw = toks.byte_level->decode_raw(ids);
  std::string expect = hg::tok::unicode_normalize(text, hg::tok::NormalForm::NFC);
  if (expect.find("<|x|>") == std::string::npos && expect.find("yy") == std::string::npos && raw != expect) std::abort();
  return 0;
}
