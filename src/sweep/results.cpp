#include "sweep/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hybridgen/error.h"

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

// The lines of an existing results file worth keeping, and the keys of the points they finish.
std::string kept_lines(const std::string& path, std::set<std::string>& done, size_t& dropped) {
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
    if (j.is_object() && j.value("status", "") == "ok" && j.contains("key") && j["key"].is_string() &&
        done.insert(j["key"].get<std::string>()).second) {
      kept += line + '\n';
    } else {
      ++dropped;
    }
  }
  return kept;
}

}  // namespace

ResultsFile::ResultsFile(const std::string& path, bool resume) : path_(path) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) fs::create_directories(parent, ec);
  const bool exists = fs::exists(path, ec);
  if (exists && !resume && fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0)
    throw Error(path + ": the results file exists; give --resume to continue it, or another -o");
  if (exists && resume) {
    const std::string kept = kept_lines(path, done_, dropped_);
    if (dropped_ > 0) {
      const std::string tmp = path + ".resume.tmp";
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) throw Error(tmp + ": cannot write: " + errno_text());
      try {
        write_all(fd, kept, tmp);
        if (::fsync(fd) != 0) throw Error(tmp + ": cannot sync: " + errno_text());
      } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
      }
      ::close(fd);
      if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": cannot replace: " + errno_text());
    }
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot open the results file for writing: " + errno_text());
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
