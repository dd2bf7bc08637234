// A host buffer a device copies to and from by DMA: page-aligned (so that its registration shares
// no page with other memory) and registered through the device's registrar where it has one.
// reserve() grows it, discarding its contents: no copy into or from it may be pending.
#pragma once
#include <cstddef>

#include "mem/arena.h"

namespace hg::mem {

class PinnedBuffer {
 public:
  explicit PinnedBuffer(mem::DmaRegistrar* registrar = nullptr) : registrar_(registrar) {}
  ~PinnedBuffer() { release(); }
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(PinnedBuffer&&) = delete;
  std::byte* reserve(size_t bytes);
  std::byte* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  // Whether the registrar pinned it (copies from it need no host wait); false without a registrar.
  bool pinned() const { return pinned_; }

 private:
  void release();
  mem::DmaRegistrar* registrar_;
  std::byte* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

}  // namespace hg::mem
