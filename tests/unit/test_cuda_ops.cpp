// CudaDevice ops against their CPU twins (kernels/cpu/) over awkward shapes: 1, 7, 33, sizes
// that are not multiples of 32 or of the vector widths, large positions, every weight dtype.
// Attention has its own file (test_device_attention.cpp), whole models test_cuda_engine.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "device/device.h"
#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rope.h"
#include "matmul_test_util.h"
#include "mem/arena.h"
#include "mem/topology.h"
#include "test_cuda_common.h"

namespace hg::test {
namespace {

using cpu::fp32_to_bf16;
using cpu::fp32_to_f16;

std::unique_ptr<Device> gpu() { return make_cuda_test_device(); }

// A TensorView over host bytes (what a loader would hand upload_weight).
TensorView view(DType t, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
  TensorView v;
  v.name = "test";
  v.dtype = t;
  v.shape = std::move(shape);
  v.data = bytes.data();
  v.nbytes = bytes.size();
  return v;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& f) {
  std::vector<uint8_t> b(f.size() * sizeof(float));
  std::memcpy(b.data(), f.data(), b.size());
  return b;
}

using cpu::random_weights;  // matmul_test_util.h

// The weights as the GPU multiplies them, in fp32: f16 and the block types it expands are
// bf16-rounded at upload; the block types it holds (`stored` is the type uploaded) are exact in a
// decode GEMV and bf16-rounded in a prefill GEMM's tiles (`rounded`).
std::vector<float> held_weights(DType wt, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                                bool rounded = true) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) cpu::dequantize_row(wt, w.data(), cols, r, out.data() + r * cols);
  if (rounded && wt != DType::F32 && wt != DType::BF16)
    for (auto& v : out) v = cpu::bf16_to_fp32(fp32_to_bf16(v));
  return out;
}

float round_like(DType held, float x) {
  if (held == DType::BF16 || held == DType::F16 || dtype_is_quantized(held)) return cpu::bf16_to_fp32(fp32_to_bf16(x));
  return x;
}

TEST(CudaDevice, ClearErrorsForMissingOrWrongGpu) {
  try {
    make_cuda_emu_device(1);
    FAIL() << "the emulated device accepted GPU 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no such GPU; the emulated device has one: 0"), std::string::npos) << e.what();
  }
  const int count = cuda_device_count();
  if (count == 0) {
    try {
      make_cuda_device(0);
      FAIL() << "make_cuda_device succeeded without a GPU";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.find("no CUDA GPU found") != std::string::npos || msg.find("no CUDA backend") != std::string::npos)
          << msg;
    }
    return;
  }
  try {
    make_cuda_device(count + 3);
    FAIL() << "make_cuda_device accepted a GPU index that does not exist";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no such GPU"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0: "), std::string::npos) << "the message should list the GPUs: " << msg;
  }
  auto d = gpu();
  EXPECT_EQ(d->name().rfind("cuda:0", 0), 0u) << d->name();
}

TEST(CudaDevice, CopiesRoundTripAndTimingMarks) {
  auto d = gpu();
  std::mt19937 rng(1);
  for (size_t n : {size_t{1}, size_t{7}, size_t{33}, size_t{1000003}}) {
    const auto host = uniform_floats(n, rng);
    auto buf = to_device(*d, host);
    EXPECT_EQ(to_host<float>(*d, *buf, n), host) << n;
  }
  const int a = d->timing_mark(false);
  auto big = to_device(*d, std::vector<float>(1 << 20, 1.0f));
  d->add(big->f32(), big->f32(), 1 << 20);
  const int b = d->timing_mark(false);
  ASSERT_GE(a, 0);
  EXPECT_GE(d->timing_elapsed_ms(a, b), 0.0);
  const int c = d->timing_mark(true), e = d->timing_mark(true);
  EXPECT_GE(d->timing_elapsed_ms(c, e), 0.0);
}

