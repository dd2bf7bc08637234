#include "tokenizer/hf_components.h"

#include "hybridgen/error.h"

namespace hg::tok {

namespace {

std::string at(const std::string& where, const std::string& key) { return where + "." + key; }
std::string at(const std::string& where, const std::string& key, size_t k) {
  return where + "." + key + "[" + std::to_string(k) + "]";
}

[[noreturn]] void unsupported(const std::string& where, const std::string& kind, const std::string& type) {
  throw Error(where + ": " + kind + " type '" + type + "' is not supported");
}

// {"String": "..."} or {"Regex": "..."}; returns the pattern and whether it is literal.
std::pair<std::string, bool> parse_pattern(const Json& j, const std::string& where) {
  const Json& p = json_field(j, "pattern", where);
  std::string w = at(where, "pattern");
  if (p.is_object() && p.contains("String")) return {json_string(p, "String", w), true};
  if (p.is_object() && p.contains("Regex")) return {json_string(p, "Regex", w), false};
  throw Error(w + ": expected {\"String\": ...} or {\"Regex\": ...}");
}

PrependScheme parse_prepend_scheme(const Json& j, const std::string& where) {
  if (j.contains("prepend_scheme")) {
    std::string s = json_string(j, "prepend_scheme", where);
    if (s == "always") return PrependScheme::Always;
    if (s == "never") return PrependScheme::Never;
    if (s == "first") return PrependScheme::First;
    throw Error(at(where, "prepend_scheme") + ": unknown value '" + s + "'");
  }
  // Older files: add_prefix_space true means "always".
  return json_bool_or(j, "add_prefix_space", true, where) ? PrependScheme::Always : PrependScheme::Never;
}

SplitBehavior parse_behavior(const std::string& s, const std::string& where) {
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  throw Error(at(where, "behavior") + ": unknown split behavior '" + s + "'");
}

}  // namespace

NormalizerPtr parse_normalizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, where);
  if (type == "NFC") return make_unicode_normalizer(NormalForm::NFC);
  if (type == "NFD") return make_unicode_normalizer(NormalForm::NFD);
  if (type == "NFKC") return make_unicode_normalizer(NormalForm::NFKC);
  if (type == "NFKD") return make_unicode_normalizer(NormalForm::NFKD);
  if (type == "Lowercase") return make_lowercase_normalizer();
  if (type == "Prepend") return make_prepend_normalizer(json_string(j, "prepend", where));
  if (type == "Strip")
    return make_strip_normalizer(json_bool_or(j, "strip_left", true, where),
                                 json_bool_or(j, "strip_right", true, where));
  if (type == "Replace") {
    auto [pattern, literal] = parse_pattern(j, where);
    return make_replace_normalizer(pattern, literal, json_string(j, "content", where), at(where, "pattern"));
  }
  if (type == "Sequence") {
    const Json& arr = json_array(j, "normalizers", where);
    std::vector<NormalizerPtr> parts;
    for (size_t k = 0; k < arr.size(); ++k) {
      auto n = parse_normalizer(arr[k], at(where, "normalizers", k));
      if (n) parts.push_back(std::move(n));
    }
    return make_sequence_normalizer(std::move(parts));
  }
  unsupported(where, "normalizer", type);
}

PreTokenizerPtr parse_pre_tokenizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, where);
  if (type == "Split") {
    auto [pattern, literal] = parse_pattern(j, where);
    return make_split_pre_tokenizer(pattern, literal,
                                    parse_behavior(json_string(j, "behavior", where), where),
                                    json_bool_or(j, "invert", false, where), at(where, "pattern"));
  }
  if (type == "ByteLevel")
    return make_byte_level_pre_tokenizer(json_bool_or(j, "add_prefix_space", true, where),
                                         json_bool_or(j, "use_regex", true, where));
  if (type == "Metaspace")
    return make_metaspace_pre_tokenizer(json_string_or(j, "replacement", "\xE2\x96\x81", where),
                                        parse_prepend_scheme(j, where), json_bool_or(j, "split", true, where));
  if (type == "Digits") return make_digits_pre_tokenizer(json_bool_or(j, "individual_digits", false, where));
  if (type == "Whitespace") return make_whitespace_pre_tokenizer();
  if (type == "WhitespaceSplit") return make_whitespace_split_pre_tokenizer();
  if (type == "Sequence") {
    const Json& arr = json_array(j, "pretokenizers", where);
    std::vector<PreTokenizerPtr> parts;
    for (size_t k = 0; k < arr.size(); ++k) {
      auto p = parse_pre_tokenizer(arr[k], at(where, "pretokenizers", k));
      if (p) parts.push_back(std::move(p));
    }
    return make_sequence_pre_tokenizer(std::move(parts), where);
  }
  unsupported(where, "pre-tokenizer", type);
}

