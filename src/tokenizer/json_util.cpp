#include "tokenizer/json_util.h"

#include "hybridgen/error.h"

namespace hg::tok {

const Json& json_field(const Json& j, const std::string& key, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": expected an object");
  auto it = j.find(key);
  if (it == j.end()) throw Error(where + "." + key + ": missing");
  return *it;
}

std::string json_string(const Json& j, const std::string& key, const std::string& where) {
  const Json& v = json_field(j, key, where);
  if (!v.is_string()) throw Error(where + "." + key + ": expected a string");
  return v.get<std::string>();
}

std::string json_string_or(const Json& j, const std::string& key, const std::string& fallback,
                           const std::string& where) {
  if (!j.is_object()) throw Error(where + ": expected an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw Error(where + "." + key + ": expected a string");
  return it->get<std::string>();
}

bool json_bool_or(const Json& j, const std::string& key, bool fallback, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": expected an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(where + "." + key + ": expected true or false");
  return it->get<bool>();
}

int64_t json_int(const Json& j, const std::string& key, const std::string& where) {
  const Json& v = json_field(j, key, where);
  if (!v.is_number_integer()) throw Error(where + "." + key + ": expected an integer");
  return v.get<int64_t>();
}

const Json& json_array(const Json& j, const std::string& key, const std::string& where) {
  const Json& v = json_field(j, key, where);
  if (!v.is_array()) throw Error(where + "." + key + ": expected an array");
  return v;
}

std::string json_type(const Json& j, const std::string& where) { return json_string(j, "type", where); }

}  // namespace hg::tok
