#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace hg::test {

namespace fs = std::filesystem;

fs::path source_dir() { return HG_SOURCE_DIR; }
fs::path shared_dir() { return fs::weakly_canonical(fs::path(HG_SHARED_DIR)); }
fs::path bin_dir() { return HG_BIN_DIR; }
std::string python() { return HG_PYTHON; }

namespace {
struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (auto& d : dirs) fs::remove_all(d, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}
}  // namespace

fs::path temp_dir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("hg_" + tag + "_XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* made = mkdtemp(buf.data());
  if (!made) throw std::runtime_error("mkdtemp failed for " + tmpl);
  temp_dirs().dirs.emplace_back(made);
  return made;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run(const std::string& command_line) {
  fs::path dir = temp_dir("run");
  fs::path out = dir / "out", err = dir / "err";
  std::string cmd = "(" + command_line + ") >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = read_file(out);
  r.err = read_file(err);
  fs::remove_all(dir);
  return r;
}

RunResult run_hybridgen(const std::string& args) {
  return run("'" + (bin_dir() / "hybridgen").string() + "' " + args);
}

std::string smollm2_path() {
  const char* cache = std::getenv("HG_CACHE");
  fs::path base = cache ? fs::path(cache) : fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache/hybridgen";
  fs::path p = base / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return fs::exists(p) ? p.string() : std::string();
}

}  // namespace hg::test
