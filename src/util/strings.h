// Small string helpers shared across the project.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace hg {

// The parts with `sep` between each two (empty parts included: {"", "a"} joins to ",a").
inline std::string join(const std::vector<std::string>& parts, std::string_view sep = ", ") {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += sep;
    s += parts[i];
  }
  return s;
}

}  // namespace hg
