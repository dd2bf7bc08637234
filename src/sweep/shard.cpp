#include "sweep/shard.h"

#include <charconv>

#include "hybridgen/error.h"
#include "util/hash.h"

namespace hg::sweep {

namespace {

uint64_t key_bits(const std::string& key) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), v, 16);
  if (ec != std::errc() || end != key.data() + key.size())
    throw Error("point key '" + key + "': expected 16 hex digits");
  return v;
}

bool parse_size(const std::string& s, size_t& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string Shard::name() const { return std::to_string(index) + "/" + std::to_string(count); }

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  Shard s;
  if (slash == std::string::npos || !parse_size(text.substr(0, slash), s.index) ||
      !parse_size(text.substr(slash + 1), s.count))
    throw Error("--shard " + text + ": expected I/N, shard I (from 0) of N, e.g. --shard 0/4");
  if (s.count == 0) throw Error("--shard " + text + ": N must be at least 1");
  if (s.count > kMaxShards)
    throw Error("--shard " + text + ": N must be at most " + std::to_string(kMaxShards) +
                " (the most points a sweep has)");
  if (s.index >= s.count)
    throw Error("--shard " + text + ": I must be below N (shards are numbered 0.." + std::to_string(s.count - 1) + ")");
  return s;
}

size_t shard_of(const std::string& key, size_t count) {
  const uint64_t k = key_bits(key);
  size_t best = 0;
  uint64_t best_score = 0;
  for (size_t j = 0; j < count; ++j) {
    const uint64_t score = splitmix64(k ^ splitmix64(j));
    if (j == 0 || score > best_score) {
      best = j;
      best_score = score;
    }
  }
  return best;
}

std::vector<Point> shard_points(const std::vector<Point>& all, const Shard& s) {
  std::vector<Point> mine;
  for (const auto& p : all)
    if (shard_of(p.key, s.count) == s.index) mine.push_back(p);
  return mine;
}

std::string points_hash(const std::vector<Point>& all) {
  uint64_t h = splitmix64(all.size());
  for (const auto& p : all) h = splitmix64(h ^ key_bits(p.key));
  return hex16(h);
}

nlohmann::json shard_line(const SweepFile& f, const std::vector<Point>& all, const Shard& s) {
  return {{"status", "shard"},
          {"sweep", f.name},
          {"task", f.task},
          {"shard", {{"index", s.index}, {"count", s.count}}},
          {"points", shard_points(all, s).size()},
          {"sweep_points", all.size()},
          {"points_hash", points_hash(all)}};
}

std::string text_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool read_shard_line(const nlohmann::json& line, Shard& s) {
  if (text_field(line, "status") != "shard" || !line.contains("shard")) return false;
  const auto& j = line["shard"];
  if (!j.is_object() || !j.contains("index") || !j.contains("count") || !j["index"].is_number_unsigned() ||
      !j["count"].is_number_unsigned())
    return false;
  s.index = j["index"].get<size_t>();
  s.count = j["count"].get<size_t>();
  // At most the shards --shard accepts: a count read from a file sizes the merge's tables (found by
  // the fuzz target's short run in ctest: a count of 2^40 threw std::bad_alloc past every handler).
  return s.count > 0 && s.count <= kMaxShards && s.index < s.count;
}

}  // namespace hg::sweep
