// tokenizer.json (HF tokenizers' serialization) -> PipelineTokenizer.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "hybridgen/error.h"
#include "tokenizer/hf_components.h"
#include "tokenizer/json_tables.h"
#include "tokenizer/loaders.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json parse_json(std::string_view text, const std::string& name) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(name + ": not valid JSON (malformed or truncated)");
  return j;
}

// A special token in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> token_name(const Json& j, const std::string& key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return json_string(*it, "content", where + "." + key);
  throw Error(where + "." + key + ": expected a string or an object with \"content\"");
}

std::vector<AddedToken> parse_added_tokens(const Json& j, const std::string& where) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return out;
  const Json& arr = json_array(j, "added_tokens", where);
  for (size_t k = 0; k < arr.size(); ++k) {
    std::string w = where + ".added_tokens[" + std::to_string(k) + "]";
    AddedToken t;
    int64_t id = json_int(arr[k], "id", w);
    if (id < 0 || id > INT32_MAX) throw Error(w + ".id: out of range");
    t.id = int32_t(id);
    t.content = json_string(arr[k], "content", w);
    t.special = json_bool_or(arr[k], "special", false, w);
    t.lstrip = json_bool_or(arr[k], "lstrip", false, w);
    t.rstrip = json_bool_or(arr[k], "rstrip", false, w);
    t.single_word = json_bool_or(arr[k], "single_word", false, w);
    t.normalized = json_bool_or(arr[k], "normalized", !t.special, w);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

TokenizerConfig parse_tokenizer_config(std::string_view json_text, const std::string& name) {
  Json j = parse_json(json_text, name);
  if (!j.is_object()) throw Error(name + ": expected a JSON object");
  TokenizerConfig c;
  c.bos_token = token_name(j, "bos_token", name);
  c.eos_token = token_name(j, "eos_token", name);
  c.unk_token = token_name(j, "unk_token", name);
  if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) c.add_bos_token = j["add_bos_token"].get<bool>();
  if (j.contains("chat_template")) {
    const Json& t = j["chat_template"];
    if (t.is_string()) {
      c.chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      // Named templates: [{"name": "default", "template": "..."}, ...]; take "default".
      for (const auto& e : t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
          c.chat_template = e["template"].get<std::string>();
    }
  }
  return c;
}

TokenizerConfig read_tokenizer_config(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return {};
  return parse_tokenizer_config(read_text(file), file.string());
}

std::unique_ptr<Tokenizer> load_hf_json(std::string_view json_text, const std::string& name,
                                        const TokenizerConfig& config) {
  BpeTables tables;
  Json j = parse_tokenizer_json(json_text, name, tables);
  if (!j.is_object()) throw Error(name + ": expected a JSON object at the top level");
  const Json& model = json_field(j, "model", name);
  std::string mw = name + ": model";
  std::string type = json_string_or(model, "type", "BPE", mw);
  if (type != "BPE") throw Error(mw + ".type: model type '" + type + "' is not supported (only BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    throw Error(mw + ".dropout: BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!json_string_or(model, key, "", mw).empty())
      throw Error(mw + "." + key + ": a non-empty value is not supported");
  if (!tables.has_vocab) throw Error(mw + ".vocab: missing (expected an object {piece: id})");
  if (!tables.has_merges) throw Error(mw + ".merges: missing (expected an array)");

  PipelineParts p;
  p.source = name;
  p.normalizer = parse_normalizer(j.value("normalizer", Json()), name + ": normalizer");
  p.pre_tokenizer = parse_pre_tokenizer(j.value("pre_tokenizer", Json()), name + ": pre_tokenizer");
  p.decoder = parse_decoder(j.value("decoder", Json()), name + ": decoder");
  p.added = parse_added_tokens(j, name);

  // id -> piece, sized to cover both the model vocabulary and the added tokens.
  int64_t max_id = -1;
  for (const auto& [piece, id] : tables.vocab) {
    if (id < 0 || id >= (int64_t(1) << 24))
      throw Error(mw + ".vocab['" + piece + "']: id " + std::to_string(id) + " out of range");
    max_id = std::max(max_id, id);
  }
  for (const auto& t : p.added) max_id = std::max<int64_t>(max_id, t.id);
  if (max_id >= (int64_t(1) << 24)) throw Error(name + ": added_tokens: ids up to " + std::to_string(max_id) + " are implausible");
  p.pieces.assign(size_t(max_id + 1), std::string());
  std::vector<std::string> keys(p.pieces.size());
  bool byte_level = p.pre_tokenizer && p.pre_tokenizer->byte_level();
  for (auto& [piece, id] : tables.vocab) {
    auto& slot = p.pieces[size_t(id)];
    if (!slot.empty()) throw Error(mw + ".vocab: id " + std::to_string(id) + " is used twice");
    // A byte-level model matches raw bytes; a piece outside the byte alphabet is unreachable.
    keys[size_t(id)] = byte_level ? byte_map().decode_text(piece).value_or("") : piece;
    slot = std::move(piece);
  }
  for (const auto& t : p.added)
    if (p.pieces[t.id].empty()) p.pieces[t.id] = t.content;

  auto& merges = tables.merges;
  if (byte_level)
    for (size_t k = 0; k < merges.size(); ++k) {
      auto a = byte_map().decode_text(merges[k].first), b = byte_map().decode_text(merges[k].second);
      if (!a || !b) throw Error(mw + ".merges[" + std::to_string(k) + "]: not in the byte-level alphabet");
      merges[k] = {std::move(*a), std::move(*b)};
    }
  BpeOptions opt;
  opt.byte_level = byte_level;
  opt.byte_fallback = json_bool_or(model, "byte_fallback", false, mw);
  opt.fuse_unk = json_bool_or(model, "fuse_unk", false, mw);
  opt.ignore_merges = json_bool_or(model, "ignore_merges", false, mw);
  std::string unk = json_string_or(model, "unk_token", "", mw);
  auto lookup = [&](const std::string& piece) -> std::optional<int32_t> {
    for (const auto& t : p.added)
      if (t.content == piece) return t.id;
    return find_piece(p.pieces, piece);
  };
  if (!unk.empty()) {
    opt.unk_id = lookup(unk);
    if (!opt.unk_id) throw Error(mw + ".unk_token: '" + unk + "' is not in the vocabulary");
  }
  p.model = std::make_unique<BpeModel>(std::move(keys), merges, opt, mw);

  PostProcess post = parse_post_processor(j.value("post_processor", Json()), lookup, name + ": post_processor");
  p.prefix = post.prefix;
  p.suffix = post.suffix;
  // BOS/EOS: tokenizer_config.json names them; otherwise the post-processor's first token.
  if (config.bos_token) p.bos = lookup(*config.bos_token);
  else if (!p.prefix.empty()) p.bos = p.prefix.front();
  if (config.eos_token) p.eos = lookup(*config.eos_token);
  else if (!p.suffix.empty()) p.eos = p.suffix.back();
  else
    for (const char* guess : {"</s>", "<|endoftext|>", "<|end_of_text|>"})
      if (!p.eos) p.eos = lookup(guess);
  p.chat_template = config.chat_template;
  return make_pipeline_tokenizer(std::move(p));
}

std::unique_ptr<Tokenizer> load_hf_json_file(const std::filesystem::path& file) {
  TokenizerConfig config = read_tokenizer_config(file.parent_path() / "tokenizer_config.json");
  return load_hf_json(read_text(file), file.string(), config);
}

}  // namespace hg::tok
