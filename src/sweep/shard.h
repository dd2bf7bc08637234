// Sharding a sweep over machines. Shard I of N holds the points whose key ranks I first under
// rendezvous (highest-random-weight) hashing: a point's shard depends on its key and N only, so
// points added to a file never move an existing point to another shard (a resumed shard keeps
// its finished lines), and going from N to N+1 shards moves only the ~1/(N+1) of the points that
// the new shard wins. A shard's results file starts with one shard line naming its sweep, its
// shard and the file's points, so that `--merge` can tell shards of another file or partition,
// empty shards included.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sweep/points.h"

namespace hg::sweep {

struct Shard {
  size_t index = 0;  // 0 .. count-1
  size_t count = 1;
  std::string name() const;  // "I/N"
  bool operator==(const Shard&) const = default;
};

// More shards than points is allowed (the rest are empty); more than this is a typo.
constexpr size_t kMaxShards = kMaxPoints;

// "I/N" as --shard takes it; hg::Error "--shard ...: ..." naming what was expected.
Shard parse_shard(const std::string& text);

// The shard (0 .. count-1) of the point with this key (16 hex digits, Point::key).
size_t shard_of(const std::string& key, size_t count);

// The points of `all` in shard s, in run order (copies: they still point into the SweepFile).
std::vector<Point> shard_points(const std::vector<Point>& all, const Shard& s);

// A fingerprint of the file's points (their keys, in run order): 16 hex digits.
std::string points_hash(const std::vector<Point>& all);

// The first line of shard s's results file:
//   {"status": "shard", "sweep", "task", "shard": {"index", "count"}, "points" (in the shard),
//    "sweep_points" (in the file), "points_hash"}
nlohmann::json shard_line(const SweepFile& f, const std::vector<Point>& all, const Shard& s);
// j[key] when j is an object holding a string there, else "" (result lines are read from files
// that anything may have written).
std::string text_field(const nlohmann::json& j, const char* key);

// Reads the shard back from a shard line; nullopt-like false when `line` is not one.
bool read_shard_line(const nlohmann::json& line, Shard& s);

}  // namespace hg::sweep
