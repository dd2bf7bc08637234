// One table of the policy enums' names (include/hybridgen/policy.h): what the knobs parse and
// describe (enum_knob, policy/knobs.h), what the scheduler's reports print. A new value is one
// row here; nothing indexes these by position.
#pragma once
#include <span>
#include <string_view>

#include "hybridgen/policy.h"

namespace hg {

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};

template <typename E>
std::span<const EnumName<E>> enum_names();

template <>
inline std::span<const EnumName<Selection>> enum_names() {
  static constexpr EnumName<Selection> kNames[] = {{"all", Selection::All}, {"post", Selection::Post}, {"pre", Selection::Pre}};
  return kNames;
}

template <>
inline std::span<const EnumName<MergeMode>> enum_names() {
  static constexpr EnumName<MergeMode> kNames[] = {{"logits", MergeMode::Logits}, {"lse", MergeMode::Lse}};
  return kNames;
}

template <>
inline std::span<const EnumName<QuerySource>> enum_names() {
  static constexpr EnumName<QuerySource> kNames[] = {
      {"exact", QuerySource::Exact}, {"speculative", QuerySource::Speculative}, {"refine", QuerySource::Refine},
      {"auto", QuerySource::Auto}};
  return kNames;
}

template <>
inline std::span<const EnumName<SchedMode>> enum_names() {
  static constexpr EnumName<SchedMode> kNames[] = {{"fixed", SchedMode::Fixed},
                                                   {"adaptive", SchedMode::Adaptive},
                                                   {"adaptive-k", SchedMode::AdaptiveK},
                                                   {"adaptive-select", SchedMode::AdaptiveSelect}};
  return kNames;
}

template <>
inline std::span<const EnumName<KvHome>> enum_names() {
  static constexpr EnumName<KvHome> kNames[] = {{"device", KvHome::Device}, {"host", KvHome::Host}, {"split", KvHome::Split}};
  return kNames;
}

// The name of a value ("?" for a value missing from its table).
template <typename E>
std::string_view enum_name(E value) {
  for (const auto& n : enum_names<E>())
    if (n.value == value) return n.name;
  return "?";
}

}  // namespace hg
