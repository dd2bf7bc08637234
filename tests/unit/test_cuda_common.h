// Shared by the CUDA tests: the skip rule and device-buffer helpers. The tests reach the GPU only
// through the Device interface (make_cuda_device), so they compile in every build; where the
// build has no CUDA backend or the machine has no GPU they are skipped with the reason. A skip
// never hides a build break: these files are compiled and linked by every build.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "device/device.h"

namespace hg::test {

#ifdef HG_HAVE_CUDA
inline constexpr const char* kNoGpuMessage = "no CUDA GPU found: CUDA test built, not run";
#else
inline constexpr const char* kNoGpuMessage = "this build has no CUDA backend: CUDA test not run";
#endif

#define HG_REQUIRE_CUDA_GPU()                                       \
  do {                                                              \
    if (::hg::cuda_device_count() == 0) GTEST_SKIP() << ::hg::test::kNoGpuMessage; \
  } while (0)

// A device allocation freed by the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer(Device& d, size_t bytes) : device_(d), ptr_(d.alloc(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() { device_.free(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  Device& device_;
  void* ptr_;
  size_t bytes_;
};

template <typename T>
std::unique_ptr<DeviceBuffer> to_device(Device& d, const std::vector<T>& host) {
  auto b = std::make_unique<DeviceBuffer>(d, sizeof(T) * host.size());
  d.copy_to_device(b->get(), host.data(), sizeof(T) * host.size());
  return b;
}

template <typename T>
std::vector<T> to_host(Device& d, const DeviceBuffer& b, size_t count) {
  std::vector<T> out(count);
  d.copy_to_host(out.data(), b.get(), sizeof(T) * count);
  return out;
}

inline std::vector<float> uniform_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace hg::test
