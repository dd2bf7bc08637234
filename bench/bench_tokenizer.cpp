// Tokenizer throughput: load time of each tokenizer and single-thread encode throughput over the
// whole of Moby-Dick (every chapter, one encode call each), plus decode throughput.
// Usage: bench_tokenizer [DATA_DIR]   (default: the repository's data/; the Llama tokenizers are
// measured where DATA_DIR has them, see data/README.md)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hybridgen/tokenizer.h"

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  fs::path data = argc > 1 ? fs::path(argv[1]) : fs::path(HG_SOURCE_DIR) / "data";
  std::vector<std::string> chapters;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(data / "text/moby-dick")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  size_t bytes = 0;
  for (const auto& f : files) {
    chapters.push_back(slurp(f));
    bytes += chapters.back().size();
  }
  std::printf("corpus: Moby-Dick, %zu chapters, %.2f MB\n", chapters.size(), bytes / 1e6);
  std::printf("%-8s %10s %12s %12s %10s\n", "name", "load ms", "encode MB/s", "decode MB/s", "tokens");
  for (const char* name : {"llama3", "qwen3", "gpt2", "llama2"}) {
    fs::path dir = data / "tokenizers" / name;
    fs::path file = std::string(name) == "gpt2" ? dir / "vocab.json" : dir / "tokenizer.json";
    if (!fs::exists(file)) {
      std::printf("%-8s not in %s\n", name, dir.string().c_str());
      continue;
    }
    // Best of 3 loads: the first one also pays for the page cache.
    double load_s = 1e9;
    std::unique_ptr<hg::Tokenizer> tok;
    for (int r = 0; r < 3; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      tok = hg::load_tokenizer(file);
      load_s = std::min(load_s, seconds_since(t0));
    }
    double enc_s = 1e9, dec_s = 1e9;
    size_t n_tokens = 0;
    for (int r = 0; r < 3; ++r) {
      std::vector<std::vector<int32_t>> ids;
      auto t0 = std::chrono::steady_clock::now();
      for (const auto& c : chapters) ids.push_back(tok->encode(c, false));
      enc_s = std::min(enc_s, seconds_since(t0));
      n_tokens = 0;
      t0 = std::chrono::steady_clock::now();
      for (const auto& v : ids) n_tokens += v.size() + tok->decode(v).size() * 0;
      dec_s = std::min(dec_s, seconds_since(t0));
    }
    std::printf("%-8s %10.1f %12.2f %12.2f %10zu\n", name, load_s * 1e3, bytes / 1e6 / enc_s,
                bytes / 1e6 / dec_s, n_tokens);
  }
  return 0;
}
