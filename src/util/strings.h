// Small string helpers shared across the project.
#pragma once
#include <functional>
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

// What `text` makes of each item, with `sep` between each two:
// join(eval_tasks(), ", ", &EvalTask::name), join(ids, " ", [](int id) { return std::to_string(id); }).
template <typename Range, typename Text>
std::string join(const Range& items, std::string_view sep, Text text) {
  std::string s;
  bool first = true;
  for (const auto& item : items) {
    if (!first) s += sep;
    first = false;
    s += std::invoke(text, item);
  }
  return s;
}

}  // namespace hg
