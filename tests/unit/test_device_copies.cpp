// The Device copy paths the offload policy and a pruning cache use, on the CPU device (always)
// and the CUDA device (skipped without a GPU): copies queued on the copy stream land once their
// fence is waited for, two staging buffers filled alternately keep their own contents, device ->
// device copies move rows within a cache, and timing marks give non-negative durations.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "device/device.h"
#include "test_cuda_common.h"

namespace hg::test {
namespace {

void check_copies(Device& d) {
  std::mt19937 rng(3);
  const size_t n = 100003;  // odd: chunks of unequal sizes
  const auto a = uniform_floats(n, rng), b = uniform_floats(n, rng);
  DeviceBuffer buf0(d, sizeof(float) * n), buf1(d, sizeof(float) * n);
  // buffer 0 in many small chunks, as a layer's KV arrives run by run
  for (size_t at = 0; at < n;) {
    const size_t len = std::min(n - at, 1 + at % 997);
    d.copy_to_device_async(buf0.f32() + at, a.data() + at, sizeof(float) * len);
    at += len;
  }
  const int64_t f0 = d.copy_fence();
  d.copies_after_compute();
  d.copy_to_device_async(buf1.f32(), b.data(), sizeof(float) * n);
  const int64_t f1 = d.copy_fence();
  d.wait_copy_fence(f1);
  EXPECT_EQ(to_host<float>(d, buf1, n), b);
  d.wait_copy_fence(f0);
  EXPECT_EQ(to_host<float>(d, buf0, n), a);

  // the same chunks as one batch, into buffer 1 in reverse order of the chunks (each lands where
  // its region says, whatever the order they are queued in)
  std::vector<Device::CopyRegion> regions;
  for (size_t at = 0; at < n;) {
    const size_t len = std::min(n - at, 1 + at % 997);
    regions.push_back({buf1.f32() + at, a.data() + at, sizeof(float) * len});
    at += len;
  }
  std::reverse(regions.begin(), regions.end());
  d.copies_after_compute();
  d.copy_to_device_async_batch(regions.data(), regions.size());
  d.wait_copy_fence(d.copy_fence());
  EXPECT_EQ(to_host<float>(d, buf1, n), a);
  d.copy_to_device_async_batch(regions.data(), 0);  // an empty batch is nothing
  d.wait_copy_fence(d.copy_fence());

  // buffer 1 holds a again; b back in it for the device -> device check below
  d.copy_to_device_async(buf1.f32(), b.data(), sizeof(float) * n);
  d.wait_copy_fence(d.copy_fence());

  // device -> device: row 5 of buffer 0 to row 2 of buffer 1 (rows of 64 floats)
  const int t0 = d.timing_mark(false);
  d.copy_on_device(buf1.f32() + 2 * 64, buf0.f32() + 5 * 64, sizeof(float) * 64);
  const int t1 = d.timing_mark(false);
  const auto got = to_host<float>(d, buf1, 4 * 64);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(2 * 64 + i)], a[static_cast<size_t>(5 * 64 + i)]);
    EXPECT_EQ(got[static_cast<size_t>(64 + i)], b[static_cast<size_t>(64 + i)]);  // its neighbours stay
  }
  ASSERT_GE(t0, 0);
  EXPECT_GE(d.timing_elapsed_ms(t0, t1), 0.0);
}

TEST(DeviceCopies, CpuDevice) {
  auto d = make_cpu_device(2);
  check_copies(*d);
}

TEST(DeviceCopies, CudaDevice) {
  auto d = make_cuda_test_device();
  check_copies(*d);
}

}  // namespace
}  // namespace hg::test
