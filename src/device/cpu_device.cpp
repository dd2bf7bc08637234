// CpuDevice: the Device ops on a CPU thread pool. Memory is host memory, so copies are memcpy
// and matrices stay zero-copy in the mapped model file; vectors are converted to fp32 once.
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "device/device.h"
#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/hybrid_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "util/thread_pool.h"

namespace hg {

namespace {

constexpr int64_t kElementGrain = 4096;  // elementwise ops: below this one thread does it all

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int n_threads) : pool_(n_threads), scratch_(static_cast<size_t>(pool_.size())) {}

  std::string name() const override { return "cpu (" + std::string(cpu::cpu_isa_name()) + ")"; }
  int threads() const override { return pool_.size(); }

  void* alloc(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw Error("cpu device: out of memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}

  DeviceTensor upload_weight(const TensorView& t) override {
    DeviceTensor d;
    if (!t.present()) return d;
    d.cols = t.cols();
    d.rows = t.shape.size() >= 2 ? t.numel() / t.cols() : 1;
    if (t.shape.size() >= 2) {
      d.dtype = t.dtype;
      d.data = t.data;
      return d;
    }
    // Vector: an fp32 copy owned by the device.
    std::lock_guard<std::mutex> lock(owned_mutex_);
    auto& buf = owned_.emplace_back(static_cast<size_t>(d.cols));
    cpu::dequantize_row(t.dtype, t.data, d.cols, 0, buf.data());
    d.dtype = DType::F32;
    d.data = buf.data();
    return d;
  }

  void embed(const DeviceTensor& table, const int32_t* ids, int n, float* out) override {
    for (int i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] >= table.rows)
        throw Error("token id " + std::to_string(ids[i]) + " is outside the vocabulary [0, " +
                    std::to_string(table.rows) + ")");
    }
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) cpu::dequantize_row(table.dtype, table.data, table.cols, ids[i], out + i * table.cols);
    });
  }

  void matmul(const DeviceTensor& w, const DeviceTensor& bias, const float* x, int n, float* y) override {
    cpu::matmul(pool_, w.dtype, w.data, w.rows, w.cols, x, n, y, w.rows);
    if (bias.present()) add_bias(y, bias, n, static_cast<int>(w.rows));
  }

  void rmsnorm(const float* x, const DeviceTensor& weight, float eps, int n, int dim, float* y) override {
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) { cpu::rmsnorm_rows(x, weight.f32(), eps, dim, y, b, e); });
  }

  void layernorm(const float* x, const DeviceTensor& weight, const DeviceTensor& bias, float eps, int n, int dim,
                 float* y) override {
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      cpu::layernorm_rows(x, weight.f32(), bias.f32(), eps, dim, y, b, e);
    });
  }

  void rope(float* x, const int32_t* pos, int n, int n_heads, const RopeParams& p) override {
    float inv_freq[512];
    if (p.rotary_dim > 1024) throw Error("rope: rotary_dim " + std::to_string(p.rotary_dim) + " > 1024");
    cpu::rope_inv_freq(p.rotary_dim, p.theta, p.scaling.llama3, p.scaling.factor, p.scaling.low_freq_factor,
                       p.scaling.high_freq_factor, p.scaling.original_max_position, inv_freq);
    const bool interleaved = p.layout == RopeLayout::Interleaved;
    pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
      cpu::rope_rows(x, pos, n_heads, p.head_dim, p.rotary_dim, inv_freq, interleaved, b, e);
    });
  }

  void silu_mul(float* gate, const float* up, int64_t count) override {
    pool_.parallel_for(count, [&](int64_t b, int64_t e, int) { cpu::silu_mul_range(gate, up, b, e); }, kElementGrain);
  }
  void relu(float* x, int64_t count) override {
    pool_.parallel_for(count, [&](int64_t b, int64_t e, int) { cpu::relu_range(x, b, e); }, kElementGrain);
  }
  void add(float* y, const float* x, int64_t count) override {
    pool_.parallel_for(count, [&](int64_t b, int64_t e, int) { cpu::add_range(y, x, b, e); }, kElementGrain);
  }
  void add_bias(float* y, const DeviceTensor& b, int n, int dim) override {
    pool_.parallel_for(n, [&](int64_t rb, int64_t re, int) { cpu::add_bias_rows(y, b.f32(), dim, rb, re); });
  }

  void kv_store(const KvView& kv, const float* k, const float* v, int n, int pos0) override {
    if (pos0 + n > kv.capacity)
      throw Error("kv cache overflow: position " + std::to_string(pos0 + n) + " > capacity " +
                  std::to_string(kv.capacity));
    cpu::kv_store_rows(kv.dtype, kv.k, kv.v, kv.capacity, kv.n_kv_heads, kv.head_dim, k, v, n, pos0);
  }

  void attention(const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out) override {
    const size_t need = static_cast<size_t>(past + n) * static_cast<size_t>(n_heads / kv.n_kv_heads);
    for (auto& s : scratch_)
      if (s.size() < need) s.resize(need);  // grows with the context, not per step
    pool_.parallel_for(static_cast<int64_t>(n) * n_heads, [&](int64_t b, int64_t e, int t) {
      cpu::attention_items(q, n_heads, kv.n_kv_heads, kv.head_dim, kv.dtype, kv.k, kv.v, kv.capacity, past, scale,
                           out, scratch_[static_cast<size_t>(t)].data(), b, e);
    });
  }

  // The CPU device runs every op before returning, so a mark is the steady clock now, for both
  // "streams"; a ring of kTimingMarks handles as on the CUDA device.
  int timing_mark(bool /*copy_stream*/) override {
    const int handle = timing_next_;
    timing_[static_cast<size_t>(handle)] = std::chrono::steady_clock::now();
    timing_next_ = (timing_next_ + 1) % kTimingMarks;
    return handle;
  }
  double timing_elapsed_ms(int begin, int end) override {
    if (begin < 0 || end < 0 || begin >= kTimingMarks || end >= kTimingMarks) return -1.0;
    return std::chrono::duration<double, std::milli>(timing_[static_cast<size_t>(end)] -
                                                     timing_[static_cast<size_t>(begin)])
        .count();
  }

  void hybrid_attention(const float* q, int n, int n_heads, const KvView& w, const WindowSpan& span, int pos0,
                        const HostPart& host, float scale, float* out) override {
    const size_t need = static_cast<size_t>(span.sink_slots + span.ring_slots + host.K);
    for (auto& s : scratch_)
      if (s.size() < need) s.resize(need);
    pool_.parallel_for(static_cast<int64_t>(n) * n_heads, [&](int64_t b, int64_t e, int t) {
      cpu::hybrid_attention_items(q, n_heads, w.n_kv_heads, w.head_dim, w.dtype, w.k, w.v, w.capacity, span, pos0,
                                  host, scale, out, scratch_[static_cast<size_t>(t)].data(), b, e);
    });
  }

 private:
  static constexpr int kTimingMarks = 4096;

  ThreadPool pool_;
  std::vector<std::vector<float>> scratch_;  // per-thread attention scores
  std::array<std::chrono::steady_clock::time_point, kTimingMarks> timing_{};
  int timing_next_ = 0;
  std::mutex owned_mutex_;
  std::vector<std::vector<float>> owned_;    // fp32 copies of vectors
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(int n_threads) { return std::make_unique<CpuDevice>(n_threads); }

}  // namespace hg
