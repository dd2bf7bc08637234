// Field access for tokenizer.json and friends that names the offending field in every error
// ("tokenizer.json: pre_tokenizer.pretokenizers[1].behavior: expected a string").
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace hg::tok {

using Json = nlohmann::json;

// `where` is the path of `j` (e.g. "file: model"); the helpers append ".key".
const Json& json_field(const Json& j, const std::string& key, const std::string& where);
std::string json_string(const Json& j, const std::string& key, const std::string& where);
std::string json_string_or(const Json& j, const std::string& key, const std::string& fallback,
                           const std::string& where);
bool json_bool_or(const Json& j, const std::string& key, bool fallback, const std::string& where);
int64_t json_int(const Json& j, const std::string& key, const std::string& where);
const Json& json_array(const Json& j, const std::string& key, const std::string& where);
// A type name for messages about unsupported components ("Unigram", "BertNormalizer").
std::string json_type(const Json& j, const std::string& where);

}  // namespace hg::tok
