#include "sweep/merge.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hybridgen/error.h"
#include "sweep/results.h"
#include "sweep/shard.h"

namespace hg::sweep {

namespace {

namespace fs = std::filesystem;

// The complete lines of a file (a torn last line, from a task killed mid-write, is left out as
// --resume leaves it out), each with its 1-based line number.
std::vector<std::pair<int, std::string>> complete_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || fs::is_directory(path, ec)) throw Error(path + ": cannot read the shard's results file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::pair<int, std::string>> lines;
  int number = 0;
  for (size_t begin = 0, nl; (nl = text.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    ++number;
    if (nl > begin) lines.emplace_back(number, text.substr(begin, nl - begin));
  }
  return lines;
}

// The chosen line of a point so far: the first "ok" line, else the last error line.
struct Chosen {
  std::string text;
  bool ok = false;
  size_t lines = 0;
};

}  // namespace

MergeSummary merge_shards(const SweepFile& f, const std::vector<Point>& points, const std::vector<std::string>& shards,
                          const std::string& out) {
  if (shards.empty()) throw Error("--merge " + out + ": no shard results files given");
  std::map<std::string, size_t> index_of;  // point key -> run order
  for (const auto& p : points) index_of.emplace(p.key, p.index);
  const std::string hash = points_hash(points);

  MergeSummary s;
  std::string first_path;
  std::vector<bool> seen;
  std::vector<Chosen> chosen(points.size());
  for (const auto& path : shards) {
    std::error_code ec;
    if (fs::exists(out, ec) && fs::equivalent(path, out, ec))
      throw Error("--merge " + out + ": is also given as a shard; merge into another file");
    const auto lines = complete_lines(path);
    Shard shard;
    const nlohmann::json head =
        lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines[0].second, nullptr, false);
    if (!read_shard_line(head, shard))
      throw Error(path +
                  ":1: not a shard's results file (it does not start with the shard line that `hybridgen "
                  "sweep --shard I/N` writes)");
    const std::string what = path + ": shard " + shard.name();
    if (text_field(head, "sweep") != f.name || text_field(head, "task") != f.task)
      throw Error(what + " is of sweep '" + text_field(head, "sweep") + "' (task " + text_field(head, "task") +
                  "), not of " + f.path + " (sweep '" + f.name + "', task " + f.task + ")");
    if (text_field(head, "points_hash") != hash)
      throw Error(what + " was written for another version of " + f.path + " (" +
                  (head.contains("sweep_points") ? head["sweep_points"].dump() : std::string("?")) + " points, hash " +
                  text_field(head, "points_hash") + "; the file now has " + std::to_string(points.size()) + ", hash " +
                  hash + "): run it again with --shard " + shard.name() + " --resume");
    if (first_path.empty()) {
      first_path = path;
      s.shards = shard.count;
      seen.assign(shard.count, false);
    } else if (shard.count != s.shards) {
      throw Error(what + " is of a partition into " + std::to_string(shard.count) + " shards, but " + first_path +
                  " is of one into " + std::to_string(s.shards) + "; merge the shards of one partition");
    }
    seen[shard.index] = true;
    ++s.files;

    for (size_t i = 1; i < lines.size(); ++i) {
      const std::string where = path + ":" + std::to_string(lines[i].first) + ": ";
      const nlohmann::json j = nlohmann::json::parse(lines[i].second, nullptr, false);
      if (!j.is_object() || !j.contains("key") || !j["key"].is_string() || !j.contains("status"))
        throw Error(where + "not a result line (expected a JSON object with \"key\" and \"status\")");
      const std::string key = j["key"].get<std::string>();
      const auto it = index_of.find(key);
      if (it == index_of.end())
        throw Error(where + "point " + key + " is not a point of " + f.path +
                    " (another sweep file, or an edited one)");
      const size_t owner = shard_of(key, shard.count);
      if (owner != shard.index)
        throw Error(where + "point " + key + " belongs to shard " + Shard{owner, shard.count}.name() +
                    ", not to this file's shard " + shard.name());
      Chosen& c = chosen[it->second];
      ++c.lines;
      const bool ok = text_field(j, "status") == "ok";
      if (!c.ok) {
        c.text = lines[i].second;
        c.ok = ok;
      }
    }
  }
  std::string missing_shards;
  size_t n_missing = 0;
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) {
      if (++n_missing <= 8) missing_shards += (missing_shards.empty() ? "" : ", ") + Shard{i, s.shards}.name();
    }
  if (n_missing > 0)
    throw Error("--merge " + out + ": " + std::to_string(n_missing) + " of " + std::to_string(s.shards) +
                " shards missing (" + missing_shards + (n_missing > 8 ? ", ..." : "") +
                "): no file given holds them; give every shard's results file");

  std::string text;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Chosen& c = chosen[i];
    if (c.lines == 0) {
      s.missing.push_back(i);
      continue;
    }
    s.duplicates += c.lines - 1;
    (c.ok ? s.ok : s.failed) += 1;
    text += c.text + '\n';
  }
  const fs::path parent = fs::path(out).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  replace_file(out, text);
  return s;
}

}  // namespace hg::sweep
