// CudaDevice: the Device ops on one NVIDIA GPU (kernels/cuda/ for the ops, cuBLAS for the dense
// projections). Included only by src/device/cuda_*.cpp and CUDA tests; the engine sees Device.
//
// Streams: `compute` runs every op in issue order; `copy` carries weight uploads and the
// host-to-device KV traffic (copy_to_device_async: offload's per-layer prefix, InfiniGen's
// fetched rows), joined to `compute` by events (copy fences). Host arrays an op takes (ids,
// positions) go through a ring of pinned staging slots, copied asynchronously on `compute`.
// Memory is cudaMalloc only (never managed memory); scratch buffers grow to the largest call and
// are then reused, so a warmed-up decode step allocates nothing.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <set>
#include <string>
#include <vector>

#include "device/device.h"
#include "kernels/cuda/backend.h"
#include "mem/arena.h"

namespace hg {
inline namespace HG_CUDA_BACKEND {

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int gpu);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override;
  int threads() const override { return 0; }
  DeviceMemory memory() const override;
  std::optional<DeviceCounters> counters() const override;
  uint64_t weight_bytes() const override { return weight_bytes_; }
  uint64_t stored_bytes(const TensorView& t) const override;

  mem::DmaRegistrar* dma_registrar() override { return &registrar_; }
  // Host bytes registered for DMA through dma_registrar() now.
  size_t registered_bytes() const { return registrar_.bytes(); }
  void* alloc(size_t bytes) override;
  void free(void* ptr) override;
  void copy_to_device(void* dst, const void* src_host, size_t bytes) override;
  void copy_to_host(void* dst_host, const void* src, size_t bytes) override;
  void copy_to_host_async(void* dst_host, const void* src, size_t bytes) override;
  void synchronize() override;
  DeviceTensor upload_weight(const TensorView& t) override;

  void embed(const DeviceTensor& table, const int32_t* ids_host, int n, float* out) override;
  void matmul(const DeviceTensor& w, const DeviceTensor& bias, const float* x, int n, float* y) override;
  void matmul_group(const float* x, int n, const MatmulOut* outs, int count) override;
  void rmsnorm(const float* x, const DeviceTensor& weight, float eps, int n, int dim, float* y) override;
  void layernorm(const float* x, const DeviceTensor& weight, const DeviceTensor& bias, float eps, int n, int dim,
                 float* y) override;
  void rope(float* x, const int32_t* pos_host, int n, int n_heads, const RopeParams& p) override;
  void silu_mul(float* gate, const float* up, int64_t count) override;
  void relu(float* x, int64_t count) override;
  void add(float* y, const float* x, int64_t count) override;
  void add_bias(float* y, const DeviceTensor& b, int n, int dim) override;
  void kv_store(const KvView& kv, const float* k, const float* v, int n, int pos0) override;
  void attention(const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out) override;
  // Defined in cuda_device_hybrid.cpp.
  void hybrid_attention(const HybridAttentionArgs& a) override;

  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void gather_ring_rows(const RingRows& r, void* dst) override;
  void copy_to_device_async(void* dst, const void* src_host, size_t bytes) override;
  int64_t copy_fence() override;
  void wait_copy_fence(int64_t f) override;
  void copy_to_device_queued(void* dst, const void* src_host, size_t bytes) override;
  int64_t compute_fence() override;
  void wait_compute_fence(int64_t f) override;
  void copies_after_compute() override;
  bool queues_host_callbacks() const override { return host_callbacks_; }
  void host_callback(HostCallback fn, void* arg) override;

  void decode_step_begin() override;
  void decode_step_end() override;

  int timing_mark(bool copy_stream) override;
  double timing_elapsed_ms(int begin, int end) override;

  int gpu() const { return gpu_; }
  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t copy_stream() const { return copy_; }

 private:
  // A device buffer that grows to the largest request (never shrinks).
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  // One pinned slot of the staging ring for small host arrays; `done` fires when its copy ran.
  // `n` ints are staged in it; `epoch` is compute_syncs_ when they were: once the host has waited
  // for the compute stream since, the copy has run and the slot is free without a wait.
  struct StageSlot {
    void* host = nullptr;
    void* dev = nullptr;
    size_t bytes = 0;
    int n = -1;
    uint64_t epoch = 0;
    bool in_graph = false;  // staged inside a capture: `done` was not recorded
    cudaEvent_t done = nullptr;
  };
  struct RopeTable {
    RopeParams params;
    std::vector<float> freq_factors;  // host copy of params.freq_factors (empty: none)
    float* inv_freq = nullptr;        // device [rotary_dim / 2]
  };
  // The host KV arenas' blocks pinned with cudaHostRegister, so offload's streamed KV and the
  // evictions copy by DMA instead of through the driver's staging. A block the driver refuses to
  // pin (a limit on locked memory) stays pageable: logged once, its copies merely synchronous.
  class HostRegistrar final : public mem::DmaRegistrar {
   public:
    explicit HostRegistrar(const CudaDevice& device) : device_(device) {}
    bool register_range(void* addr, size_t bytes) override;
    void unregister_range(void* addr, size_t bytes) override;
    size_t bytes() const { return bytes_; }

   private:
    const CudaDevice& device_;
    std::set<void*> ranges_;  // registered block starts
    size_t bytes_ = 0;
    bool warned_ = false;
  };
  static constexpr int kStageSlots = 16;
  static constexpr size_t kStageBytes = 16384;
  static constexpr int kTimingEvents = 512;
  static constexpr int kCopyFences = 64;
  static constexpr size_t kUploadChunk = size_t{32} << 20;

