// CUDA hybrid attention (device tokens + host part) against cpu::hybrid_attention_items: cache
// dtypes f32/bf16 (f16 once), head_dim 16..256, GQA groups 1/3/4 and a 12-wide group (two blocks
// per kv head), slot tables of rings with and without a wrap, sinks the row cannot all see yet,
// an empty ring and an empty window, per-kv-head tables of scattered slots (kept heavy hitters),
// host K 0/1/37/300 (and parts that hold fewer than their layout: a count on the device), every
// host kind, decode rows (n = 1) and prefill rows (n = 33, each seeing a longer prefix). Cache
// slots the last row cannot see hold NaN, so any read of them shows up; some host log-sum-exps
// are -inf (an empty host side).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
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

// A ring of slots after the sinks, as HybridKv lays out a window (the test's way to write tables).
struct Ring {
  int n_sinks = 0;
  int sink_slots = 0;
  int ring_slots = 0;
  int ring_head = 0;
  int ring_count = 0;
  int ring_pos0 = 0;
};

// A slot table on the host: rows of (slot, position), one per kv-head or one shared (stride 0).
struct Table {
  std::vector<int32_t> slot, pos;
  int count = 0, stride = 0, n_lead = 0;
  int64_t capacity = 0;  // cache slots
  std::string name;
  std::optional<Ring> ring;  // a ring's table: the kernels also get it by its parameters
};

// The ring form of a ring's table (HybridKv::tokens without heavy hitters).
DeviceTokens ring_tokens(const Ring& r) {
  DeviceTokens t;
  t.count = r.n_sinks + r.ring_count;
  t.n_lead = r.n_sinks;
  t.ring = true;
  t.ring_base = r.sink_slots;
  t.ring_slots = r.ring_slots;
  t.ring_head = r.ring_head;
  t.ring_pos0 = r.ring_pos0;
  return t;
}

Table ring_table(const Ring& r) {
  Table t;
  for (int p = 0; p < r.n_sinks; ++p) {
    t.slot.push_back(p);
    t.pos.push_back(p);
  }
  for (int j = 0; j < r.ring_count; ++j) {
    t.slot.push_back(r.sink_slots + (r.ring_head + j) % r.ring_slots);
    t.pos.push_back(r.ring_pos0 + j);
  }
  t.count = static_cast<int>(t.slot.size());
  t.n_lead = r.n_sinks;
  t.capacity = r.sink_slots + r.ring_slots + 3;
  t.name = "sinks " + std::to_string(r.n_sinks) + "/" + std::to_string(r.sink_slots) + " ring " +
           std::to_string(r.ring_count) + "/" + std::to_string(r.ring_slots) + " head " + std::to_string(r.ring_head) +
           " pos0 " + std::to_string(r.ring_pos0);
  if (t.slot.empty()) t.slot = t.pos = {0};  // keep the arrays allocatable
  t.ring = r;
  return t;
}

// Per kv-head, `count` distinct slots of `capacity` in random order holding increasing random
// positions below `last_pos`, the first n_lead at positions 0.. (sinks): what h2o keeps.
Table scattered_table(int n_kv_heads, int count, int n_lead, int64_t capacity, int last_pos, uint32_t seed) {
  std::mt19937 rng(seed);
  Table t;
  t.count = count;
  t.stride = count;
  t.n_lead = n_lead;
  t.capacity = capacity;
  for (int g = 0; g < n_kv_heads; ++g) {
    std::vector<int32_t> slots(static_cast<size_t>(capacity));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    std::vector<int32_t> pos(static_cast<size_t>(last_pos - n_lead));
    std::iota(pos.begin(), pos.end(), n_lead);
    std::shuffle(pos.begin(), pos.end(), rng);
    pos.resize(static_cast<size_t>(count - n_lead));
    std::sort(pos.begin(), pos.end());
    for (int j = 0; j < count; ++j) {
      t.slot.push_back(slots[static_cast<size_t>(j)]);
      t.pos.push_back(j < n_lead ? j : pos[static_cast<size_t>(j - n_lead)]);
    }
  }
  t.name = "scattered " + std::to_string(count) + " per kv-head, lead " + std::to_string(n_lead) + ", capacity " +
           std::to_string(capacity);
  return t;
}

