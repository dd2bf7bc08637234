// A grow-only, 64-byte aligned buffer: per-thread kernel scratch that AVX-512 loads and stores
// use with aligned instructions (the bf16 GEMMs' packed X and W panels).
#pragma once
#include <cstdlib>
#include <memory>
#include <string>

#include "hybridgen/error.h"

namespace hg::cpu {

template <class T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 64;

  // At least n elements; the old contents are lost when it grows.
  T* get(size_t n) {
    if (n > size_) {
      data_.reset(static_cast<T*>(std::aligned_alloc(kAlign, (n * sizeof(T) + kAlign - 1) / kAlign * kAlign)));
      if (!data_) throw Error("out of memory for a kernel workspace of " + std::to_string(n * sizeof(T)) + " bytes");
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t size_ = 0;
};

}  // namespace hg::cpu
