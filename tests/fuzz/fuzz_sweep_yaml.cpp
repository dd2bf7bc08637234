// libFuzzer target for sweep files (`hybridgen sweep FILE.yaml`): parse_sweep then expand_points,
// as the runner does before validating the points; any text must give points or raise hg::Error
// (never a YAML exception, crash, hang or an allocation the size of a typo).
// Run: build-san/bin/fuzz_sweep_yaml -max_len=4096 build-san/corpus/fuzz_sweep_yaml
// tests/fuzz/corpus/fuzz_sweep_yaml
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "sweep/points.h"
#include "sweep/sweep_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> tasks = {"bench", "ppl", "fidelity", "passkey", "kmin"};
  try {
    const auto file =
        hg::sweep::parse_sweep(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml", tasks);
    const auto points = hg::sweep::expand_points(file);
    for (const auto& p : points) (void)p.describe();
  } catch (const hg::Error&) {
  }
  return 0;
}
