// What the binary was built from: `git describe --always --dirty` at build time
// (cmake/build_info.cmake), "unknown" when built outside a git checkout.
#pragma once

namespace hg::cli {

const char* build_commit();

}  // namespace hg::cli
