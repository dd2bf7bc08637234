// CUDA hybrid attention (window + host part) against cpu::hybrid_attention_items: cache dtypes
// f32/bf16 (f16 once), head_dim 16..256, GQA groups 1/3/4 and a 12-wide group (two blocks per kv
// head), window spans with and without a ring wrap, sinks the row cannot all see yet, an empty
// ring and an empty window, host K 0/1/37/300, every host kind, decode rows (n = 1) and prefill
// rows (n = 33, each seeing a longer ring prefix). Window slots the last row cannot see hold NaN,
// so any read of them shows up; some host log-sum-exps are -inf (an empty host side).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "device/device.h"
#include "hybridgen/error.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/hybrid_attention.h"
#include "test_cuda_common.h"

namespace hg::test {
namespace {

struct Shape {
  int n_heads, n_kv_heads, head_dim;
};

struct Case {
  DType dtype;
  Shape shape;
  WindowSpan span;
  int pos0, n;
  HostPart::Kind kind;
  int K;  // host tokens (Logits only)
};

const char* kind_name(HostPart::Kind k) {
  switch (k) {
    case HostPart::Kind::None:
      return "none";
    case HostPart::Kind::Logits:
      return "logits";
    case HostPart::Kind::Partial:
      return "partial";
  }
  return "?";
}

std::string case_name(const Case& c) {
  const WindowSpan& s = c.span;
  return std::string(dtype_name(c.dtype)) + " heads " + std::to_string(c.shape.n_heads) + "/" +
         std::to_string(c.shape.n_kv_heads) + " d " + std::to_string(c.shape.head_dim) + " sinks " +
         std::to_string(s.n_sinks) + "/" + std::to_string(s.sink_slots) + " ring " + std::to_string(s.ring_count) +
         "/" + std::to_string(s.ring_slots) + " head " + std::to_string(s.ring_head) + " pos0 " +
         std::to_string(s.ring_pos0) + " | rows " + std::to_string(c.pos0) + "+" + std::to_string(c.n) + " " +
         kind_name(c.kind) + " K " + std::to_string(c.K);
}

void store(DType t, std::vector<uint8_t>& bytes, size_t index, float x) {
  switch (t) {
    case DType::F32:
      std::memcpy(bytes.data() + 4 * index, &x, 4);
      return;
    case DType::F16: {
      const uint16_t h = cpu::fp32_to_f16(x);
      std::memcpy(bytes.data() + 2 * index, &h, 2);
      return;
    }
    case DType::BF16: {
      const uint16_t h = cpu::fp32_to_bf16(x);
      std::memcpy(bytes.data() + 2 * index, &h, 2);
      return;
    }
    default:
      FAIL() << "unexpected dtype";
  }
}

// Whether window slot `slot` holds a token the row at `pos` sees.
bool visible(const WindowSpan& s, int64_t slot, int64_t pos) {
  if (slot < s.sink_slots) return slot < s.n_sinks && slot <= pos;
  if (slot >= s.sink_slots + s.ring_slots) return false;
  const int64_t j = (slot - s.sink_slots - s.ring_head + s.ring_slots) % s.ring_slots;
  return j < s.ring_count && s.ring_pos0 + j <= pos;
}

void run_case(Device& d, const Case& c, uint32_t seed) {
  SCOPED_TRACE(case_name(c));
  std::mt19937 rng(seed);
  const int H = c.shape.n_heads, G = c.shape.n_kv_heads, D = c.shape.head_dim;
  const WindowSpan& s = c.span;
  const int64_t capacity = s.sink_slots + s.ring_slots + 3;
  const size_t elem = dtype_block_bytes(c.dtype);
  const size_t cache_elems = static_cast<size_t>(G) * capacity * D;

  // The window: tokens the last row sees are random, every other slot NaN.
  std::vector<uint8_t> k_host(cache_elems * elem), v_host(cache_elems * elem);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t last_pos = c.pos0 + c.n - 1;
  for (int g = 0; g < G; ++g)
    for (int64_t slot = 0; slot < capacity; ++slot) {
      const bool live = visible(s, slot, last_pos);
      for (int e = 0; e < D; ++e) {
        const size_t idx = (static_cast<size_t>(g) * capacity + slot) * D + e;
        store(c.dtype, k_host, idx, live ? 2.0f * u(rng) : nan);
        store(c.dtype, v_host, idx, live ? u(rng) : nan);
      }
    }
  auto k_dev = to_device(d, k_host), v_dev = to_device(d, v_host);
  const KvView window{c.dtype, k_dev->get(), v_dev->get(), capacity, G, D};

  const size_t q_count = static_cast<size_t>(c.n) * H * D;
  const auto q = uniform_floats(q_count, rng, -2.0f, 2.0f);
  auto q_dev = to_device(d, q);

  // The host part, on both sides.
  HostPart host_cpu, host_gpu;
  host_cpu.kind = host_gpu.kind = c.kind;
  std::vector<float> logits, hv, hout, hlse;
  std::unique_ptr<DeviceBuffer> logits_dev, hv_dev, hout_dev, hlse_dev;
  if (c.kind == HostPart::Kind::Logits) {
    logits = uniform_floats(static_cast<size_t>(H) * std::max(c.K, 1), rng, -3.0f, 3.0f);
    hv = uniform_floats(static_cast<size_t>(G) * std::max(c.K, 1) * D, rng);
    logits_dev = to_device(d, logits);
    hv_dev = to_device(d, hv);
    host_cpu.K = host_gpu.K = c.K;
    host_cpu.logits = logits.data();
    host_cpu.v = hv.data();
    host_gpu.logits = logits_dev->f32();
    host_gpu.v = hv_dev->f32();
  } else if (c.kind == HostPart::Kind::Partial) {
    hout = uniform_floats(q_count, rng);
    hlse = uniform_floats(static_cast<size_t>(c.n) * H, rng, -4.0f, 6.0f);
    for (size_t item = 0; item < hlse.size(); item += 5) hlse[item] = -INFINITY;  // host saw nothing
    hout_dev = to_device(d, hout);
    hlse_dev = to_device(d, hlse);
    host_cpu.out = hout.data();
    host_cpu.lse = hlse.data();
    host_gpu.out = hout_dev->f32();
    host_gpu.lse = hlse_dev->f32();
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  DeviceBuffer out(d, sizeof(float) * q_count);
  d.hybrid_attention(q_dev->f32(), c.n, H, window, s, c.pos0, host_gpu, scale, out.f32());
  const auto got = to_host<float>(d, out, q_count);

  std::vector<float> want(q_count), scores(static_cast<size_t>(s.sink_slots + s.ring_slots + c.K));
  cpu::hybrid_attention_items(q.data(), H, G, D, c.dtype, k_host.data(), v_host.data(), capacity, s, c.pos0, host_cpu,
                              scale, want.data(), scores.data(), 0, static_cast<int64_t>(c.n) * H);
  EXPECT_LE(max_abs_diff(got, want), 5e-5);
}

WindowSpan span(int n_sinks, int sink_slots, int ring_slots, int ring_head, int ring_count, int ring_pos0) {
  WindowSpan s;
  s.n_sinks = n_sinks;
  s.sink_slots = sink_slots;
  s.ring_slots = ring_slots;
  s.ring_head = ring_head;
  s.ring_count = ring_count;
  s.ring_pos0 = ring_pos0;
  return s;
}

// A decode row's window and position: the row is the ring's newest token when the ring has any.
struct DecodeSpan {
  WindowSpan span;
  int pos;
};

const DecodeSpan kDecodeSpans[] = {
    {span(4, 4, 64, 0, 40, 4), 43},              // ring not yet full, no wrap
    {span(4, 4, 64, 50, 64, 200), 263},          // full ring, wraps after 14 tokens
    {span(2, 4, 16, 0, 0, 2), 1},                // pos < sink slots: only two sinks exist
    {span(4, 4, 16, 0, 0, 4), 2},                // sink slot 3 is past the row (NaN if read)
    {span(0, 0, 100, 30, 100, 500), 599},        // no sinks, wrapped ring
    {span(3, 3, 32, 0, 0, 1000), 1000},          // empty ring: sinks and host only
    {span(1, 1, 0, 0, 0, 1), 700},               // no ring slots at all
    {span(0, 0, 8, 0, 0, 0), 5},                 // empty window: the host part alone
    {span(4, 4, 3000, 1234, 3000, 5000), 7999},  // long window, several splits
};

const Shape kShapes[] = {{4, 4, 16}, {9, 3, 64}, {16, 4, 128}, {12, 1, 64}, {4, 2, 256}};

TEST(CudaHybridAttention, DecodeOverSpansAndHostParts) {
  HG_REQUIRE_CUDA_GPU();
  auto d = make_cuda_device(0);
  uint32_t seed = 1;
  for (DType t : {DType::F32, DType::BF16})
    for (const Shape& sh : kShapes)
      for (const DecodeSpan& ds : kDecodeSpans) {
        run_case(*d, {t, sh, ds.span, ds.pos, 1, HostPart::Kind::None, 0}, seed++);
        run_case(*d, {t, sh, ds.span, ds.pos, 1, HostPart::Kind::Partial, 0}, seed++);
        for (int K : {0, 1, 37, 300}) run_case(*d, {t, sh, ds.span, ds.pos, 1, HostPart::Kind::Logits, K}, seed++);
      }
}

TEST(CudaHybridAttention, DecodeF16AndLongHostSelection) {
  HG_REQUIRE_CUDA_GPU();
  auto d = make_cuda_device(0);
  run_case(*d, {DType::F16, {32, 8, 128}, span(4, 4, 2048, 700, 2048, 6000), 8047, 1, HostPart::Kind::Logits, 300}, 7);
  run_case(*d, {DType::F16, {32, 8, 128}, span(4, 4, 2048, 700, 2048, 6000), 8047, 1, HostPart::Kind::Partial, 0}, 8);
  run_case(*d, {DType::BF16, {8, 2, 64}, span(4, 4, 64, 3, 64, 5000), 5063, 1, HostPart::Kind::Logits, 3000}, 9);
}

// Prefill: 33 rows, row i at pos0 + i sees the ring prefix up to its position (and sinks <= it).
TEST(CudaHybridAttention, PrefillRowsPartial) {
  HG_REQUIRE_CUDA_GPU();
  auto d = make_cuda_device(0);
  const DecodeSpan spans[] = {
      {span(4, 4, 64, 0, 60, 4), 31},             // rows see 28..60 ring tokens
      {span(4, 4, 0, 0, 0, 4), 0},                // rows 0..3 see 1..4 sinks, then only the host
      {span(4, 4, 64, 0, 29, 4), 0},              // from position 0: sinks then ring grow together
      {span(2, 2, 40, 25, 40, 100), 107},         // wrapped ring, rows see 8..40 of it
      {span(0, 0, 8, 0, 0, 0), 3},                // empty window
      {span(4, 4, 2000, 999, 2000, 3000), 4967},  // long window: several splits
  };
  uint32_t seed = 5000;
  for (DType t : {DType::F32, DType::BF16})
    for (const Shape& sh : kShapes)
      for (const DecodeSpan& ds : spans) {
        run_case(*d, {t, sh, ds.span, ds.pos, 33, HostPart::Kind::Partial, 0}, seed++);
        run_case(*d, {t, sh, ds.span, ds.pos, 33, HostPart::Kind::None, 0}, seed++);
      }
}

TEST(CudaHybridAttention, RejectsSpansOutsideTheWindow) {
  HG_REQUIRE_CUDA_GPU();
  auto d = make_cuda_device(0);
  DeviceBuffer k(*d, 4 * 2 * 8 * 16), v(*d, 4 * 2 * 8 * 16), q(*d, 4 * 4 * 16), out(*d, 4 * 4 * 16);
  const KvView window{DType::F32, k.get(), v.get(), 8, 2, 16};
  const HostPart none;
  EXPECT_THROW(d->hybrid_attention(q.f32(), 1, 4, window, span(2, 2, 7, 0, 7, 2), 8, none, 1.0f, out.f32()), Error);
  EXPECT_THROW(d->hybrid_attention(q.f32(), 1, 4, window, span(2, 2, 6, 6, 3, 2), 8, none, 1.0f, out.f32()), Error);
  HostPart logits;
  logits.kind = HostPart::Kind::Logits;
  logits.K = 3;
  EXPECT_THROW(d->hybrid_attention(q.f32(), 1, 4, window, span(2, 2, 6, 0, 3, 2), 8, logits, 1.0f, out.f32()), Error);
}

}  // namespace
}  // namespace hg::test
