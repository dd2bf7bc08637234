// The accelerator as the engine sees it: memory, weight upload, and coarse ops on fp32
// activations. CpuDevice runs the ops on a CPU thread pool, CudaDevice on a GPU. Every pointer
// an op takes is device memory (from alloc) unless its name ends in _host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hybridgen/dtype.h"
#include "hybridgen/model.h"
#include "kernels/device_tokens.h"
#include "kernels/kv_layout.h"

namespace hg {

class ThreadPool;
namespace mem {
struct DmaRegistrar;
class PinnedBuffer;
}

// A weight as the device holds it. Matrices stay in their stored dtype ([rows, cols], row-major);
// vectors (norm weights, biases) are converted to fp32 at upload.
struct DeviceTensor {
  DType dtype = DType::F32;
  int64_t rows = 0;  // 1 for vectors
  int64_t cols = 0;
  const void* data = nullptr;

  bool present() const { return data != nullptr; }
  const float* f32() const { return static_cast<const float*>(data); }
};

struct RopeParams {
  int head_dim = 0;
  int rotary_dim = 0;  // == head_dim for all supported models
  float theta = 10000.0f;
  RopeLayout layout = RopeLayout::RotateHalf;
  RopeScaling scaling;
  const float* freq_factors = nullptr;  // [rotary_dim / 2] or null: inv_freq[i] /= freq_factors[i]
};

// One layer's KV cache of one sequence, as the device stores it:
// k, v: [n_kv_heads][capacity][head_dim] in `dtype`, slot `s` holds the token at position s.
struct KvView {
  DType dtype = DType::F32;
  void* k = nullptr;
  void* v = nullptr;
  int64_t capacity = 0;
  int n_kv_heads = 0;
  int head_dim = 0;

  // The same caches as the kernels read them: one token block of `capacity` tokens.
  KvLayout k_layout() const { return layout(k); }
  KvLayout v_layout() const { return layout(v); }

 private:
  KvLayout layout(const void* p) const {
    return {dtype, n_kv_heads, head_dim, capacity, 0, static_cast<const std::byte*>(p)};
  }
};

// What a device can still allocate, for the memory plan checked before anything is allocated.
struct DeviceMemory {
  uint64_t free = 0;   // bytes; 0: unknown (nothing is checked against it)
  uint64_t total = 0;  // bytes; 0: unknown
  bool host = false;   // the device's memory is host memory (CpuDevice): weights stay mapped in place
};

// What a GPU device was asked to do since it was made, counted by the CUDA device's own code, so
// a GPU and the emulated device report the same figures: kernel launches outside CUDA graphs
// (a cuBLAS call counts one), graph launches, host-device synchronizations (stream, event and
// device syncs, and copies that block the host) and bytes copied each way. The CPU device has none.
struct DeviceCounters {
  uint64_t launches = 0;
  uint64_t graph_launches = 0;
  uint64_t syncs = 0;
  uint64_t h2d_bytes = 0;
  uint64_t d2h_bytes = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Threads the device's own work runs on (CPU device), or 0.
  virtual int threads() const = 0;
  // The CPU device's pool, which spans every core of the run (src/sched/cores.h): the host stage
  // reserves its share of it while it computes, and host work the device thread only waits for
  // (prefill's host attention) runs on all of it. nullptr where the device has cores of its own.
  virtual ThreadPool* cpu_pool() { return nullptr; }
  // Whether the device may compute in bf16 where its kernels have it (the CPU device's prefill
  // GEMMs and attention products over a bf16 cache, on CPUs with AMX or AVX512_BF16): the run's
  // precision (EngineOptions::precision), which follows the weights by default.
  virtual bool bf16_compute() const { return false; }

  // ---- memory ----
  virtual DeviceMemory memory() const { return {}; }
  // Counters of GPU work (DeviceCounters); nullopt on a device that has none to count.
  virtual std::optional<DeviceCounters> counters() const { return std::nullopt; }
  // Bytes the uploaded weights take in the device's memory (0 where weights stay in host memory).
  virtual uint64_t weight_bytes() const { return 0; }
  // Bytes upload_weight(t) would take in the device's memory, for the memory plan (0 where
  // weights stay in host memory).
  virtual uint64_t stored_bytes(const TensorView& /*t*/) const { return 0; }
  // Registers host memory the device copies from and into (the host KV arenas, per committed
  // block), so that those copies are asynchronous DMA: CUDA's cudaHostRegister. nullptr where
  // copies need no registration (the CPU device). It outlives every arena that uses it.
  virtual mem::DmaRegistrar* dma_registrar() { return nullptr; }
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* src_host, size_t bytes) = 0;
  virtual void copy_to_host(void* dst_host, const void* src, size_t bytes) = 0;
  // Queues a device -> host copy behind the compute work issued so far, without waiting for it:
  // dst_host must not be read by the host, nor freed, before a later synchronization (copies the
  // device itself reads back later, such as offload's write-back of new K/V rows to the host
  // store its next steps stream from, are ordered on the device). A CUDA device copies by DMA
  // into memory registered through dma_registrar() and waits as copy_to_host does otherwise. The
  // default is copy_to_host.
  virtual void copy_to_host_async(void* dst_host, const void* src, size_t bytes) {
    copy_to_host(dst_host, src, bytes);
  }
  // Device -> device, in order with the compute stream's work (moving a token's K/V rows between
  // cache slots). The default goes through a host buffer.
  virtual void copy_on_device(void* dst, const void* src, size_t bytes);
  // The rows r names (kernels/kv_layout.h), gathered into dst (device memory) in order with the
  // compute stream: an eviction's rows of every layer and kv-head. A CUDA device runs one
  // kernel; the default copies runs of rows with copy_on_device.
  virtual void gather_ring_rows(const RingRows& r, void* dst);
  virtual void synchronize() = 0;
  // Makes a weight resident on the device; the view's storage must outlive the device tensor
  // (CpuDevice keeps matrices zero-copy in the mapped file).
  virtual DeviceTensor upload_weight(const TensorView& t) = 0;