uint64_t syncs(const Device& d) { return d.counters()->syncs; }

// Host KV arenas registered through the device's DmaRegistrar: copies from and into them are
// queued without the host waiting (the counters say so), copies into pageable memory still wait,
// and what crossed is right once the device is synchronized. Unregistered with the arena.
TEST(CudaDevice, HostKvArenasRegisteredForDmaCopyWithoutWaiting) {
  auto d = gpu();
  mem::DmaRegistrar* dma = d->dma_registrar();
  ASSERT_NE(dma, nullptr);
  const size_t n = 1 << 16, bytes = sizeof(float) * n;
  std::mt19937 rng(5);
  const auto values = uniform_floats(n, rng);
  auto dev = to_device(*d, values);
  auto back = std::make_unique<DeviceBuffer>(*d, bytes);
  {
    mem::ArenaOptions o;
    o.name = "K";
    o.reserve_bytes = size_t{8} << 20;
    o.dma = dma;
    mem::Arena arena(mem::Topology::discover(), o);
    arena.grow_to(bytes);
    float* host = reinterpret_cast<float*>(arena.data());
    const uint64_t before = syncs(*d);
    d->copy_to_host_async(host, dev->get(), bytes);     // device -> registered host, on compute
    d->copies_after_compute();                          // the copy stream's next copy follows it
    d->copy_to_device_async(back->get(), host, bytes);  // registered host -> device, on the copy stream
    EXPECT_EQ(syncs(*d), before) << "DMA to and from registered memory is queued, not waited for";
    d->synchronize();
    EXPECT_EQ(std::vector<float>(host, host + n), values);
    std::vector<float> pageable(n);
    const uint64_t s0 = syncs(*d);
    d->copy_to_host_async(pageable.data(), dev->get(), bytes);
    EXPECT_EQ(syncs(*d), s0 + 1) << "into pageable memory the copy waits";
    EXPECT_EQ(pageable, values);
  }
  EXPECT_EQ(to_host<float>(*d, *back, n), values);
}

// The hybrid shipment's pinned double buffers: a queued copy from registered memory makes the
// host wait for nothing, a compute fence behind it is waited for at most once (not at all once
// the host has waited for the whole stream since), and what crossed is right. From pageable
// memory a queued copy is copy_to_device: the source is free at once, one wait.
TEST(CudaDevice, QueuedCopiesFromPinnedMemoryWaitOnlyOnTheirFence) {
  auto d = gpu();
  mem::DmaRegistrar* dma = d->dma_registrar();
  ASSERT_NE(dma, nullptr);
  const size_t n = 1 << 14, bytes = sizeof(float) * n;
  std::mt19937 rng(8);
  const auto a = uniform_floats(n, rng), b = uniform_floats(n, rng);
  float* pinned = static_cast<float*>(std::aligned_alloc(4096, bytes));
  ASSERT_NE(pinned, nullptr);
  dma->register_range(pinned, bytes);
  DeviceBuffer dev(*d, bytes);
  std::copy(a.begin(), a.end(), pinned);
  const uint64_t s0 = syncs(*d);
  d->copy_to_device_queued(dev.get(), pinned, bytes);
  const int64_t f = d->compute_fence();
  EXPECT_EQ(syncs(*d), s0) << "queued from registered memory: no wait";
  d->wait_compute_fence(f);
  EXPECT_LE(syncs(*d), s0 + 1) << "the fence: one wait at most";
  std::copy(b.begin(), b.end(), pinned);  // the copy ran: the buffer is free again
  EXPECT_EQ(to_host<float>(*d, dev, n), a);
  d->copy_to_device_queued(dev.get(), pinned, bytes);
  const int64_t g = d->compute_fence();
  EXPECT_EQ(to_host<float>(*d, dev, n), b);  // a wait for the whole stream
  const uint64_t s1 = syncs(*d);
  d->wait_compute_fence(g);
  d->wait_compute_fence(f);
  EXPECT_EQ(syncs(*d), s1) << "fences the host has waited past cost nothing";
  // A fence kept across many later ones (an eviction's, every 16 steps) is not "recycled" once
  // the host has waited for the whole stream since it: it has passed.
  for (int i = 0; i < 200; ++i) d->compute_fence();
  d->wait_compute_fence(g);
  EXPECT_EQ(syncs(*d), s1);
  int64_t fresh = -1;
  for (int i = 0; i < 200; ++i) fresh = d->compute_fence();
  EXPECT_THROW(d->wait_compute_fence(fresh - 100), Error) << "recycled with no wait since: a bug";
  std::vector<float> pageable = a;
  d->copy_to_device_queued(dev.get(), pageable.data(), bytes);
  EXPECT_EQ(syncs(*d), s1 + 1) << "from pageable memory the copy waits";
  pageable.assign(n, 0.0f);
  EXPECT_EQ(to_host<float>(*d, dev, n), a);
  dma->unregister_range(pinned, bytes);
  std::free(pinned);
}

