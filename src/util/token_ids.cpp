#include "util/token_ids.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "hybridgen/error.h"

namespace hg {

std::vector<int32_t> parse_ids(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": not a JSON array of token ids (" + std::string(e.what()) + ")");
  }
  if (!j.is_array()) throw Error(what + ": expected a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (const auto& v : j) {
    if (!v.is_number_integer()) throw Error(what + ": element " + v.dump() + " is not an integer token id");
    // Found by reading for the fuzz target: get<int32_t>() wrapped 4294967297 to id 1.
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(kMax)
                                                 : v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMax;
    if (!in_range)
      throw Error(what + ": element " + v.dump() + " is not a token id (expected 0 .. " + std::to_string(kMax) + ")");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

}  // namespace hg