  // ---- ops (x, y: [n, dim] fp32, row-major) ----
  // out[i, :] = table[ids_host[i], :] dequantized
  virtual void embed(const DeviceTensor& table, const int32_t* ids_host, int n, float* out) = 0;
  // y[n, w.rows] = x[n, w.cols] · wᵀ (+ bias when present)
  virtual void matmul(const DeviceTensor& w, const DeviceTensor& bias, const float* x, int n, float* y) = 0;
  // One output of matmul_group: y[n, w->rows] = x · wᵀ (+ bias), or y += … with accumulate (a
  // residual add fused into the product).
  struct MatmulOut {
    const DeviceTensor* w;
    const DeviceTensor* bias;  // null or not present: none
    float* y;
    bool accumulate = false;
  };
  // Several matmuls over one input x[n, cols] (q/k/v; gate/up; Wo or W_down with the residual):
  // CpuDevice quantizes x once for all of them and synchronizes its pool once.
  virtual void matmul_group(const float* x, int n, const MatmulOut* outs, int count) = 0;
  virtual void rmsnorm(const float* x, const DeviceTensor& weight, float eps, int n, int dim, float* y) = 0;
  virtual void layernorm(const float* x, const DeviceTensor& weight, const DeviceTensor& bias, float eps, int n,
                         int dim, float* y) = 0;
  // In place on x: [n, n_heads, head_dim], row i at position pos_host[i].
  virtual void rope(float* x, const int32_t* pos_host, int n, int n_heads, const RopeParams& p) = 0;
  // gate = silu(gate) * up, elementwise over count elements
  virtual void silu_mul(float* gate, const float* up, int64_t count) = 0;
  virtual void relu(float* x, int64_t count) = 0;
  // y += x
  virtual void add(float* y, const float* x, int64_t count) = 0;
  // y[i, :] += b  (b: [dim])
  virtual void add_bias(float* y, const DeviceTensor& b, int n, int dim) = 0;

  // k, v: [n, n_kv_heads * head_dim] fp32 for positions pos0 .. pos0+n-1, written into the cache.
  virtual void kv_store(const KvView& kv, const float* k, const float* v, int n, int pos0) = 0;
  // Causal attention of n query rows at positions past .. past+n-1 over cache slots
  // [0, past + i] (row i). q: [n, n_heads, head_dim]; out: [n, n_heads, head_dim].
  // GQA: query head h reads kv head h / (n_heads / n_kv_heads).
  virtual void attention(const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out) = 0;

  // ---- copy stream: host -> device traffic that overlaps the compute stream ----
  // Queues a host -> device copy on the copy stream (CUDA: cudaMemcpyAsync on `copy`; CPU
  // device: its copy thread). src_host must stay unchanged until a later fence was waited for.
  // The default runs the copy at once.
  virtual void copy_to_device_async(void* dst, const void* src_host, size_t bytes) {
    copy_to_device(dst, src_host, bytes);
  }
  // Several such copies queued at once, in order (a layer's KV is many runs of token blocks; the
  // CPU device's copy thread then wakes once for them, not once per run).
  struct CopyRegion {
    void* dst;
    const void* src_host;
    size_t bytes;
  };
  virtual void copy_to_device_async_batch(const CopyRegion* regions, size_t n) {
    for (size_t i = 0; i < n; ++i) copy_to_device_async(regions[i].dst, regions[i].src_host, regions[i].bytes);
  }
  // A fence behind the copies queued so far (its handle; handles are recycled after a few dozen).
  virtual int64_t copy_fence() { return 0; }
  // Work issued on the compute stream from now on waits for fence f (the CPU device blocks).
  virtual void wait_copy_fence(int64_t /*f*/) {}
  // Copies queued from now on start after the compute work issued so far (a buffer's reuse).
  virtual void copies_after_compute() {}