// A decode step's small host arrays: the same positions staged for every layer's RoPE cross once,
// and once the host has waited for the device (the logits' copy) restaging waits for nothing.
TEST(CudaDevice, StagedPositionsCrossOncePerStep) {
  auto d = gpu();
  const int n_heads = 2, head_dim = 8;
  RopeParams p;
  p.head_dim = p.rotary_dim = head_dim;
  std::mt19937 rng(6);
  auto x = to_device(*d, uniform_floats(n_heads * head_dim, rng));
  std::vector<float> out(n_heads * head_dim);
  for (int step = 0; step < 40; ++step) {
    const int32_t pos = 100 + step;
    const DeviceCounters c0 = *d->counters();
    for (int layer = 0; layer < 24; ++layer) d->rope(x->f32(), &pos, 1, n_heads, p);
    const DeviceCounters c1 = *d->counters();
    if (step > 0) {  // the first step also uploads the frequency table once
      EXPECT_EQ(c1.h2d_bytes - c0.h2d_bytes, sizeof(int32_t)) << "step " << step;
      EXPECT_EQ(c1.syncs, c0.syncs) << "step " << step;
    }
    d->copy_to_host(out.data(), x->get(), sizeof(float) * out.size());
    EXPECT_EQ(d->counters()->syncs, c1.syncs + 1);
  }
}

TEST(CudaOps, Elementwise) {
  auto d = gpu();
  std::mt19937 rng(2);
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{33}, int64_t{100003}}) {
    const auto a = uniform_floats(static_cast<size_t>(count), rng, -8.0f, 8.0f);
    const auto b = uniform_floats(static_cast<size_t>(count), rng);
    auto da = to_device(*d, a), db = to_device(*d, b);
    std::vector<float> want = a;
    cpu::silu_mul_range(want.data(), b.data(), 0, count);
    d->silu_mul(da->f32(), db->f32(), count);
    auto got = to_host<float>(*d, *da, static_cast<size_t>(count));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << i;

    da = to_device(*d, a);
    want = a;
    cpu::relu_range(want.data(), 0, count);
    d->relu(da->f32(), count);
    EXPECT_EQ(to_host<float>(*d, *da, static_cast<size_t>(count)), want);

    da = to_device(*d, a);
    want = a;
    cpu::add_range(want.data(), b.data(), 0, count);
    d->add(da->f32(), db->f32(), count);
    EXPECT_EQ(to_host<float>(*d, *da, static_cast<size_t>(count)), want);
  }
  for (int dim : {1, 7, 33, 130}) {
    for (int n : {1, 7, 33}) {
      const auto y = uniform_floats(static_cast<size_t>(n) * dim, rng);
      const auto bias = uniform_floats(static_cast<size_t>(dim), rng);
      const auto bias_bytes = f32_bytes(bias);
      const DeviceTensor b = d->upload_weight(view(DType::F32, {dim}, bias_bytes));
      auto dy = to_device(*d, y);
      std::vector<float> want = y;
      cpu::add_bias_rows(want.data(), bias.data(), dim, 0, n);
      d->add_bias(dy->f32(), b, n, dim);
      EXPECT_EQ(to_host<float>(*d, *dy, want.size()), want) << n << "x" << dim;
    }
  }
}

