#include "device/device.h"

#include "hybridgen/error.h"

namespace hg {

// Backends implement the hybrid ops as they gain them; until then a clear error, not a crash.
void Device::hybrid_attention(const HybridAttentionArgs&) {
  throw Error("device '" + name() + "' does not implement hybrid attention yet (use --policy full on it)");
}

}  // namespace hg
