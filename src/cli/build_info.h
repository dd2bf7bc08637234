// What the binary was built from (cmake/build_info.cmake writes the definitions at every build).
#pragma once

namespace hg::cli {

// `git describe --always --dirty --tags` at build time, "unknown" outside a git checkout.
const char* build_commit();
// What `hybridgen --version` prints: "hybridgen 0.2.0 (commit 1a2b3c4, Release, GNU 12.2.0, CUDA on)".
const char* version_line();

}  // namespace hg::cli