DecoderPtr parse_decoder(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, where);
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "ByteFallback") return make_byte_fallback_decoder();
  if (type == "Fuse") return make_fuse_decoder();
  if (type == "Metaspace")
    return make_metaspace_decoder(json_string_or(j, "replacement", "\xE2\x96\x81", where),
                                  parse_prepend_scheme(j, where) != PrependScheme::Never);
  if (type == "Replace") {
    auto [pattern, literal] = parse_pattern(j, where);
    if (!literal) throw Error(at(where, "pattern") + ": a Regex pattern in a Replace decoder is not supported");
    return make_replace_decoder(pattern, json_string(j, "content", where));
  }
  if (type == "Strip") {
    int64_t start = json_int(j, "start", where), stop = json_int(j, "stop", where);
    if (start < 0 || stop < 0) throw Error(where + ": start and stop must not be negative");
    return make_strip_decoder(json_string(j, "content", where), size_t(start), size_t(stop));
  }
  if (type == "Sequence") {
    const Json& arr = json_array(j, "decoders", where);
    std::vector<DecoderPtr> parts;
    for (size_t k = 0; k < arr.size(); ++k) {
      auto d = parse_decoder(arr[k], at(where, "decoders", k));
      if (d) parts.push_back(std::move(d));
    }
    return make_sequence_decoder(std::move(parts));
  }
  unsupported(where, "decoder", type);
}

namespace {

int32_t lookup_or_throw(const TokenLookup& lookup, const std::string& token, const std::string& where) {
  auto id = lookup(token);
  if (!id) throw Error(where + ": token '" + token + "' is not in the vocabulary");
  return *id;
}

// RobertaProcessing / BertProcessing: "cls": ["<s>", 0], "sep": ["</s>", 2].
int32_t special_pair_id(const Json& j, const std::string& key, const std::string& where) {
  const Json& v = json_field(j, key, where);
  if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
    throw Error(at(where, key) + ": expected [token, id]");
  return v[1].get<int32_t>();
}

void append_post_processor(const Json& j, const TokenLookup& lookup, const std::string& where,
                           PostProcess& out) {
  if (j.is_null()) return;
  std::string type = json_type(j, where);
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    out.prefix.push_back(special_pair_id(j, "cls", where));
    out.suffix.insert(out.suffix.begin(), special_pair_id(j, "sep", where));
    return;
  }
  if (type == "Sequence") {
    const Json& arr = json_array(j, "processors", where);
    for (size_t k = 0; k < arr.size(); ++k) append_post_processor(arr[k], lookup, at(where, "processors", k), out);
    return;
  }
  if (type != "TemplateProcessing") unsupported(where, "post-processor", type);
  const Json& single = json_array(j, "single", where);
  const Json* specials = j.contains("special_tokens") ? &j["special_tokens"] : nullptr;
  bool seen_sequence = false;
  PostProcess mine;
  for (size_t k = 0; k < single.size(); ++k) {
    std::string w = at(where, "single", k);
    const Json& item = single[k];
    if (item.is_object() && item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const Json& st = json_field(item, "SpecialToken", w);
    std::string name = json_string(st, "id", at(w, "SpecialToken"));
    std::vector<int32_t> ids;
    if (specials && specials->is_object() && specials->contains(name)) {
      std::string sw = at(where, "special_tokens") + "." + name;
      for (const auto& id : json_array((*specials)[name], "ids", sw)) {
        if (!id.is_number_integer()) throw Error(sw + ".ids: expected integers");
        ids.push_back(id.get<int32_t>());
      }
    } else {
      ids.push_back(lookup_or_throw(lookup, name, w));
    }
    auto& dst = seen_sequence ? mine.suffix : mine.prefix;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
  out.prefix.insert(out.prefix.end(), mine.prefix.begin(), mine.prefix.end());
  out.suffix.insert(out.suffix.begin(), mine.suffix.begin(), mine.suffix.end());
}

}  // namespace

PostProcess parse_post_processor(const Json& j, const TokenLookup& lookup, const std::string& where) {
  PostProcess out;
  append_post_processor(j, lookup, where, out);
  return out;
}

}  // namespace hg::tok
