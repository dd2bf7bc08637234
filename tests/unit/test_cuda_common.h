// Shared by the CUDA tests: the device under test and device-buffer helpers. The tests reach the
// CUDA device only through the Device interface, so they compile in every build and run
// everywhere: on the GPU where the build has the CUDA backend and the machine a GPU, otherwise on
// the emulated device (`cuda-emu`, kernels/cuda/emu/cuda_emu.h), which runs the same CUDA device
// code and kernel sources on the CPU. HG_TEST_CUDA=emu forces the emulated device on a GPU
// machine, HG_TEST_CUDA=gpu makes a missing GPU a failure (tools/gpu_check.sh sets both).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/device.h"

namespace hg::test {

// "cuda" or "cuda-emu": the --device the CUDA tests run on (see above).
inline std::string cuda_test_device() {
  const char* want = std::getenv("HG_TEST_CUDA");
  const std::string w = want ? want : "";
  if (w == "emu") return "cuda-emu";
  if (w == "gpu") {
    if (cuda_device_count() == 0) throw std::runtime_error("HG_TEST_CUDA=gpu but no CUDA GPU is found");
    return "cuda";
  }
  return cuda_device_count() > 0 ? "cuda" : "cuda-emu";
}

inline std::unique_ptr<Device> make_cuda_test_device() {
  return cuda_test_device() == "cuda" ? make_cuda_device(0) : make_cuda_emu_device(0);
}

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