  // ---- host buffers the compute stream reads later (pinned double buffers) ----
  // Queues a host -> device copy on the compute stream, in order with its work, without waiting:
  // from memory registered through dma_registrar() a CUDA device copies by DMA, and src_host must
  // stay unchanged until a compute fence recorded after the copy has been waited for. From
  // pageable memory, and on the CPU device, it is copy_to_device (the source is free at once).
  virtual void copy_to_device_queued(void* dst, const void* src_host, size_t bytes) {
    copy_to_device(dst, src_host, bytes);
  }
  // A fence behind the compute work issued so far (its handle; recycled after a few dozen fences
  // recorded with no wait for the whole stream between), and the host's wait for it, which
  // returns at once, and uncounted, where the fence has passed (or the host has waited for the
  // whole compute stream since). The CPU device computes in the caller's order: no fences.
  virtual int64_t compute_fence() { return -1; }
  virtual void wait_compute_fence(int64_t /*f*/) {}

  // ---- host callbacks (the hybrid policies' asynchronous pipeline) ----
  // fn(arg) on a host thread once the compute work issued before it has run; the work issued after
  // it waits until it returns, and the caller does not wait at all. A CUDA device queues it on its
  // compute stream (cudaLaunchHostFunc, a host node inside a CUDA graph); fn may block (on the host
  // stage) but must not call the device. queues_host_callbacks() says whether the device queues
  // them; HG_CUDA_HOST_CALLBACKS=0 makes a CUDA device say no. The CPU device, whose ops have run
  // when they return, calls fn at once.
  using HostCallback = void (*)(void* arg);
  virtual bool queues_host_callbacks() const { return false; }
  virtual void host_callback(HostCallback fn, void* arg) { fn(arg); }

  // ---- a decode step (CUDA graphs) ----
  // The engine's decode step runs between these two calls (its forward pass, logits copy
  // included). A CUDA device captures the step's work as CUDA graphs: from one host wait to the
  // next, so a step of `full` is one graph, launched when the logits' copy needs it.
  virtual void decode_step_begin() {}
  virtual void decode_step_end() {}

  // ---- timing (T_dev / T_tx for the scheduler) ----
  // Records a timestamp behind the work queued so far on the compute stream (copy_stream false)
  // or the copy stream (true); returns its handle, or -1 on a device without timers. CUDA: an
  // event; CPU device: the steady clock (its ops have run when they return).
  // Handles are recycled after a few hundred marks: read a duration soon after marking it.
  virtual int timing_mark(bool /*copy_stream*/) { return -1; }
  // Milliseconds from mark `begin` to mark `end` (waits for both); -1 when unsupported.
  virtual double timing_elapsed_ms(int /*begin*/, int /*end*/) { return -1.0; }

  // Hybrid policies: a.n query rows at positions a.pos0 ... attend over their device tokens (the
  // slot table a.tokens over the caches a.k_cache / a.v_cache, causal) merged with the host's part:
  // its selected tokens' logits and V rows (one softmax over the union, in token order) or its
  // partial result and log-sum-exp (kernels/device_tokens.h). Every pointer is device memory.
  virtual void hybrid_attention(const HybridAttentionArgs& a);
};

// Makes a pinned buffer of the device's registrar hold `bytes` and returns it: growing discards
// the buffer, so the work queued on the device, which may copy into or out of it, runs first
// (a wait, only while a buffer grows); a buffer the registrar refused to pin is an error (a
// queued copy from pageable memory would run at once, before the host has written it).
std::byte* grow_pinned(Device& device, mem::PinnedBuffer& buffer, size_t bytes);

// bf16: whether it may compute in bf16 where the CPU has it (Device::bf16_compute).
std::unique_ptr<Device> make_cpu_device(int n_threads, bool bf16 = true);
// Matrices whose packed decode copy the live CPU devices of this process hold: one per matrix,
// shared by every device that uploaded it (tests, diagnostics).
size_t cpu_packed_matrices();
// The CUDA device on GPU `gpu`; throws hg::Error when the build has no CUDA backend, no GPU is
// present, or `gpu` does not exist (naming the GPUs that do).
std::unique_ptr<Device> make_cuda_device(int gpu);
// Number of usable CUDA GPUs (0 when the build has no CUDA backend or the driver finds none).
int cuda_device_count();
// The device a `--device` name asks for, when it is a CUDA one: "cuda" (or "auto" where a GPU is
// present) the GPU `gpu`, "cuda-emu" the emulated device; nullptr for "cpu" (and "auto" without a
// GPU), which the caller makes with its own thread plan. Throws hg::Error for any other name.
std::unique_ptr<Device> make_named_cuda_device(const std::string& name, int gpu);
// The emulated CUDA device (`--device cuda-emu`, kernels/cuda/emu/cuda_emu.h): the CUDA device's
// own code and kernels run on the CPU, in every build. A test instrument: its timings mean
// nothing about a GPU. One GPU, index 0.
std::unique_ptr<Device> make_cuda_emu_device(int gpu);

}  // namespace hg
