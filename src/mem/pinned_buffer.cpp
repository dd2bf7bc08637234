#include "mem/pinned_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "hybridgen/error.h"

namespace hg::mem {

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : registrar_(o.registrar_),
      ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      pinned_(std::exchange(o.pinned_, false)) {}

void PinnedBuffer::release() {
  if (!ptr_) return;
  if (registrar_) registrar_->unregister_range(ptr_, bytes_);
  std::free(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  pinned_ = false;
}

std::byte* PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return ptr_;
  constexpr size_t kPage = 4096;
  const size_t want = (std::max(bytes, 2 * bytes_) + kPage - 1) / kPage * kPage;
  release();
  ptr_ = static_cast<std::byte*>(std::aligned_alloc(kPage, want));
  if (!ptr_) throw Error("cannot allocate a " + std::to_string(want) + "-byte pinned buffer");
  bytes_ = want;
  pinned_ = registrar_ && registrar_->register_range(ptr_, bytes_);
  return ptr_;
}

}  // namespace hg::mem
