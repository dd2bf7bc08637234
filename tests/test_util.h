// Helpers shared by the tests: paths to the build, the sources and the test data; running the CLI.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"

namespace hg::test {

std::filesystem::path source_dir();
std::filesystem::path data_dir();  // data/ of the repository: real texts, tokenizers, golden ids
// Real data that may not be redistributed with the repository (Meta's Llama 2/3 tokenizers and
// their golden ids): the directory named by HG_TEST_DATA, laid out as data/, or "" when unset.
std::filesystem::path licensed_data_dir();
// Why a test that needs it skips when HG_TEST_DATA is unset.
inline constexpr const char* kNoLicensedDataMessage =
    "Meta's Llama tokenizers are not in the repository (their licence): set HG_TEST_DATA to a directory laid out as "
    "data/";
std::filesystem::path bin_dir();  // build/bin
std::string python();             // $HG_PYTHON, else the interpreter CMake found (has numpy, see setup.sh)
// A fresh temporary directory, removed when the process exits.
std::filesystem::path temp_dir(const std::string& tag);

struct RunResult {
  int exit_code = 0;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs a shell command line, capturing stdout and stderr separately.
RunResult run(const std::string& command_line);
// Runs build/bin/hybridgen with the given arguments (shell-quoted by the caller).
RunResult run_hybridgen(const std::string& args);
// The same with environment settings before it, e.g. "HG_PREFILL_GEMM=amx".
RunResult run_hybridgen_env(const std::string& env, const std::string& args);
std::string read_file(const std::filesystem::path& p);
// The lines of a text file, without their '\n' (none when it cannot be read).
std::vector<std::string> read_lines(const std::filesystem::path& p);
// Reads a little-endian float32 .npy array of 1 or 2 dimensions (rows = 1 for 1-D).
std::vector<float> read_npy(const std::filesystem::path& p, int64_t* rows, int64_t* cols);
// Writes a JSON array of ids to a file.
void write_ids(const std::filesystem::path& p, const std::vector<int32_t>& ids);

// A tiny random HF checkpoint of `variant` (tools/make_tiny_model.py --all, made once per process).
std::filesystem::path tiny_model(const std::string& variant);
// n random token ids in [0, vocab), seeded.
std::vector<int32_t> random_ids(int n, uint32_t seed, int vocab = 256);

// Every CPU kernel ISA this machine runs (tests compare each against the scalar twin).
std::vector<cpu::CpuIsa> supported_cpu_isas();

// The cached default model (SmolLM2 GGUF) or "" when it is not fetched.
std::string smollm2_path();
// The cached Qwen2.5-Coder-0.5B-Instruct GGUF (tools/fetch_model.sh qwen2.5-0.5b) or "".
std::string qwen_path();
// Why a test that needs it skips when it is not (one wording, so the skip summary groups them).
inline constexpr const char* kNoSmolLM2Message = "SmolLM2 GGUF not fetched (run tools/fetch_model.sh)";
inline constexpr const char* kNoQwenMessage = "Qwen2.5-0.5B GGUF not fetched (run tools/fetch_model.sh qwen2.5-0.5b)";

}  // namespace hg::test