  void make_current() const;
  // Before an op that can be captured (kernels, GEMMs, device copies): the current device, and
  // inside a decode step a capture of the compute stream, begun here if none is open.
  void issue();
  // issue() before a copy or a host callback (not a launch): counted as a captured node, so that
  // a capture holding only such nodes still becomes a graph.
  void issue_node() {
    issue();
    if (capturing_) ++capture_copies_;
  }
  // Before anything a capture cannot hold (a host wait, a copy from pageable memory, the copy
  // stream, a timing event): the open capture ends and its graph is launched.
  void flush_capture();
  // Ends a capture an exception left open, launching nothing.
  void abort_capture();
  // Kernels and GEMMs issued since the open capture began.
  uint64_t captured_launches() const;
  // Queues a device -> host copy on the compute stream (after ending an open capture).
  void queue_to_host(void* dst_host, const void* src, size_t bytes);
  // Whether host memory is pinned or registered (copies from it are asynchronous).
  static bool pinned(const void* host);
  // The host waits for the device: counted in counters_.syncs.
  void sync_stream(cudaStream_t s);
  void sync_event(cudaEvent_t e);
  // Waits for timing mark `handle` unless a wait since its record has covered it.
  void sync_mark(int handle);
  void* grow(Scratch& s, size_t bytes);
  // Copies n int32 from the host to a device buffer valid for the ops issued next on `compute`.
  const int32_t* stage_ints(const int32_t* host, int n);
  const float* rope_table(const RopeParams& p);
  void* upload_matrix(const TensorView& t, int64_t rows, int64_t cols, DType* stored);
  // y[n, w.rows] (+)= x · Wᵀ for a weight held in its GGUF blocks and many rows x (bf16).
  void quantized_gemm(const DeviceTensor& w, const void* x_bf16, int n, float* y, bool accumulate);

  int gpu_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t uploaded_ = nullptr;  // end of the latest upload on `copy`
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  std::array<StageSlot, kStageSlots> stage_{};
  int stage_next_ = 0;
  std::array<void*, 2> upload_host_{};  // pinned double buffer of weight uploads
  std::array<cudaEvent_t, 2> upload_done_{};
  std::vector<void*> weights_;  // buffers behind uploaded DeviceTensors
  size_t weight_bytes_ = 0;
  Scratch gemm_input_;    // activations converted to the weight dtype
  Scratch attention_ws_;  // split-K partials of decode attention (plain and hybrid)
  Scratch dequant_tile_;  // a quantized weight's rows in bf16, for a prefill GEMM
  static constexpr int64_t kDequantTileElems = int64_t{8} << 20;  // 16 MiB of bf16
  std::vector<RopeTable> rope_tables_;
  std::vector<cudaEvent_t> timing_;
  int timing_next_ = 0;
  // Per timing event: the sequence number of its latest record and the stream it was recorded on
  // (0 compute, 1 copy); done_seq_: per stream, the latest sequence known to have completed.
  std::vector<uint64_t> timing_seq_;
  std::vector<uint8_t> timing_stream_;
  uint64_t timing_seq_next_ = 1;
  std::array<uint64_t, 2> done_seq_{};
  std::array<uint64_t, 2> recorded_seq_{};  // per stream, the latest sequence recorded on it
  uint64_t compute_syncs_ = 0;              // host waits for the whole compute stream so far
  std::vector<cudaEvent_t> copy_fences_;   // ring: fence f is copy_fences_[f % kCopyFences]
  int64_t copy_fence_next_ = 0;
  // compute fences, a ring of kCopyFences too; with each, compute_syncs_ when it was recorded
  std::vector<cudaEvent_t> compute_fences_;
  std::vector<uint64_t> compute_fence_epoch_;
  int64_t compute_fence_next_ = 0;
  int64_t compute_fences_passed_ = 0;  // fences below it were recorded before a wait for the whole stream
  cudaEvent_t compute_done_ = nullptr;     // copies_after_compute
  // CUDA graphs (decode_step_begin): one executable graph per segment of a step (the work between
  // two host waits), updated in place with each step's capture, re-instantiated when its nodes
  // change. A policy whose steps need more than kMaxSegments host waits two steps in a row
  // (offload waits for its copy stream every layer; the hybrid ones without host callbacks for
  // the host stage) runs without graphs: so many small graphs would cost more than they save.
  // HG_CUDA_GRAPHS=0 turns them off.
  static constexpr int kMaxSegments = 4;
  bool graphs_ = true;
  int many_waits_ = 0;  // steps in a row with more than kMaxSegments segments
  bool host_callbacks_ = true;  // HG_CUDA_HOST_CALLBACKS=0: false
  bool in_step_ = false;
  bool capturing_ = false;
  int segment_ = 0;
  uint64_t capture_kernels_ = 0;  // cuda::launches_issued() when the capture began
  uint64_t capture_blas_ = 0;     // counters_.launches then
  uint64_t capture_copies_ = 0;   // copies and host callbacks captured
  uint64_t launches_in_graphs_ = 0;
  std::vector<cudaGraphExec_t> graph_execs_;
  HostRegistrar registrar_{*this};
  DeviceCounters counters_;                // launches: cuBLAS calls only (kernels: launches_issued)
  uint64_t launches_base_ = 0;             // cuda::launches_issued() when this device was made
};

}  // namespace HG_CUDA_BACKEND
}  // namespace hg
