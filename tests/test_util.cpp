#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace hg::test {

namespace fs = std::filesystem;

fs::path source_dir() { return HG_SOURCE_DIR; }
fs::path data_dir() { return fs::path(HG_SOURCE_DIR) / "data"; }
fs::path licensed_data_dir() {
  const char* dir = std::getenv("HG_TEST_DATA");
  return dir && *dir ? fs::path(dir) : fs::path();
}
// $HG_BIN_DIR first: binaries carried to another machine (tools/gpu_check.sh) are not where CMake
// built them.
fs::path bin_dir() {
  if (const char* env = std::getenv("HG_BIN_DIR"); env && *env) return env;
  return HG_BIN_DIR;
}
// $HG_PYTHON first: a tree built on one machine and run on another (tools/gpu_check.sh on the GPU
// machine) finds numpy in another interpreter than the one CMake saw; then that one, if it is
// still there; then python3 on PATH.
std::string python() {
  if (const char* env = std::getenv("HG_PYTHON"); env && *env) return env;
  std::error_code ec;
  if (fs::exists(HG_PYTHON, ec)) return HG_PYTHON;
  return "python3";
}

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

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
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

RunResult run_hybridgen(const std::string& args) { return run("'" + (bin_dir() / "hybridgen").string() + "' " + args); }

RunResult run_hybridgen_env(const std::string& env, const std::string& args) {
  return run("env " + env + " '" + (bin_dir() / "hybridgen").string() + "' " + args);
}

std::vector<float> read_npy(const fs::path& p, int64_t* rows, int64_t* cols) {
  const std::string data = read_file(p);
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error(p.string() + ": not a .npy file");
  const bool v1 = data[6] == 1;
  const size_t header_len = v1 ? static_cast<uint8_t>(data[8]) | (static_cast<uint8_t>(data[9]) << 8)
                               : static_cast<uint8_t>(data[8]) | (static_cast<uint8_t>(data[9]) << 8) |
                                     (static_cast<size_t>(static_cast<uint8_t>(data[10])) << 16);
  const size_t start = (v1 ? 10 : 12) + header_len;
  const std::string header = data.substr(v1 ? 10 : 12, header_len);
  if (header.find("'<f4'") == std::string::npos) throw std::runtime_error(p.string() + ": not float32: " + header);
  const size_t lp = header.find('('), rp = header.find(')');
  std::string shape = header.substr(lp + 1, rp - lp - 1);
  std::vector<int64_t> dims;
  std::stringstream ss(shape);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item.find_first_not_of(' ') != std::string::npos) dims.push_back(std::stoll(item));
  *rows = dims.size() == 2 ? dims[0] : 1;
  *cols = dims.back();
  std::vector<float> out(static_cast<size_t>(*rows * *cols));
  if (data.size() < start + out.size() * 4) throw std::runtime_error(p.string() + ": truncated");
  std::memcpy(out.data(), data.data() + start, out.size() * 4);
  return out;
}

void write_ids(const fs::path& p, const std::vector<int32_t>& ids) {
  std::ofstream f(p);
  f << "[";
  for (size_t i = 0; i < ids.size(); ++i) f << (i ? "," : "") << ids[i];
  f << "]";
}

fs::path tiny_model(const std::string& variant) {
  static fs::path root = [] {
    fs::path dir = temp_dir("tiny");
    RunResult r =
        run(python() + " '" + (source_dir() / "tools/make_tiny_model.py").string() + "' --all '" + dir.string() + "'");
    if (r.exit_code != 0) throw std::runtime_error("make_tiny_model.py failed: " + r.err);
    return dir;
  }();
  return root / variant;
}

std::vector<int32_t> random_ids(int n, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = d(rng);
  return ids;
}

namespace {
std::string cached_model(const std::string& file) {
  const char* cache = std::getenv("HG_CACHE");
  fs::path base =
      cache ? fs::path(cache) : fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache/hybridgen";
  fs::path p = base / "models" / file;
  return fs::exists(p) ? p.string() : std::string();
}
}  // namespace

std::string smollm2_path() { return cached_model("SmolLM2-135M-Instruct.Q4_1.gguf"); }

std::string qwen_path() { return cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"); }

std::vector<cpu::CpuIsa> supported_cpu_isas() {
  std::vector<cpu::CpuIsa> out;
  for (cpu::CpuIsa i : {cpu::CpuIsa::Scalar, cpu::CpuIsa::Avx2, cpu::CpuIsa::Avx512, cpu::CpuIsa::Avx512Bf16})
    if (cpu::cpu_isa_supported(i)) out.push_back(i);
  return out;
}

}  // namespace hg::test
