#include "device/device.h"

#include <algorithm>
#include <vector>

#include "hybridgen/error.h"
#include "mem/pinned_buffer.h"

namespace hg {

std::byte* grow_pinned(Device& device, mem::PinnedBuffer& buffer, size_t bytes) {
  if (bytes <= buffer.size()) return buffer.data();
  device.synchronize();
  buffer.reserve(bytes);
  if (!buffer.pinned() && device.dma_registrar())
    throw Error("a " + std::to_string(bytes) + "-byte host buffer could not be pinned for DMA");
  return buffer.data();
}

void Device::copy_on_device(void* dst, const void* src, size_t bytes) {
  std::vector<std::byte> host(bytes);
  copy_to_host(host.data(), src, bytes);
  copy_to_device(dst, host.data(), bytes);
}

void Device::gather_ring_rows(const RingRows& r, void* dst) {
  for (int s = 0; s < 2; ++s) {
    if (!r.src[s]) continue;
    for (int64_t b = 0; b < r.blocks; ++b) {
      const auto* block = static_cast<const std::byte*>(r.src[s]) + b * r.block_bytes;
      auto* out = static_cast<std::byte*>(dst) + (s * r.blocks + b) * r.n * r.row_bytes;
      for (int j = 0; j < r.n;) {  // runs up to the ring's wrap
        const int slot = (r.ring_head + j) % r.ring_slots;
        const int run = std::min(r.n - j, r.ring_slots - slot);
        copy_on_device(out + j * r.row_bytes, block + (r.ring_base + slot) * r.row_bytes, run * r.row_bytes);
        j += run;
      }
    }
  }
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
