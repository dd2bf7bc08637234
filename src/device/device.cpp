#include "device/device.h"

#include <vector>

#include "hybridgen/error.h"

namespace hg {

void Device::copy_on_device(void* dst, const void* src, size_t bytes) {
  std::vector<std::byte> host(bytes);
  copy_to_host(host.data(), src, bytes);
  copy_to_device(dst, host.data(), bytes);
}

std::unique_ptr<Device> make_named_cuda_device(const std::string& name, int gpu) {
  if (name != "cpu" && name != "cuda" && name != "cuda-emu" && name != "auto")
    throw Error("--device: '" + name + "' is not one of auto, cpu, cuda, cuda-emu");
  if (name == "cuda" || (name == "auto" && cuda_device_count() > 0)) return make_cuda_device(gpu);
  if (name == "cuda-emu") return make_cuda_emu_device(gpu);  // a test instrument
  return nullptr;
}

// A backend without the hybrid op (both of today's have it) refuses with a clear error, not a crash.
void Device::hybrid_attention(const HybridAttentionArgs&) {
  throw Error("device '" + name() + "' does not implement hybrid attention yet (use --policy full on it)");
}

}  // namespace hg
