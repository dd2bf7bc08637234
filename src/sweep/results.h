// The results file of a sweep: JSON Lines, one complete line per point. A line is written with
// one write(2) on an O_APPEND descriptor and synced, so a crash (kill -9 included) leaves whole
// lines only; a torn last line (power loss, full disk) is dropped by the next --resume.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace hg::sweep {

class ResultsFile {
 public:
  // Opens `path` for appending, creating it (and its directory). Without resume the file must be
  // absent or empty (hg::Error otherwise: a second sweep would mix its lines into it). With
  // resume, the lines of points that finished ("status": "ok") are kept and their keys become
  // done(); error lines and a torn last line are dropped, so those points run again and end
  // with one line each. The file is then rewritten through a temporary file and rename(2).
  // A shard's file (`shard_line` given, sweep/shard.h) starts with that line: resuming checks that
  // the file is this shard's (same sweep, same I/N) and brings its shard line up to date; an
  // unsharded sweep refuses to resume a shard's file.
  ResultsFile(const std::string& path, bool resume, const nlohmann::json& shard_line = nullptr);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  const std::set<std::string>& done() const { return done_; }
  size_t dropped() const { return dropped_; }  // lines dropped on resume (errors, torn)
  const std::string& path() const { return path_; }

  // Appends one line (j.dump() + '\n'); hg::Error when it cannot be written whole.
  void append(const nlohmann::json& j);

 private:
  std::string path_;
  int fd_ = -1;
  std::set<std::string> done_;
  size_t dropped_ = 0;
};

// Writes `text` to `path` whole or not at all: through PATH.tmp, fsync(2) and rename(2).
void replace_file(const std::string& path, const std::string& text);

}  // namespace hg::sweep
