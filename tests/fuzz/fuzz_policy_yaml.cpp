// libFuzzer target for --policy-file YAML: apply_policy_yaml then validate_policy, as the CLI
// does; any text must give a policy or raise hg::Error (never a YAML exception, crash or hang).
// apply_policy_yaml reads a path, so each input goes through one scratch file per process.
// Run: build-san/bin/fuzz_policy_yaml -max_len=2048 build-san/corpus/fuzz_policy_yaml
// tests/fuzz/corpus/fuzz_policy_yaml
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "hybridgen/error.h"
#include "hybridgen/policy.h"

namespace {

struct ScratchFile {
  std::string path =
      (std::filesystem::temp_directory_path() / ("hg_fuzz_policy_" + std::to_string(getpid()) + ".yaml")).string();
  ~ScratchFile() { std::remove(path.c_str()); }
};

const std::string& scratch_path() {
  static const ScratchFile f;
  return f.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(scratch_path().c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  try {
    hg::Policy p = hg::policy_preset("hybrid");
    hg::apply_policy_yaml(p, scratch_path());
    hg::validate_policy(p, 4096);
    (void)hg::describe_policy(p);
  } catch (const hg::Error&) {
  }
  return 0;
}