struct Case {
  DType dtype;
  Shape shape;
  Table table;
  int pos0, n;
  HostPart::Kind kind;
  int K;                 // host tokens (Logits and KeyValue only)
  bool compact = false;  // ship as HostShipment does beside a GPU: rows in the cache dtype, f16 logits
  int count = -1;        // >= 0: the part is laid out for K tokens and holds `count` (HostPart::count)
};

const char* kind_name(HostPart::Kind k) {
  switch (k) {
    case HostPart::Kind::None:
      return "none";
    case HostPart::Kind::Logits:
      return "logits";
    case HostPart::Kind::KeyValue:
      return "keyvalue";
    case HostPart::Kind::Partial:
      return "partial";
  }
  return "?";
}

std::string case_name(const Case& c) {
  return std::string(dtype_name(c.dtype)) + " heads " + std::to_string(c.shape.n_heads) + "/" +
         std::to_string(c.shape.n_kv_heads) + " d " + std::to_string(c.shape.head_dim) + " " + c.table.name +
         " | rows " + std::to_string(c.pos0) + "+" + std::to_string(c.n) + " " + kind_name(c.kind) + " K " +
         std::to_string(c.K) + (c.compact ? " compact" : "") +
         (c.count >= 0 ? " count " + std::to_string(c.count) : "");
}

// A part laid out for K tokens per block (kv-head rows, or a head's logits) that holds `count`:
// NaN past them, so that a kernel reading past the count shows it.
void past_count(std::vector<float>& values, int K, int count, int width) {
  if (count < 0) return;
  const size_t block = static_cast<size_t>(K) * width;
  for (size_t at = 0; at < values.size(); ++at)
    if (static_cast<int>(at % block) / width >= count) values[at] = std::numeric_limits<float>::quiet_NaN();
}

