// Device attention against cpu::attention_items (one query row and head at a time) over one KV
// cache per case: the CUDA device (split-K decode kernel for few rows, tiled prefill kernel for
// many) and the CPU device (split decode for up to 4 rows, the tiled prefill kernel for more,
// its items handed out cheapest tile with dearest), and the cache write. Every cache dtype, MHA
// and GQA groups (including a group wider than one decode block handles), head_dim 16..256,
// contexts 1..4100 (one split, several splits, chunks that end mid-warp), and rows that start
// past 0. Cache slots past the attended context hold NaN, so any read beyond it shows up.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "device/device.h"
#include "kernels/cpu/attention.h"
#include "test_cuda_common.h"

namespace hg::test {
namespace {

struct Case {
  DType dtype;
  int n_heads, n_kv_heads, head_dim;
  int past, n;
};

std::string case_name(const Case& c) {
  return std::string(dtype_name(c.dtype)) + " heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) +
         " d " + std::to_string(c.head_dim) + " past " + std::to_string(c.past) + " n " + std::to_string(c.n);
}

void run_case(Device& d, const Case& c, uint32_t seed) {
  SCOPED_TRACE(case_name(c));
  std::mt19937 rng(seed);
  const int64_t capacity = c.past + c.n + 5;
  const int kv_dim = c.n_kv_heads * c.head_dim;
  const size_t elem = dtype_block_bytes(c.dtype);
  const size_t cache_bytes = static_cast<size_t>(c.n_kv_heads) * capacity * c.head_dim * elem;

  // Both caches start as NaN (in every dtype, all-ones bits are a NaN).
  std::vector<uint8_t> k_host(cache_bytes, 0xff), v_host(cache_bytes, 0xff);
  DeviceBuffer k_cache(d, cache_bytes), v_cache(d, cache_bytes);
  d.copy_to_device(k_cache.get(), k_host.data(), cache_bytes);
  d.copy_to_device(v_cache.get(), v_host.data(), cache_bytes);
  const KvView kv{c.dtype, k_cache.get(), v_cache.get(), capacity, c.n_kv_heads, c.head_dim};

  // Keys and values of all past + n positions, written as the engine does (past, then the rows).
  const int total = c.past + c.n;
  const auto k = uniform_floats(static_cast<size_t>(total) * kv_dim, rng, -2.0f, 2.0f);
  const auto v = uniform_floats(static_cast<size_t>(total) * kv_dim, rng);
  auto dk = to_device(d, k), dv = to_device(d, v);
  if (c.past > 0) d.kv_store(kv, dk->f32(), dv->f32(), c.past, 0);
  d.kv_store(kv, dk->f32() + static_cast<int64_t>(c.past) * kv_dim, dv->f32() + static_cast<int64_t>(c.past) * kv_dim,
             c.n, c.past);
  cpu::kv_store_rows(c.dtype, k_host.data(), v_host.data(), capacity, c.n_kv_heads, c.head_dim, k.data(), v.data(),
                     total, 0);

  const auto q = uniform_floats(static_cast<size_t>(c.n) * c.n_heads * c.head_dim, rng, -2.0f, 2.0f);
  auto dq = to_device(d, q);
  DeviceBuffer out(d, sizeof(float) * q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  d.attention(dq->f32(), c.n, c.n_heads, kv, c.past, scale, out.f32());
  const auto got = to_host<float>(d, out, q.size());

  std::vector<float> want(q.size()), scores(static_cast<size_t>(total) * (c.n_heads / c.n_kv_heads));
  cpu::attention_items(q.data(), c.n_heads, c.n_kv_heads, c.head_dim, c.dtype, k_host.data(), v_host.data(), capacity,
                       c.past, scale, want.data(), scores.data(), 0, static_cast<int64_t>(c.n) * c.n_heads);
  EXPECT_LE(max_abs_diff(got, want), 5e-5);
}

TEST(CudaAttention, DecodeRowsOverContexts) {
  auto d = make_cuda_test_device();
  uint32_t seed = 1;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int past : {0, 1, 6, 31, 32, 100, 511, 512, 1000, 1500, 4099})
      for (int n : {1, 3, 8}) run_case(*d, {t, 8, 2, 64, past, n}, seed++);
}

TEST(CudaAttention, DecodeHeadShapes) {
  auto d = make_cuda_test_device();
  // (n_heads, n_kv_heads, head_dim): MHA, GQA 3/4/7, a 12-wide group (two decode subgroups),
  // MQA, head_dim 16 (tiny models), 96 (not a power of two) and 256.
  const int shapes[][3] = {{4, 4, 16}, {9, 3, 64}, {32, 8, 128}, {28, 4, 128}, {12, 1, 64},
                           {6, 2, 96}, {4, 2, 256}, {1, 1, 2}};
  uint32_t seed = 100;
  for (DType t : {DType::F32, DType::BF16})
    for (const auto& s : shapes)
      for (int past : {0, 33, 700, 2100}) run_case(*d, {t, s[0], s[1], s[2], past, 1}, seed++);
}

TEST(CudaAttention, PrefillTilesCausally) {
  auto d = make_cuda_test_device();
  const int shapes[][3] = {{4, 2, 16}, {9, 3, 64}, {8, 8, 128}, {12, 1, 64}, {6, 2, 96}, {4, 2, 256}};
  uint32_t seed = 1000;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (const auto& s : shapes)
      for (int n : {9, 33, 100, 257})
        for (int past : {0, 1, 37, 300}) run_case(*d, {t, s[0], s[1], s[2], past, n}, seed++);
}

TEST(CudaAttention, LongPrefillThenDecode) {
  auto d = make_cuda_test_device();
  run_case(*d, {DType::BF16, 32, 8, 128, 0, 1100}, 7);
  run_case(*d, {DType::BF16, 32, 8, 128, 1100, 1}, 8);
  run_case(*d, {DType::F16, 32, 8, 128, 16000, 1}, 9);
}

// Decode at 32K positions, as a long-context user runs it: Qwen2.5-0.5B's shape (14 heads over
// 2 kv heads, head_dim 64) and a Llama-8B head group (32/8, 128), 64 splits of 512 keys.
TEST(CudaAttention, DecodeAt32kPositions) {
  auto d = make_cuda_test_device();
  run_case(*d, {DType::BF16, 14, 2, 64, 32767, 1}, 11);
  run_case(*d, {DType::BF16, 32, 8, 128, 32768, 2}, 12);
}

// The CPU device on 3 threads: an odd pool, so the item runs are uneven. In fp32 (Device::
// bf16_compute false, an f32 checkpoint's precision), held to the fp32 twin; the bf16 products a
// bf16 or quantized checkpoint takes over a bf16 cache are held to their bf16-rounded twin in
// tests/unit/test_prefill_attention.cpp.
TEST(CpuDeviceAttention, PrefillTilesCausally) {
  auto d = make_cpu_device(3, /*bf16=*/false);
  const int shapes[][3] = {{4, 2, 16}, {9, 3, 64}, {8, 8, 128}, {12, 1, 64}, {6, 2, 96}};
  uint32_t seed = 2000;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (const auto& s : shapes)
      for (int n : {5, 33, 100, 257})
        for (int past : {0, 1, 300}) run_case(*d, {t, s[0], s[1], s[2], past, n}, seed++);
  run_case(*d, {DType::BF16, 9, 3, 64, 0, 1100}, 7);  // many tiles: every pairing of the item order
}

TEST(CpuDeviceAttention, DecodeRowsOverContexts) {
  auto d = make_cpu_device(2);
  uint32_t seed = 3000;
  for (DType t : {DType::F32, DType::BF16})
    for (int past : {0, 1, 255, 256, 1000, 4099})
      for (int n : {1, 4}) run_case(*d, {t, 8, 2, 64, past, n}, seed++);
}

}  // namespace
}  // namespace hg::test