TEST(CudaOps, RmsNormAndLayerNorm) {
  auto d = gpu();
  std::mt19937 rng(3);
  for (int dim : {1, 7, 33, 64, 576, 4097}) {
    const auto w = uniform_floats(static_cast<size_t>(dim), rng, 0.5f, 1.5f);
    const auto bias = uniform_floats(static_cast<size_t>(dim), rng);
    // Vectors may arrive as bf16 (real checkpoints): upload converts them to fp32.
    std::vector<uint8_t> w_bf16(static_cast<size_t>(dim) * 2);
    std::vector<float> w_held(static_cast<size_t>(dim));
    for (int i = 0; i < dim; ++i) {
      const uint16_t h = fp32_to_bf16(w[static_cast<size_t>(i)]);
      std::memcpy(w_bf16.data() + 2 * i, &h, 2);
      w_held[static_cast<size_t>(i)] = cpu::bf16_to_fp32(h);
    }
    const auto bias_bytes = f32_bytes(bias);
    const DeviceTensor dw = d->upload_weight(view(DType::BF16, {dim}, w_bf16));
    const DeviceTensor db = d->upload_weight(view(DType::F32, {dim}, bias_bytes));
    for (int n : {1, 7, 33}) {
      const auto x = uniform_floats(static_cast<size_t>(n) * dim, rng, -3.0f, 3.0f);
      auto dx = to_device(*d, x);
      DeviceBuffer dy(*d, sizeof(float) * x.size());
      std::vector<float> want(x.size());
      cpu::rmsnorm_rows(x.data(), w_held.data(), 1e-5f, dim, want.data(), 0, n);
      d->rmsnorm(dx->f32(), dw, 1e-5f, n, dim, dy.f32());
      auto got = to_host<float>(*d, dy, x.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << i;

      cpu::layernorm_rows(x.data(), w_held.data(), bias.data(), 1e-5f, dim, want.data(), 0, n);
      d->layernorm(dx->f32(), dw, db, 1e-5f, n, dim, dx->f32());  // in place, as post-LN OPT does
      got = to_host<float>(*d, *dx, x.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 5e-5 * (1 + std::fabs(want[i]))) << "layernorm " << n << "x" << dim << " @" << i;
    }
  }
}

TEST(CudaOps, RopeBothLayoutsLlama3ScalingAndFreqFactors) {
  auto d = gpu();
  std::mt19937 rng(4);
  std::uniform_int_distribution<int32_t> position(0, 131071);
  for (int head_dim : {16, 64, 128}) {
    for (RopeLayout layout : {RopeLayout::RotateHalf, RopeLayout::Interleaved}) {
      // scaling 0: none, 1: llama3 from the config, 2: GGUF rope_freqs factors (one per pair)
      for (int scaling : {0, 1, 2}) {
        const bool llama3 = scaling == 1;
        std::vector<float> factors(static_cast<size_t>(head_dim / 2));
        for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 7.0f * static_cast<float>(i) / factors.size();
        RopeParams p;
        p.head_dim = head_dim;
        p.rotary_dim = head_dim;
        p.theta = llama3 ? 500000.0f : 10000.0f;
        p.layout = layout;
        p.scaling.llama3 = llama3;
        p.scaling.factor = 8.0f;
        p.scaling.original_max_position = 8192;
        if (scaling == 2) p.freq_factors = factors.data();
        std::vector<float> inv(static_cast<size_t>(head_dim / 2));
        cpu::rope_inv_freq(p.rotary_dim, p.theta, llama3, p.scaling.factor, p.scaling.low_freq_factor,
                           p.scaling.high_freq_factor, p.scaling.original_max_position, p.freq_factors, inv.data());
        for (int n_heads : {1, 9}) {
          for (int n : {1, 7, 33}) {
            std::vector<int32_t> pos(static_cast<size_t>(n));
            for (auto& v : pos) v = position(rng);
            pos[0] = 0;
            const auto x = uniform_floats(static_cast<size_t>(n) * n_heads * head_dim, rng);
            auto dx = to_device(*d, x);
            std::vector<float> want = x;
            cpu::rope_rows(want.data(), pos.data(), n_heads, head_dim, head_dim, inv.data(),
                           layout == RopeLayout::Interleaved, 0, n);
            d->rope(dx->f32(), pos.data(), n, n_heads, p);
            pos.assign(pos.size(), -1);  // the op must have taken its own copy of the positions
            const auto got = to_host<float>(*d, *dx, x.size());
            EXPECT_LE(max_abs_diff(got, want), 2e-6) << "head_dim " << head_dim << " n_heads " << n_heads << " n " << n;
          }
        }
      }
    }
  }
}

TEST(CudaOps, EmbedEveryTableDtype) {
  auto d = gpu();
  std::mt19937 rng(5);
  const auto& types = cpu::kAllTypes;
  for (DType t : types) {
    const int64_t rows = 37;
    for (int64_t cols : {int64_t{33}, int64_t{256}, int64_t{576}}) {
      if (dtype_is_quantized(t) && cols % dtype_block_elems(t) != 0) continue;
      const auto w = random_weights(t, rows, cols, rng);
      const DeviceTensor table = d->upload_weight(view(t, {rows, cols}, w));
      const bool in_blocks = dtype_is_quantized(t) && table.dtype == t;
      const auto held = held_weights(t, w, rows, cols, /*rounded=*/!in_blocks);
      for (int n : {1, 7, 33}) {
        std::vector<int32_t> ids(static_cast<size_t>(n));
        std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(rows - 1));
        for (auto& v : ids) v = id(rng);
        ids[0] = static_cast<int32_t>(rows - 1);
        DeviceBuffer out(*d, sizeof(float) * static_cast<size_t>(n * cols));
        d->embed(table, ids.data(), n, out.f32());
        const auto got = to_host<float>(*d, out, static_cast<size_t>(n * cols));
        for (int i = 0; i < n; ++i)
          for (int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(got[static_cast<size_t>(i * cols + c)], held[static_cast<size_t>(ids[static_cast<size_t>(i)] * cols + c)])
                << dtype_name(t) << " row " << i << " col " << c;
      }
      const int32_t bad = static_cast<int32_t>(rows);
      DeviceBuffer out(*d, sizeof(float) * static_cast<size_t>(cols));
      EXPECT_THROW(d->embed(table, &bad, 1, out.f32()), Error);
    }
  }
}

TEST(CudaOps, MatmulEveryWeightDtype) {
  auto d = gpu();
  std::mt19937 rng(6);
  const auto& types = cpu::kAllTypes;
  struct Shape {
    int64_t rows, cols;
    int n;
  };
  const Shape shapes[] = {{1, 32, 1}, {7, 64, 3}, {33, 96, 7}, {129, 256, 33}, {300, 512, 100}, {1000, 768, 1}};
  for (DType t : types) {
    for (const Shape& s : shapes) {
      if (dtype_is_quantized(t) && s.cols % dtype_block_elems(t) != 0) continue;
      const auto w = random_weights(t, s.rows, s.cols, rng);
      const auto bias = uniform_floats(static_cast<size_t>(s.rows), rng);
      const auto bias_bytes = f32_bytes(bias);
      const DeviceTensor dw = d->upload_weight(view(t, {s.rows, s.cols}, w));
      const DeviceTensor db = d->upload_weight(view(DType::F32, {s.rows}, bias_bytes));
      const auto x = uniform_floats(static_cast<size_t>(s.n * s.cols), rng);
      auto dx = to_device(*d, x);
      DeviceBuffer dy(*d, sizeof(float) * static_cast<size_t>(s.n * s.rows));
      d->matmul(dw, db, dx->f32(), s.n, dy.f32());
      const auto got = to_host<float>(*d, dy, static_cast<size_t>(s.n * s.rows));
      // Oracle: the held weights times x rounded to the GEMM input type, in double. Block types
      // held in their blocks: a decode GEMV (n <= 8) multiplies the exact values by fp32 x.
      const bool gemv = dtype_is_quantized(t) && dw.dtype == t && s.n <= 8;
      const auto held = held_weights(t, w, s.rows, s.cols, /*rounded=*/!gemv);
      const DType gemm_type = t == DType::F32 || gemv ? DType::F32 : DType::BF16;
      for (int i = 0; i < s.n; ++i) {
        for (int64_t r = 0; r < s.rows; ++r) {
          double want = bias[static_cast<size_t>(r)], mag = std::fabs(bias[static_cast<size_t>(r)]);
          for (int64_t c = 0; c < s.cols; ++c) {
            const double p = static_cast<double>(held[static_cast<size_t>(r * s.cols + c)]) *
                             round_like(gemm_type, x[static_cast<size_t>(i * s.cols + c)]);
            want += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(got[static_cast<size_t>(i * s.rows + r)], want, 1e-5 * mag + 1e-6)
              << dtype_name(t) << " " << s.rows << "x" << s.cols << " n " << s.n << " at " << i << "," << r;
        }
      }
    }
  }
}

// The block types real GGUF files use for most weights stay in their blocks on the device (the
// memory plan and the device count the file's bytes); the rest are expanded to bf16. A decode
// step's 1-8 input rows are multiplied in registers, with the residual add fused (accumulate),
// against the CPU twin's dequantized values and fp32 inputs.
TEST(CudaOps, QuantizedWeightsStayInTheirBlocks) {
  auto d = gpu();
  std::mt19937 rng(9);
  const int64_t rows = 45, cols = 512;
  for (DType t : cpu::kAllTypes) {
    if (!dtype_is_quantized(t)) continue;
    SCOPED_TRACE(dtype_name(t));
    const bool in_blocks = t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q8_0 ||
                           t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
    const auto w = random_weights(t, rows, cols, rng);
    const TensorView tv = view(t, {rows, cols}, w);
    const uint64_t before = d->weight_bytes();
    const DeviceTensor dw = d->upload_weight(tv);
    const uint64_t held_bytes = in_blocks ? dtype_row_bytes(t, cols) * rows : sizeof(uint16_t) * rows * cols;
    EXPECT_EQ(dw.dtype, in_blocks ? t : DType::BF16);
    EXPECT_EQ(d->stored_bytes(tv), held_bytes);
    EXPECT_EQ(d->weight_bytes() - before, held_bytes);
    if (!in_blocks) continue;
    const auto held = held_weights(t, w, rows, cols, /*rounded=*/false);
    for (int n = 1; n <= 8; ++n) {
      const auto x = uniform_floats(static_cast<size_t>(n * cols), rng);
      const auto y0 = uniform_floats(static_cast<size_t>(n * rows), rng);
      auto dx = to_device(*d, x);
      auto dy = to_device(*d, y0);
      const Device::MatmulOut out{&dw, nullptr, dy->f32(), /*accumulate=*/true};
      d->matmul_group(dx->f32(), n, &out, 1);
      const auto got = to_host<float>(*d, *dy, static_cast<size_t>(n * rows));
      for (int i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          double want = y0[static_cast<size_t>(i * rows + r)], mag = std::fabs(want);
          for (int64_t c = 0; c < cols; ++c) {
            const double p = static_cast<double>(held[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(i * cols + c)];
            want += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(got[static_cast<size_t>(i * rows + r)], want, 1e-5 * mag + 1e-6) << "n " << n << " at " << i << "," << r;
        }
    }
  }
}

// An f16 checkpoint's GEMM inputs past f16's range (65,504; Qwen2's down_proj inputs reach it):
// the weights are held in bf16, so the activations are rounded to bf16, not to f16's inf.
TEST(CudaOps, F16WeightsTakeActivationsPastTheF16Range) {
  auto d = gpu();
  std::mt19937 rng(8);
  const int64_t rows = 16, cols = 64;
  const auto w = random_weights(DType::F16, rows, cols, rng);
  const DeviceTensor dw = d->upload_weight(view(DType::F16, {rows, cols}, w));
  EXPECT_EQ(dw.dtype, DType::BF16);
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(c)] = (c % 2 ? -1.0f : 1.0f) * (70000.0f + 1000.0f * c);
  auto dx = to_device(*d, x);
  DeviceBuffer dy(*d, sizeof(float) * rows);
  d->matmul(dw, DeviceTensor{}, dx->f32(), 1, dy.f32());
  const auto got = to_host<float>(*d, dy, rows);
  const auto held = held_weights(DType::F16, w, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0, mag = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double p = static_cast<double>(held[static_cast<size_t>(r * cols + c)]) *
                       round_like(DType::BF16, x[static_cast<size_t>(c)]);
      want += p;
      mag += std::fabs(p);
    }
    ASSERT_TRUE(std::isfinite(got[static_cast<size_t>(r)])) << r;
    EXPECT_NEAR(got[static_cast<size_t>(r)], want, 1e-5 * mag) << r;
  }
}

TEST(CudaOps, KvStoreMatchesTwinBitForBit) {
  auto d = gpu();
  std::mt19937 rng(7);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int n_kv_heads : {1, 3}) {
      for (int head_dim : {16, 128}) {
        const int64_t capacity = 77;
        const size_t elems = static_cast<size_t>(n_kv_heads) * capacity * head_dim;
        const size_t bytes = elems * dtype_block_bytes(t);
        std::vector<uint8_t> want_k(bytes, 0), want_v(bytes, 0);
        DeviceBuffer k_cache(*d, bytes), v_cache(*d, bytes);
        d->copy_to_device(k_cache.get(), want_k.data(), bytes);
        d->copy_to_device(v_cache.get(), want_v.data(), bytes);
        KvView kv{t, k_cache.get(), v_cache.get(), capacity, n_kv_heads, head_dim};
        int pos = 0;
        for (int n : {1, 7, 33, 1, 35}) {
          const auto k = uniform_floats(static_cast<size_t>(n) * n_kv_heads * head_dim, rng, -100.0f, 100.0f);
          const auto v = uniform_floats(k.size(), rng);
          auto dk = to_device(*d, k), dv = to_device(*d, v);
          d->kv_store(kv, dk->f32(), dv->f32(), n, pos);
          cpu::kv_store_rows(t, want_k.data(), want_v.data(), capacity, n_kv_heads, head_dim, k.data(), v.data(), n, pos);
          pos += n;
        }
        EXPECT_EQ(to_host<uint8_t>(*d, k_cache, bytes), want_k) << dtype_name(t);
        EXPECT_EQ(to_host<uint8_t>(*d, v_cache, bytes), want_v) << dtype_name(t);
        const auto k = uniform_floats(static_cast<size_t>(n_kv_heads) * head_dim, rng);
        auto dk = to_device(*d, k);
        EXPECT_THROW(d->kv_store(kv, dk->f32(), dk->f32(), 1, static_cast<int>(capacity)), Error);
      }
    }
  }
}

}  // namespace
}  // namespace hg::test
