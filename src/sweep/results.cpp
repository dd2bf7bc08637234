#include "sweep/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hybridgen/error.h"
#include "sweep/shard.h"

namespace hg::sweep {

namespace fs = std::filesystem;

namespace {

std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(path + ": cannot write results: " + errno_text());
    done += static_cast<size_t>(n);
  }
}

// The lines of an existing results file worth keeping, and the keys of the points they finish;
// its shard line, if any, goes to `shard_text` (not kept: the caller writes the current one).
std::string kept_lines(const std::string& path, std::set<std::string>& done, size_t& dropped, std::string& shard_text) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::string kept;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t nl = text.find('\n', begin);
    if (nl == std::string::npos) {  // torn last line
      ++dropped;
      break;
    }
    const std::string line = text.substr(begin, nl - begin);
    begin = nl + 1;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    Shard shard;
    if (shard_text.empty() && kept.empty() && read_shard_line(j, shard)) {
      shard_text = line;
      continue;
    }
    if (j.is_object() && text_field(j, "status") == "ok" && j.contains("key") && j["key"].is_string() &&
        done.insert(j["key"].get<std::string>()).second) {
      kept += line + '\n';
    } else {
      ++dropped;
    }
  }
  return kept;
}

// Whether the file at `path` may be resumed as the results of `wanted` (null: unsharded), given
// the shard line it holds ("" when none); hg::Error saying why not.
void check_resumable(const std::string& path, const std::string& shard_text, const nlohmann::json& wanted,
                     bool has_points) {
  Shard held, want;
  const nlohmann::json held_line = shard_text.empty() ? nlohmann::json() : nlohmann::json::parse(shard_text);
  const bool is_shard = read_shard_line(held_line, held);
  if (wanted.is_null()) {
    if (is_shard)
      throw Error(path + ": holds the results of shard " + held.name() + "; resume it with --shard " + held.name());
    return;
  }
  read_shard_line(wanted, want);
  if (!is_shard) {
    if (has_points)
      throw Error(path + ": holds the results of an unsharded sweep, not of shard " + want.name() +
                  "; give the shard its own -o");
    return;
  }
  if (held != want || text_field(held_line, "sweep") != text_field(wanted, "sweep"))
    throw Error(path + ": holds the results of shard " + held.name() + " of sweep '" + text_field(held_line, "sweep") +
                "', not of shard " + want.name() + " of sweep '" + text_field(wanted, "sweep") +
                "'; give each shard its own -o");
}

}  // namespace

void replace_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(tmp + ": cannot write: " + errno_text());
  try {
    write_all(fd, text, tmp);
    if (::fsync(fd) != 0) throw Error(tmp + ": cannot sync: " + errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": cannot replace: " + errno_text());
}

ResultsFile::ResultsFile(const std::string& path, bool resume, const nlohmann::json& shard_line) : path_(path) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) fs::create_directories(parent, ec);
  const bool exists = fs::exists(path, ec);
  if (exists && !resume && fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0)
    throw Error(path + ": the results file exists; give --resume to continue it, or another -o");
  const std::string shard_text =
      shard_line.is_null() ? "" : shard_line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  bool write_shard_line = !shard_line.is_null();
  if (exists && resume) {
    std::string held_shard;
    std::string kept = kept_lines(path, done_, dropped_, held_shard);
    check_resumable(path, held_shard, shard_line, !kept.empty());
    write_shard_line = false;
    bool rewrite = dropped_ > 0;
    if (!shard_line.is_null()) {  // the current shard line first (the file's points may have changed)
      rewrite = rewrite || held_shard + '\n' != shard_text;
      kept = shard_text + kept;
    }
    if (rewrite) replace_file(path, kept);
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot open the results file for writing: " + errno_text());
  if (write_shard_line) append(shard_line);
}

ResultsFile::~ResultsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsFile::append(const nlohmann::json& j) {
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  write_all(fd_, line, path_);
  if (::fdatasync(fd_) != 0) throw Error(path_ + ": cannot sync results: " + errno_text());
}

}  // namespace hg::sweep
