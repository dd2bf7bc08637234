// The Device copy paths the offload policy and a pruning cache use, on the CPU device (always)
// and the CUDA device (skipped without a GPU): copies queued on the copy stream land once their
// fence is waited for, two staging buffers filled alternately keep their own contents, device ->
// device copies move rows within a cache, timing marks give non-negative durations, and an
// eviction's ring gather takes the right rows of every block, across the ring's wrap (on the CUDA
// device in one kernel launch).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>
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

// Rows of `words` 4-byte words: 6 blocks of 5 sink slots + a ring of 11, each word numbered.
void check_ring_gather(Device& d, int words) {
  const int blocks = 6, ring_base = 5, ring_slots = 11, slots = ring_base + ring_slots;
  const size_t row_bytes = 4 * static_cast<size_t>(words), block_bytes = slots * row_bytes;
  std::vector<uint32_t> k(static_cast<size_t>(blocks) * slots * words), v(k.size());
  std::iota(k.begin(), k.end(), 0u);
  std::iota(v.begin(), v.end(), 1000000u);
  auto k_dev = to_device(d, k), v_dev = to_device(d, v);
  for (const auto& [head, n] : {std::pair{0, 4}, {9, 5}, {3, 11}, {10, 1}}) {  // {9, 5} and {3, 11} wrap
    SCOPED_TRACE("head " + std::to_string(head) + " n " + std::to_string(n) + " row words " + std::to_string(words));
    RingRows r;
    r.src[0] = k_dev->get();
    r.src[1] = v_dev->get();
    r.blocks = blocks;
    r.block_bytes = block_bytes;
    r.row_bytes = row_bytes;
    r.ring_base = ring_base;
    r.ring_slots = ring_slots;
    r.ring_head = head;
    r.n = n;
    const size_t out_words = 2 * static_cast<size_t>(blocks) * n * words;
    DeviceBuffer out(d, 4 * out_words);
    const auto before = d.counters();
    d.gather_ring_rows(r, out.get());
    if (before) {
      EXPECT_EQ(d.counters()->launches, before->launches + 1) << "one kernel for the whole eviction";
    }
    const auto got = to_host<uint32_t>(d, out, out_words);
    size_t at = 0;
    for (const auto* src : {&k, &v})
      for (int b = 0; b < blocks; ++b)
        for (int j = 0; j < n; ++j) {
          const int slot = ring_base + (head + j) % ring_slots;
          for (int w = 0; w < words; ++w, ++at)
            ASSERT_EQ(got[at], (*src)[(static_cast<size_t>(b) * slots + slot) * words + w]) << "block " << b << " row " << j;
        }
  }
}

TEST(DeviceCopies, CpuDevice) {
  auto d = make_cpu_device(2);
  check_copies(*d);
  check_ring_gather(*d, 32);
  check_ring_gather(*d, 3);
}

TEST(DeviceCopies, CudaDevice) {
  auto d = make_cuda_test_device();
  check_copies(*d);
  check_ring_gather(*d, 32);
  check_ring_gather(*d, 3);
}

}  // namespace
}  // namespace hg::test
