// GGUF vocabularies -> PipelineTokenizer. tokenizer.ggml.model "gpt2" is byte-level BPE with
// merges and a pre-tokenizer named by tokenizer.ggml.pre; "llama" is SentencePiece BPE driven by
// piece scores, with <0xNN> byte tokens for characters outside the vocabulary.
#include "hybridgen/error.h"
#include "model/gguf.h"
#include "tokenizer/loaders.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

namespace {

constexpr int kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;
const char* const kSpace = "\xE2\x96\x81";  // "▁"

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::optional<int32_t> to_id(std::optional<int64_t> v) {
  if (!v || *v < 0 || *v > INT32_MAX) return std::nullopt;
  return int32_t(*v);
}

// The pre-tokenizer llama.cpp uses for a tokenizer.ggml.pre name (the HF equivalent).
PreTokenizerPtr gpt2_pre_tokenizer(const std::string& pre, bool& ignore_merges, const std::string& name) {
  std::vector<PreTokenizerPtr> parts;
  auto where = name + ": tokenizer.ggml.pre";
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") {
    parts.push_back(make_byte_level_pre_tokenizer(false, true));
  } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") {
    ignore_merges = true;
    parts.push_back(make_split_pre_tokenizer(kLlama3Pattern, false, SplitBehavior::Isolated, false, where));
    parts.push_back(make_byte_level_pre_tokenizer(false, false));
  } else if (pre == "qwen2") {
    parts.push_back(make_split_pre_tokenizer(kQwen2Pattern, false, SplitBehavior::Isolated, false, where));
    parts.push_back(make_byte_level_pre_tokenizer(false, false));
  } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell") {
    parts.push_back(make_digits_pre_tokenizer(true));
    parts.push_back(make_byte_level_pre_tokenizer(false, true));
  } else {
    throw Error(where + ": pre-tokenizer '" + pre +
                "' is not supported (known: default, gpt-2, llama3, llama-bpe, qwen2, smollm, starcoder)");
  }
  return make_sequence_pre_tokenizer(std::move(parts), where);
}

}  // namespace

GgufVocab read_gguf_vocab(const gguf::File& f) {
  GgufVocab v;
  v.model = f.get_string("tokenizer.ggml.model");
  v.pre = f.find_string("tokenizer.ggml.pre").value_or("default");
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.scores"))
    for (double s : f.get_float_array("tokenizer.ggml.scores")) v.scores.push_back(float(s));
  if (f.has("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(int32_t(t));
  if (f.has("tokenizer.ggml.merges")) v.merges = f.get_string_array("tokenizer.ggml.merges");
  v.bos = to_id(f.find_int("tokenizer.ggml.bos_token_id"));
  v.eos = to_id(f.find_int("tokenizer.ggml.eos_token_id"));
  v.unk = to_id(f.find_int("tokenizer.ggml.unknown_token_id"));
  v.pad = to_id(f.find_int("tokenizer.ggml.padding_token_id"));
  if (f.has("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  if (f.has("tokenizer.ggml.add_eos_token")) v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
  if (f.has("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
  v.chat_template = f.find_string("tokenizer.chat_template").value_or("");
  return v;
}

std::unique_ptr<Tokenizer> load_gguf_vocab(const GgufVocab& v, const std::string& name) {
  const size_t n = v.tokens.size();
  if (n == 0) throw Error(name + ": tokenizer.ggml.tokens: empty vocabulary");
  if (!v.token_types.empty() && v.token_types.size() != n)
    throw Error(name + ": tokenizer.ggml.token_type: " + std::to_string(v.token_types.size()) +
                " entries for " + std::to_string(n) + " tokens");
  PipelineParts p;
  p.source = name;
  p.pieces = v.tokens;
  for (size_t id = 0; id < v.token_types.size(); ++id) {
    int type = v.token_types[id];
    if (type != kTypeControl && type != kTypeUserDefined && type != kTypeUnknown) continue;
    if (v.tokens[id].empty()) continue;
    p.added.push_back(AddedToken{v.tokens[id], int32_t(id), type != kTypeUserDefined, false, false, false, false});
  }
  bool add_bos;
  if (v.model == "gpt2") {
    bool ignore_merges = false;
    p.pre_tokenizer = gpt2_pre_tokenizer(v.pre, ignore_merges, name);
    std::vector<std::string> keys(n);
    for (size_t id = 0; id < n; ++id) keys[id] = byte_map().decode_text(v.tokens[id]).value_or("");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(v.merges.size());
    for (size_t k = 0; k < v.merges.size(); ++k) {
      const std::string& m = v.merges[k];
      size_t sp = m.find(' ');
      std::optional<std::string> a, b;
      if (sp != std::string::npos) {
        a = byte_map().decode_text(std::string_view(m).substr(0, sp));
        b = byte_map().decode_text(std::string_view(m).substr(sp + 1));
      }
      if (!a || !b || a->empty() || b->empty())
        throw Error(name + ": tokenizer.ggml.merges[" + std::to_string(k) + "]: expected \"left right\" in the byte-level alphabet");
      merges.emplace_back(std::move(*a), std::move(*b));
    }
    BpeOptions opt;
    opt.byte_level = true;
    opt.ignore_merges = ignore_merges;
    p.model = std::make_unique<BpeModel>(std::move(keys), merges, opt, name + ": tokenizer.ggml.merges");
    p.decoder = make_byte_level_decoder();
    add_bos = v.add_bos.value_or(false);
  } else if (v.model == "llama") {
    if (v.scores.size() != n)
      throw Error(name + ": tokenizer.ggml.scores: " + std::to_string(v.scores.size()) + " scores for " +
                  std::to_string(n) + " tokens");
    p.model = std::make_unique<SpmModel>(v.tokens, v.scores, v.unk, name + ": tokenizer.ggml.tokens");
    bool space_prefix = v.add_space_prefix.value_or(true);
    std::vector<NormalizerPtr> norm;
    if (space_prefix) norm.push_back(make_prepend_normalizer(" "));
    norm.push_back(make_replace_normalizer(" ", true, kSpace, name + ": space escape"));
    p.normalizer = make_sequence_normalizer(std::move(norm));
    std::vector<DecoderPtr> dec;
    dec.push_back(make_replace_decoder(kSpace, " "));
    dec.push_back(make_byte_fallback_decoder());
    dec.push_back(make_fuse_decoder());
    if (space_prefix) dec.push_back(make_strip_decoder(" ", 1, 0));
    p.decoder = make_sequence_decoder(std::move(dec));
    add_bos = v.add_bos.value_or(true);
  } else {
    throw Error(name + ": tokenizer.ggml.model '" + v.model + "' is not supported (known: gpt2, llama)");
  }
  p.bos = v.bos;
  p.eos = v.eos;
  if (add_bos && v.bos) p.prefix.push_back(*v.bos);
  if (v.add_eos.value_or(false) && v.eos) p.suffix.push_back(*v.eos);
  p.chat_template = v.chat_template;
  return make_pipeline_tokenizer(std::move(p));
}

}  // namespace hg::tok