// The first `count` of every K-wide block, packed: the part as it would be laid out for `count`.
std::vector<float> packed(const std::vector<float>& values, int K, int count, int width) {
  std::vector<float> out;
  const size_t block = static_cast<size_t>(K) * width;
  for (size_t b = 0; b < values.size(); b += block)
    out.insert(out.end(), values.begin() + static_cast<int64_t>(b),
               values.begin() + static_cast<int64_t>(b) + count * width);
  return out;
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

// Whether cache slot `slot` of kv-head g holds a token the row at `pos` sees.
bool visible(const Table& t, int g, int64_t slot, int64_t pos) {
  const size_t row = static_cast<size_t>(g) * t.stride;
  for (int j = 0; j < t.count; ++j)
    if (t.slot[row + j] == slot && t.pos[row + j] <= pos) return true;
  return false;
}

void run_case(Device& d, const Case& c, uint32_t seed) {
  SCOPED_TRACE(case_name(c));
  std::mt19937 rng(seed);
  const int H = c.shape.n_heads, G = c.shape.n_kv_heads, D = c.shape.head_dim;
  const Table& tab = c.table;
  const int64_t capacity = tab.capacity;
  const size_t elem = dtype_block_bytes(c.dtype);
  const size_t cache_elems = static_cast<size_t>(G) * capacity * D;

  // The window: tokens the last row sees are random, every other slot NaN.
  std::vector<uint8_t> k_host(cache_elems * elem), v_host(cache_elems * elem);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t last_pos = c.pos0 + c.n - 1;
  for (int g = 0; g < G; ++g)
    for (int64_t slot = 0; slot < capacity; ++slot) {
      const bool live = visible(tab, g, slot, last_pos);
      for (int e = 0; e < D; ++e) {
        const size_t idx = (static_cast<size_t>(g) * capacity + slot) * D + e;
        store(c.dtype, k_host, idx, live ? 2.0f * u(rng) : nan);
        store(c.dtype, v_host, idx, live ? u(rng) : nan);
      }
    }
  auto k_dev = to_device(d, k_host), v_dev = to_device(d, v_host);
  auto slot_dev = to_device(d, tab.slot), pos_dev = to_device(d, tab.pos);

  const size_t q_count = static_cast<size_t>(c.n) * H * D;
  const auto q = uniform_floats(q_count, rng, -2.0f, 2.0f);
  auto q_dev = to_device(d, q);

  // The host part, on both sides.
  HostPart host_cpu, host_gpu;
  host_cpu.kind = host_gpu.kind = c.kind;
  std::vector<float> logits, hk, hv, hout, hlse;
  std::unique_ptr<DeviceBuffer> logits_dev, hk_dev, hv_dev, hout_dev, hlse_dev;
  if (c.kind == HostPart::Kind::Logits || c.kind == HostPart::Kind::KeyValue) {
    const size_t rows = static_cast<size_t>(G) * std::max(c.K, 1) * D;
    if (c.kind == HostPart::Kind::Logits) {
      logits = uniform_floats(static_cast<size_t>(H) * std::max(c.K, 1), rng, -3.0f, 3.0f);
      past_count(logits, c.K, c.count, 1);
      logits_dev = to_device(d, logits);
      host_cpu.logits = logits.data();
      host_gpu.logits = logits_dev->f32();
    } else {  // fetched K rows: both sides score them with the query
      hk = uniform_floats(rows, rng);
      past_count(hk, c.K, c.count, D);
      hk_dev = to_device(d, hk);
      host_cpu.k = hk.data();
      host_gpu.k = hk_dev->f32();
    }
    hv = uniform_floats(rows, rng);
    past_count(hv, c.K, c.count, D);
    hv_dev = to_device(d, hv);
    host_cpu.K = host_gpu.K = c.K;
    host_cpu.v = hv.data();
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

  const int32_t count = c.count;
  std::unique_ptr<DeviceBuffer> count_dev;
  if (c.count >= 0) {
    count_dev = to_device(d, std::vector<int32_t>{count});
    host_gpu.count = static_cast<const int32_t*>(count_dev->get());
    host_cpu.count = &count;
  }

  // A compact shipment: rows in the cache dtype, logits in f16 less their head's max. `exact_host`
  // is the same part in fp32, its values read back from the compact one: the twin gives the same.
  std::vector<uint8_t> hk16, hv16, logits16;
  std::vector<float> maxes, hk_back, hv_back, logits_back;
  std::unique_ptr<DeviceBuffer> hk16_dev, hv16_dev, logits16_dev, maxes_dev;
  HostPart exact_host = host_cpu;
  if (c.compact) {
    const auto pack = [&](DType t, const std::vector<float>& f, std::vector<uint8_t>& out, std::vector<float>& back) {
      out.assign(f.size() * dtype_block_bytes(t), 0);
      back.resize(f.size());
      for (size_t e = 0; e < f.size(); ++e) {
        store(t, out, e, f[e]);
        uint16_t h;
        std::memcpy(&h, out.data() + 2 * e, 2);
        back[e] = t == DType::BF16 ? cpu::bf16_to_fp32(h) : cpu::f16_to_fp32(h);
      }
    };
    pack(c.dtype, hv, hv16, hv_back);
    hv16_dev = to_device(d, hv16);
    host_cpu.v = hv16.data();
    host_gpu.v = hv16_dev->get();
    exact_host.v = hv_back.data();
    if (c.kind == HostPart::Kind::KeyValue) {
      pack(c.dtype, hk, hk16, hk_back);
      hk16_dev = to_device(d, hk16);
      host_cpu.k = hk16.data();
      host_gpu.k = hk16_dev->get();
      exact_host.k = hk_back.data();
    } else {
      const size_t K = static_cast<size_t>(std::max(c.K, 1));
      std::vector<float> shifted(logits.size());
      maxes.resize(static_cast<size_t>(H));
      for (size_t h = 0; h < maxes.size(); ++h) {
        maxes[h] = *std::max_element(logits.begin() + h * K, logits.begin() + (h + 1) * K);
        for (size_t j = 0; j < K; ++j) shifted[h * K + j] = logits[h * K + j] - maxes[h];
      }
      pack(DType::F16, shifted, logits16, logits_back);
      for (size_t e = 0; e < logits_back.size(); ++e) logits_back[e] += maxes[e / K];
      logits16_dev = to_device(d, logits16);
      maxes_dev = to_device(d, maxes);
      host_cpu.logits = logits16.data();
      host_gpu.logits = logits16_dev->get();
      host_cpu.logit_max = maxes.data();
      host_gpu.logit_max = maxes_dev->f32();
      host_cpu.logits_dtype = host_gpu.logits_dtype = DType::F16;
      exact_host.logits = logits_back.data();
    }
    host_cpu.rows_dtype = host_gpu.rows_dtype = c.dtype;
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  DeviceBuffer out(d, sizeof(float) * q_count);
  HybridAttentionArgs a;
  a.kv_dtype = c.dtype;
  a.capacity = capacity;
  a.n = c.n;
  a.n_heads = H;
  a.n_kv_heads = G;
  a.head_dim = D;
  a.pos0 = c.pos0;
  a.tokens = {static_cast<const int32_t*>(slot_dev->get()), static_cast<const int32_t*>(pos_dev->get()), tab.count,
              tab.stride, tab.n_lead};
  a.scale = scale;
  HybridAttentionArgs gpu = a, cpu = a;
  gpu.q = q_dev->f32();
  gpu.out = out.f32();
  gpu.k_cache = k_dev->get();
  gpu.v_cache = v_dev->get();
  gpu.host = host_gpu;
  d.hybrid_attention(gpu);
  const auto got = to_host<float>(d, out, q_count);

  std::vector<float> want(q_count), scores(static_cast<size_t>(tab.count + c.K));
  cpu.q = q.data();
  cpu.out = want.data();
  cpu.k_cache = k_host.data();
  cpu.v_cache = v_host.data();
  cpu.tokens.slot = tab.slot.data();
  cpu.tokens.pos = tab.pos.data();
  cpu.host = host_cpu;
  cpu::hybrid_attention_items(cpu, 1, scores.data(), 0, static_cast<int64_t>(c.n) * H);
  EXPECT_LE(max_abs_diff(got, want), 5e-5);
  if (tab.ring) {  // the same tokens by the ring's parameters: the same launch, the same bits
    gpu.tokens = cpu.tokens = ring_tokens(*tab.ring);
    // On the device: every decode row; prefill rows (each its own visible count) without a host
    // part, which does not meet the ring's arithmetic (the emulated device is slow).
    if (c.n == 1 || c.kind == HostPart::Kind::None) {
      d.hybrid_attention(gpu);
      EXPECT_EQ(to_host<float>(d, out, q_count), got) << "ring form on the device";
    }
    std::vector<float> want_ring(q_count);
    cpu.out = want_ring.data();
    cpu::hybrid_attention_items(cpu, 1, scores.data(), 0, static_cast<int64_t>(c.n) * H);
    EXPECT_EQ(want_ring, want) << "ring form in the twin";
    cpu.out = want.data();
    cpu.tokens = a.tokens;
    cpu.tokens.slot = tab.slot.data();
    cpu.tokens.pos = tab.pos.data();
  }
  if (c.count >= 0 && !c.compact) {        // the twin over the count's part packed: the same bits
    const int n = std::min(c.count, c.K);  // a count past the layout is clamped
    const std::vector<float> k_packed = packed(hk, c.K, n, D), v_packed = packed(hv, c.K, n, D),
                             l_packed = packed(logits, c.K, n, 1);
    HostPart p = host_cpu;
    p.count = nullptr;
    p.K = n;
    p.k = c.kind == HostPart::Kind::KeyValue ? k_packed.data() : nullptr;
    p.logits = c.kind == HostPart::Kind::Logits ? l_packed.data() : nullptr;
    p.v = v_packed.data();
    std::vector<float> want_packed(q_count);
    cpu.out = want_packed.data();
    cpu.host = p;
    cpu::hybrid_attention_items(cpu, 1, scores.data(), 0, static_cast<int64_t>(c.n) * H);
    EXPECT_EQ(want_packed, want) << "the twin with a count, against the part packed to it";
    cpu.out = want.data();
    cpu.host = host_cpu;
  }
  if (c.compact) {
    std::vector<float> want_exact(q_count);
    cpu.out = want_exact.data();
    cpu.host = exact_host;
    cpu::hybrid_attention_items(cpu, 1, scores.data(), 0, static_cast<int64_t>(c.n) * H);
    EXPECT_LE(max_abs_diff(want, want_exact), 1e-6) << "the twin reads the compact part as its values";
  }
}

Table span(int n_sinks, int sink_slots, int ring_slots, int ring_head, int ring_count, int ring_pos0) {
  Ring s;
  s.n_sinks = n_sinks;
  s.sink_slots = sink_slots;
  s.ring_slots = ring_slots;
  s.ring_head = ring_head;
  s.ring_count = ring_count;
  s.ring_pos0 = ring_pos0;
  return ring_table(s);
}

// A decode row's window and position: the row is the ring's newest token when the ring has any.
struct DecodeSpan {
  Table span;
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

// HostShipment's compact parts beside a GPU (bf16 and f16 caches): V and fetched K rows in the
// cache's dtype, logits in f16 less their head's max; the kernel against the twin, and the twin
// against the same part spelled in fp32.
TEST(CudaHybridAttention, CompactHostParts) {
  auto d = make_cuda_test_device();
  uint32_t seed = 700;
  for (DType t : {DType::BF16, DType::F16})
    for (const Shape& sh : {Shape{9, 3, 64}, Shape{16, 4, 128}})
      for (HostPart::Kind kind : {HostPart::Kind::Logits, HostPart::Kind::KeyValue})
        for (int K : {1, 37, 300}) {
          run_case(*d, {t, sh, kDecodeSpans[1].span, kDecodeSpans[1].pos, 1, kind, K, true}, seed++);
          run_case(*d, {t, sh, kDecodeSpans[8].span, kDecodeSpans[8].pos, 1, kind, K, true}, seed++);
        }
}

TEST(CudaHybridAttention, DecodeOverSpansAndHostParts) {
  auto d = make_cuda_test_device();
  uint32_t seed = 1;
  for (DType t : {DType::F32, DType::BF16})
    for (const Shape& sh : kShapes)
      for (const DecodeSpan& ds : kDecodeSpans) {
        run_case(*d, {t, sh, ds.span, ds.pos, 1, HostPart::Kind::None, 0}, seed++);
        run_case(*d, {t, sh, ds.span, ds.pos, 1, HostPart::Kind::Partial, 0}, seed++);
        for (int K : {0, 1, 37, 300})
          for (HostPart::Kind kind : {HostPart::Kind::Logits, HostPart::Kind::KeyValue})
            run_case(*d, {t, sh, ds.span, ds.pos, 1, kind, K}, seed++);
      }
}

// A part laid out before the host chose its K (InfiniGen's fetch beside a GPU: rows for --max-kv,
// the chosen count in device memory): the kernel and the twin attend over the count's rows alone
// (the rest are NaN), as the twin does over the same rows packed; a count of 0, of all K, and one
// past K (clamped); compact and fp32 parts; one split and several.
TEST(CudaHybridAttention, HostPartsWithADeviceCount) {
  auto d = make_cuda_test_device();
  uint32_t seed = 900;
  for (const DecodeSpan& ds : {kDecodeSpans[0], kDecodeSpans[8]})
    for (const Shape& sh : {Shape{9, 3, 64}, Shape{16, 4, 128}})
      for (HostPart::Kind kind : {HostPart::Kind::Logits, HostPart::Kind::KeyValue})
        for (int count : {0, 1, 150, 400, 401}) {
          run_case(*d, {DType::BF16, sh, ds.span, ds.pos, 1, kind, 400, false, count}, seed++);
          if (kind == HostPart::Kind::KeyValue)
            run_case(*d, {DType::BF16, sh, ds.span, ds.pos, 1, kind, 400, true, count}, seed++);
        }
}

TEST(CudaHybridAttention, DecodeF16AndLongHostSelection) {
  auto d = make_cuda_test_device();
  run_case(*d, {DType::F16, {32, 8, 128}, span(4, 4, 2048, 700, 2048, 6000), 8047, 1, HostPart::Kind::Logits, 300}, 7);
  run_case(*d, {DType::F16, {32, 8, 128}, span(4, 4, 2048, 700, 2048, 6000), 8047, 1, HostPart::Kind::Partial, 0}, 8);
  run_case(*d, {DType::BF16, {8, 2, 64}, span(4, 4, 64, 3, 64, 5000), 5063, 1, HostPart::Kind::Logits, 3000}, 9);
  run_case(*d, {DType::F16, {32, 8, 128}, span(4, 4, 2048, 700, 2048, 6000), 8047, 1, HostPart::Kind::KeyValue, 400},
           10);
}

// Prefill: 33 rows, row i at pos0 + i sees the ring prefix up to its position (and sinks <= it).
TEST(CudaHybridAttention, PrefillRowsPartial) {
  auto d = make_cuda_test_device();
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

// Per-kv-head tables of scattered slots (what a pruning policy keeps), decode and prefill rows.
TEST(CudaHybridAttention, ScatteredPerKvHeadTables) {
  auto d = make_cuda_test_device();
  uint32_t seed = 9000;
  for (DType t : {DType::F32, DType::BF16})
    for (const Shape& sh : kShapes) {
      const Table small = scattered_table(sh.n_kv_heads, 40, 4, 64, 300, seed);
      const Table big = scattered_table(sh.n_kv_heads, 1500, 0, 2000, 9000, seed + 1);
      for (const Table* tab : {&small, &big}) {
        run_case(*d, {t, sh, *tab, 9000, 1, HostPart::Kind::None, 0}, seed++);
        run_case(*d, {t, sh, *tab, 9000, 1, HostPart::Kind::Logits, 37}, seed++);
        run_case(*d, {t, sh, *tab, 9000, 1, HostPart::Kind::Partial, 0}, seed++);
        run_case(*d, {t, sh, *tab, 150, 33, HostPart::Kind::Partial, 0}, seed++);  // rows see part of the table
      }
    }
}

TEST(CudaHybridAttention, RejectsTablesOutsideTheCache) {
  auto d = make_cuda_test_device();
  DeviceBuffer k(*d, 4 * 2 * 8 * 16), v(*d, 4 * 2 * 8 * 16), q(*d, 4 * 4 * 16), out(*d, 4 * 4 * 16);
  DeviceBuffer slots(*d, 4 * 16), pos(*d, 4 * 16);
  HybridAttentionArgs a;
  a.q = q.f32();
  a.out = out.f32();
  a.k_cache = k.get();
  a.v_cache = v.get();
  a.capacity = 8;
  a.n = 1;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.head_dim = 16;
  a.pos0 = 8;
  a.tokens = {static_cast<const int32_t*>(slots.get()), static_cast<const int32_t*>(pos.get()), 9, 0, 2};
  EXPECT_THROW(d->hybrid_attention(a), Error);  // more tokens than slots
  a.tokens = {static_cast<const int32_t*>(slots.get()), static_cast<const int32_t*>(pos.get()), 6, 3, 2};
  EXPECT_THROW(d->hybrid_attention(a), Error);  // rows shorter than the count
  a.tokens = {static_cast<const int32_t*>(slots.get()), static_cast<const int32_t*>(pos.get()), 3, 0, 4};
  EXPECT_THROW(d->hybrid_attention(a), Error);  // more lead tokens than tokens
  a.tokens = {static_cast<const int32_t*>(slots.get()), static_cast<const int32_t*>(pos.get()), 3, 0, 2};
  a.host.kind = HostPart::Kind::Logits;
  a.host.K = 3;
  EXPECT_THROW(d->hybrid_attention(a), Error);  // host logits without arrays
  a.host.kind = HostPart::Kind::KeyValue;
  EXPECT_THROW(d->hybrid_attention(a), Error);  // fetched rows without arrays
}

}  // namespace
}  // namespace hg::test
