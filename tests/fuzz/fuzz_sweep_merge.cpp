// libFuzzer target for the shards' results files that `hybridgen sweep FILE --merge OUT SHARD...`
// reads (written by array tasks that may have been killed at any byte): the input is up to three
// shard files separated by NUL bytes, merged against a fixed four-point sweep. Any bytes must
// merge or raise hg::Error (never a JSON exception, crash or hang).
// Run: build-san/bin/fuzz_sweep_merge -max_len=16384 build-san/corpus/fuzz_sweep_merge
// tests/fuzz/corpus/fuzz_sweep_merge
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "sweep/merge.h"
#include "sweep/points.h"
#include "sweep/sweep_file.h"

namespace {

namespace fs = std::filesystem;

const hg::sweep::SweepFile& sweep() {
  static const hg::sweep::SweepFile f =
      hg::sweep::parse_sweep("name: fz\ntask: ppl\ngrid:\n  window: [16, 32]\n  k: [4, 8]\n", "fz.yaml", {"ppl"});
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<hg::sweep::Point> points = hg::sweep::expand_points(sweep());
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("fuzz_sweep_merge." + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> shards;
  for (size_t begin = 0; shards.size() < 3;) {
    const size_t end = std::min(input.find('\0', begin), input.size());
    shards.push_back((dir / ("shard" + std::to_string(shards.size()) + ".jsonl")).string());
    std::ofstream(shards.back(), std::ios::binary | std::ios::trunc) << input.substr(begin, end - begin);
    if (end == input.size()) break;
    begin = end + 1;
  }
  try {
    hg::sweep::merge_shards(sweep(), points, shards, (dir / "merged.jsonl").string());
  } catch (const hg::Error&) {
  }
  return 0;
}
