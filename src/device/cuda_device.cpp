// CudaDevice plumbing: GPU selection, streams, events, memory, staging, weight upload, timing.
// The ops are in cuda_device_ops.cpp.
//
// Weights as stored on the GPU (see upload_weight):
//   - F32 and BF16 matrices keep their dtype: F32 stays exact (fp32 SGEMM, no TF32), which is
//     what the CPU-vs-GPU logits tests lean on; BF16 runs bf16 tensor-core GEMMs.
//   - F16 matrices are converted to bf16 at upload: a GEMM takes inputs of its weights' type, and
//     activations rounded to f16 overflow past 65,504 (Qwen2's down_proj inputs reach that), where
//     bf16 has fp32's range. The cost is 3 bits of the weights' mantissa.
//   - The GGUF block types real files use for most of their weights (Q4_0, Q4_1, Q5_0, Q8_0,
//     Q4_K, Q5_K, Q6_K; cuda::held_quantized) stay in their blocks, at the file's size: decode
//     multiplies them in registers (kernels/cuda/matmul_quant.cu), prefill runs cuBLAS on bf16
//     tiles dequantized on the fly. The other block types (Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS) are
//     dequantized on the host, row by row (cpu::dequantize_row), and stored as bf16.
//   - vectors (norm weights, biases) become fp32.
// Uploads stream through two pinned 32 MiB buffers on the copy stream, so filling one buffer
// (memcpy from the mapped file, or dequantization) overlaps the DMA of the other.
#include "device/cuda_device.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "hybridgen/error.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg {
inline namespace HG_CUDA_BACKEND {

namespace {

#ifdef HG_CUDA_EMU
constexpr const char* kDeviceKind = "cuda-emu";
#else
constexpr const char* kDeviceKind = "cuda";
#endif

// Matrices the GPU holds as bf16 rather than as stored: f16 (see above) and the block types it
// cannot multiply in their blocks.
bool expanded_to_bf16(DType t) {
  return t == DType::F16 || (dtype_is_quantized(t) && !cuda::held_quantized(t));
}

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

#ifndef HG_CUDA_EMU
std::string describe_gpu(int index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) return std::to_string(index) + ": (unreadable)";
  return std::to_string(index) + ": " + p.name + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         gib(p.totalGlobalMem) + ")";
}
#endif

}  // namespace

CudaDevice::CudaDevice(int gpu) : gpu_(gpu), launches_base_(cuda::launches_issued().load()) {
  HG_CUDA_CHECK(cudaSetDevice(gpu_));
  HG_CUDA_CHECK(cudaGetDeviceProperties(&prop_, gpu_));
  // Non-blocking streams: no implicit ordering with the legacy default stream.
  HG_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  HG_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  HG_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
  for (auto& slot : stage_) {
    HG_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
    slot.bytes = kStageBytes;  // a decode step's arrays fit: staging them never allocates (nor waits)
    HG_CUDA_CHECK(cudaMallocHost(&slot.host, slot.bytes));
    HG_CUDA_CHECK(cudaMalloc(&slot.dev, slot.bytes));
  }
  for (int b = 0; b < 2; ++b) {
    HG_CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_[static_cast<size_t>(b)], cudaEventDisableTiming));
    HG_CUDA_CHECK(cudaMallocHost(&upload_host_[static_cast<size_t>(b)], kUploadChunk));
  }
  if (const char* g = std::getenv("HG_CUDA_GRAPHS"); g && std::string(g) == "0") graphs_ = false;
  if (const char* h = std::getenv("HG_CUDA_HOST_CALLBACKS"); h && std::string(h) == "0") host_callbacks_ = false;
  HG_CUBLAS_CHECK(cublasCreate(&blas_));
  HG_CUBLAS_CHECK(cublasSetStream(blas_, compute_));
  // Our own workspace: cuBLAS then allocates nothing per call (and stays graph-capturable).
  const size_t ws_bytes = size_t{32} << 20;
  HG_CUDA_CHECK(cudaMalloc(&blas_workspace_, ws_bytes));
  HG_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, ws_bytes));
  // fp32 GEMMs stay fp32: no TF32 (exactness against the CPU device matters more there).
  HG_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
}

CudaDevice::~CudaDevice() {
  // Errors are ignored here: a destructor must not throw, and the process may be unwinding from
  // a CUDA error already.
  cudaSetDevice(gpu_);
  abort_capture();
  for (cudaGraphExec_t e : graph_execs_)
    if (e) cudaGraphExecDestroy(e);
  cudaStreamSynchronize(compute_);
  cudaStreamSynchronize(copy_);
  for (void* p : weights_) cudaFree(p);
  for (auto& t : rope_tables_) cudaFree(t.inv_freq);
  cudaFree(gemm_input_.ptr);
  cudaFree(attention_ws_.ptr);
  cudaFree(dequant_tile_.ptr);
  for (auto& slot : stage_) {
    cudaFreeHost(slot.host);
    cudaFree(slot.dev);
    cudaEventDestroy(slot.done);
  }
  for (int b = 0; b < 2; ++b) {
    cudaFreeHost(upload_host_[static_cast<size_t>(b)]);
    cudaEventDestroy(upload_done_[static_cast<size_t>(b)]);
  }
  for (cudaEvent_t e : timing_) cudaEventDestroy(e);
  for (cudaEvent_t e : copy_fences_) cudaEventDestroy(e);
  for (cudaEvent_t e : compute_fences_) cudaEventDestroy(e);
  if (compute_done_) cudaEventDestroy(compute_done_);
  cudaEventDestroy(uploaded_);
  if (blas_) cublasDestroy(blas_);
  cudaFree(blas_workspace_);
  cudaStreamDestroy(compute_);
  cudaStreamDestroy(copy_);
}

std::string CudaDevice::name() const {
  return std::string(kDeviceKind) + ":" + std::to_string(gpu_) + " (" + prop_.name + ", sm_" +
         std::to_string(prop_.major) + std::to_string(prop_.minor) + ", " + gib(prop_.totalGlobalMem) + ")";
}

bool CudaDevice::pinned(const void* host) {
  cudaPointerAttributes attr{};
  const bool is = cudaPointerGetAttributes(&attr, host) == cudaSuccess && attr.type == cudaMemoryTypeHost;
  cudaGetLastError();  // older drivers report unregistered pointers as an error
  return is;
}

void CudaDevice::sync_stream(cudaStream_t s) {
  if (s == compute_) flush_capture();
  ++counters_.syncs;
  HG_CUDA_CHECK(cudaStreamSynchronize(s));
  const size_t stream = s == compute_ ? 0 : 1;
  done_seq_[stream] = recorded_seq_[stream];  // every mark recorded on it has completed
  if (s == compute_) {
    ++compute_syncs_;
    compute_fences_passed_ = compute_fence_next_;
  }
}

void CudaDevice::sync_event(cudaEvent_t e) {
  flush_capture();
  ++counters_.syncs;
  HG_CUDA_CHECK(cudaEventSynchronize(e));
}

std::optional<DeviceCounters> CudaDevice::counters() const {
  DeviceCounters c = counters_;
  c.launches += cuda::launches_issued().load(std::memory_order_relaxed) - launches_base_;
  c.launches -= launches_in_graphs_;  // counted as their graphs' launches
  return c;
}

// ---- CUDA graphs ----

void CudaDevice::decode_step_begin() {
  abort_capture();
  in_step_ = graphs_;
  segment_ = 0;
}

void CudaDevice::decode_step_end() {
  flush_capture();
  in_step_ = false;
  // Two steps in a row: a first step's buffers grow (each growth a wait), later steps reuse them.
  many_waits_ = segment_ > kMaxSegments ? many_waits_ + 1 : 0;
  if (graphs_ && many_waits_ >= 2) {
    spdlog::debug("{}: decode steps took {} host waits: CUDA graphs off", name(), segment_);
    graphs_ = false;
    for (cudaGraphExec_t& e : graph_execs_) {
      if (e) HG_CUDA_CHECK(cudaGraphExecDestroy(e));
      e = nullptr;
    }
  }
}

void CudaDevice::issue() {
  make_current();
  if (!in_step_ || capturing_) return;
  HG_CUDA_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  capture_kernels_ = cuda::launches_issued().load(std::memory_order_relaxed);
  capture_blas_ = counters_.launches;
  capture_copies_ = 0;
}

void CudaDevice::flush_capture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t g = nullptr;
  HG_CUDA_CHECK(cudaStreamEndCapture(compute_, &g));
  const uint64_t launches = captured_launches();
  launches_in_graphs_ += launches;
  if (launches + capture_copies_ == 0) {  // nothing was captured
    HG_CUDA_CHECK(cudaGraphDestroy(g));
    return;
  }
  if (static_cast<size_t>(segment_) >= graph_execs_.size()) graph_execs_.resize(static_cast<size_t>(segment_) + 1);
  cudaGraphExec_t& exec = graph_execs_[static_cast<size_t>(segment_)];
  if (exec) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec, g, &info) != cudaSuccess) {  // other nodes: instantiate anew
      cudaGetLastError();
      HG_CUDA_CHECK(cudaGraphExecDestroy(exec));
      exec = nullptr;
    }
  }
  if (!exec) HG_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  HG_CUDA_CHECK(cudaGraphDestroy(g));
  HG_CUDA_CHECK(cudaGraphLaunch(exec, compute_));
  ++counters_.graph_launches;
  ++segment_;
}

void CudaDevice::abort_capture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(compute_, &g) == cudaSuccess && g) cudaGraphDestroy(g);
  cudaGetLastError();
  launches_in_graphs_ += captured_launches();  // never launched: not counted either
}

uint64_t CudaDevice::captured_launches() const {
  return cuda::launches_issued().load(std::memory_order_relaxed) - capture_kernels_ + (counters_.launches - capture_blas_);
}

void CudaDevice::make_current() const {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != gpu_) HG_CUDA_CHECK(cudaSetDevice(gpu_));
}

// ---- memory ----

DeviceMemory CudaDevice::memory() const {
  make_current();
  size_t free_b = 0, total_b = 0;
  HG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {free_b, total_b, /*host=*/false};
}

void* CudaDevice::alloc(size_t bytes) {
  make_current();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 256));
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of the allocation failure
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error(std::string(kDeviceKind) + ":" + std::to_string(gpu_) + ": cannot allocate " + std::to_string(bytes) +
                " bytes (" + cudaGetErrorString(e) + "; " + gib(free_b) + " free of " + gib(total_b) + ")");
  }
  return p;
}

void CudaDevice::free(void* ptr) {
  if (!ptr) return;
  flush_capture();
  make_current();
  HG_CUDA_CHECK(cudaFree(ptr));  // implicitly waits for work that may still use it
}

void CudaDevice::copy_to_device(void* dst, const void* src_host, size_t bytes) {
  if (bytes == 0) return;
  flush_capture();
  make_current();
  // From pageable memory the call returns once the source is staged, so the caller may reuse
  // it at once; from pinned memory the copy is truly asynchronous, so wait for it.
  // Either way the host waits for the device once.
  HG_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, compute_));
  counters_.h2d_bytes += bytes;
  if (pinned(src_host))
    sync_stream(compute_);
  else
    ++counters_.syncs;
}

void CudaDevice::queue_to_host(void* dst_host, const void* src, size_t bytes) {
  flush_capture();
  make_current();
  HG_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, compute_));
  counters_.d2h_bytes += bytes;
}

void CudaDevice::copy_to_host(void* dst_host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  queue_to_host(dst_host, src, bytes);
  sync_stream(compute_);
}

void CudaDevice::copy_to_host_async(void* dst_host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (pinned(dst_host)) {  // into pinned memory: a copy node inside a capture
    issue_node();
    HG_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, compute_));
    counters_.d2h_bytes += bytes;
    return;
  }
  queue_to_host(dst_host, src, bytes);
  sync_stream(compute_);  // into pageable memory the runtime waits for the copy
}

void CudaDevice::synchronize() {
  make_current();
  sync_stream(copy_);
  sync_stream(compute_);
}

void* CudaDevice::grow(Scratch& s, size_t bytes) {
  if (bytes <= s.bytes) return s.ptr;
  sync_stream(compute_);  // the old buffer may be in use
  if (s.ptr) HG_CUDA_CHECK(cudaFree(s.ptr));
  s.ptr = nullptr;
  s.bytes = 0;
  const size_t want = bytes + bytes / 4;  // headroom: contexts grow a token at a time
  s.ptr = alloc(want);
  s.bytes = want;
  return s.ptr;
}

// The same array staged again (every layer's RoPE takes the step's positions) reuses the slot
// that holds it: the slot's device copy stays valid until the slot is restaged, and every reader
// is on `compute`, in order with that restaging. A slot is restaged only once its copy has run:
// known without a wait when the host has waited for the compute stream since (every decode step
// ends with the logits' copy), so a decode step stages its ids and positions without a sync.
const int32_t* CudaDevice::stage_ints(const int32_t* host, int n) {
  const size_t n_bytes = sizeof(int32_t) * static_cast<size_t>(std::max(n, 0));
  for (int back = 1; back <= kStageSlots; ++back) {
    const StageSlot& s = stage_[static_cast<size_t>((stage_next_ - back + kStageSlots) % kStageSlots)];
    if (s.n == n && s.host && std::memcmp(s.host, host, n_bytes) == 0) return static_cast<const int32_t*>(s.dev);
  }
  StageSlot& slot = stage_[static_cast<size_t>(stage_next_)];
  stage_next_ = (stage_next_ + 1) % kStageSlots;
  const size_t bytes = sizeof(int32_t) * static_cast<size_t>(std::max(n, 1));
  if (slot.n >= 0 && slot.epoch == compute_syncs_) {  // its copy may not have run yet
    if (slot.in_graph)
      sync_stream(compute_);  // copied by a graph: no event marks it
    else
      sync_event(slot.done);
  }
  slot.n = -1;
  if (bytes > slot.bytes) {
    sync_stream(compute_);
    if (slot.host) HG_CUDA_CHECK(cudaFreeHost(slot.host));
    if (slot.dev) HG_CUDA_CHECK(cudaFree(slot.dev));
    slot.host = nullptr;
    slot.dev = nullptr;
    slot.bytes = 0;
    const size_t cap = std::max(bytes, kStageBytes);
    HG_CUDA_CHECK(cudaMallocHost(&slot.host, cap));
    slot.dev = alloc(cap);
    slot.bytes = cap;
  }
  std::memcpy(slot.host, host, n_bytes);
  HG_CUDA_CHECK(cudaMemcpyAsync(slot.dev, slot.host, n_bytes, cudaMemcpyHostToDevice, compute_));
  counters_.h2d_bytes += n_bytes;
  slot.in_graph = capturing_;
  if (capturing_)
    ++capture_copies_;
  else
    HG_CUDA_CHECK(cudaEventRecord(slot.done, compute_));
  slot.n = n;
  slot.epoch = compute_syncs_;
  return static_cast<const int32_t*>(slot.dev);
}

const float* CudaDevice::rope_table(const RopeParams& p) {
  const auto same = [&](const RopeParams& o) {
    return o.rotary_dim == p.rotary_dim && o.theta == p.theta && o.scaling.llama3 == p.scaling.llama3 &&
           o.scaling.factor == p.scaling.factor && o.scaling.low_freq_factor == p.scaling.low_freq_factor &&
           o.scaling.high_freq_factor == p.scaling.high_freq_factor &&
           o.scaling.original_max_position == p.scaling.original_max_position;
  };
  const size_t half = static_cast<size_t>(std::max(p.rotary_dim, 0) / 2);
  const auto same_factors = [&](const std::vector<float>& f) {  // by value: no allocation per call
    return p.freq_factors == nullptr ? f.empty() : f.size() == half && std::equal(f.begin(), f.end(), p.freq_factors);
  };
  for (const auto& t : rope_tables_)
    if (same(t.params) && same_factors(t.freq_factors)) return t.inv_freq;
  if (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    throw Error("rope: rotary_dim " + std::to_string(p.rotary_dim) + " must be even and at most head_dim " +
                std::to_string(p.head_dim));
  flush_capture();  // the table crosses from pageable memory, once per model
  // The same host function as the CPU device, so both rotate by identical fp32 frequencies.
  std::vector<float> inv(static_cast<size_t>(p.rotary_dim / 2));
  cpu::rope_inv_freq(p.rotary_dim, p.theta, p.scaling.llama3, p.scaling.factor, p.scaling.low_freq_factor,
                     p.scaling.high_freq_factor, p.scaling.original_max_position, p.freq_factors, inv.data());
  RopeTable t;
  t.params = p;
  t.params.freq_factors = nullptr;  // the caller's pointer may not outlive this call; keep a copy
  if (p.freq_factors != nullptr) t.freq_factors.assign(p.freq_factors, p.freq_factors + half);
  t.inv_freq = static_cast<float*>(alloc(sizeof(float) * inv.size()));
  HG_CUDA_CHECK(cudaMemcpyAsync(t.inv_freq, inv.data(), sizeof(float) * inv.size(), cudaMemcpyHostToDevice, compute_));
  counters_.h2d_bytes += sizeof(float) * inv.size();
  sync_stream(compute_);  // `inv` dies here; once per model
  rope_tables_.push_back(t);
  return t.inv_freq;
}

// ---- weights ----

uint64_t CudaDevice::stored_bytes(const TensorView& t) const {
  if (!t.present()) return 0;
  const int64_t cols = t.cols();
  if (t.shape.size() < 2) return sizeof(float) * static_cast<uint64_t>(cols);  // vectors: fp32
  const int64_t rows = t.numel() / std::max<int64_t>(cols, 1);
  const uint64_t row =
      expanded_to_bf16(t.dtype) ? sizeof(uint16_t) * static_cast<uint64_t>(cols) : dtype_row_bytes(t.dtype, cols);
  return row * static_cast<uint64_t>(rows);
}

void* CudaDevice::upload_matrix(const TensorView& t, int64_t rows, int64_t cols, DType* stored) {
  const bool quantized = expanded_to_bf16(t.dtype);
  *stored = quantized ? DType::BF16 : t.dtype;
  const size_t row_bytes = quantized ? sizeof(uint16_t) * static_cast<size_t>(cols) : dtype_row_bytes(t.dtype, cols);
  const size_t total = row_bytes * static_cast<size_t>(rows);
  if (!quantized && t.nbytes < total)
    throw Error("tensor '" + t.name + "': " + std::to_string(t.nbytes) + " bytes, expected " + std::to_string(total));
  if (row_bytes > kUploadChunk)
    throw Error("tensor '" + t.name + "': rows of " + std::to_string(row_bytes) + " bytes exceed the upload chunk");
  auto* dst = static_cast<uint8_t*>(alloc(total));
  const int64_t rows_per_chunk = static_cast<int64_t>(kUploadChunk / row_bytes);
  std::vector<float> row_f32(quantized ? static_cast<size_t>(cols) : 0);
  int buf = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk, buf ^= 1) {
    const int64_t nr = std::min(rows_per_chunk, rows - r0);
    auto* host = static_cast<uint8_t*>(upload_host_[static_cast<size_t>(buf)]);
    sync_event(upload_done_[static_cast<size_t>(buf)]);  // buffer free again
    if (quantized) {
      auto* out = reinterpret_cast<uint16_t*>(host);
      for (int64_t r = 0; r < nr; ++r) {
        cpu::dequantize_row(t.dtype, t.data, cols, r0 + r, row_f32.data());
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = cpu::fp32_to_bf16(row_f32[static_cast<size_t>(c)]);
      }
    } else {
      std::memcpy(host, static_cast<const uint8_t*>(t.data) + static_cast<size_t>(r0) * row_bytes,
                  static_cast<size_t>(nr) * row_bytes);
    }
    HG_CUDA_CHECK(cudaMemcpyAsync(dst + static_cast<size_t>(r0) * row_bytes, host, static_cast<size_t>(nr) * row_bytes,
                                  cudaMemcpyHostToDevice, copy_));
    counters_.h2d_bytes += static_cast<size_t>(nr) * row_bytes;
    HG_CUDA_CHECK(cudaEventRecord(upload_done_[static_cast<size_t>(buf)], copy_));
  }
  weight_bytes_ += total;
  return dst;
}

DeviceTensor CudaDevice::upload_weight(const TensorView& t) {
  DeviceTensor d;
  if (!t.present()) return d;
  flush_capture();
  make_current();
  d.cols = t.cols();
  d.rows = t.shape.size() >= 2 ? t.numel() / t.cols() : 1;
  if (t.shape.size() >= 2) {
    d.data = upload_matrix(t, d.rows, d.cols, &d.dtype);
  } else {
    std::vector<float> host(static_cast<size_t>(d.cols));
    cpu::dequantize_row(t.dtype, t.data, d.cols, 0, host.data());
    d.dtype = DType::F32;
    void* dst = alloc(sizeof(float) * host.size());
    HG_CUDA_CHECK(cudaMemcpyAsync(dst, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice, copy_));
    counters_.h2d_bytes += sizeof(float) * host.size();
    sync_stream(copy_);  // `host` dies here; vectors are small
    weight_bytes_ += sizeof(float) * host.size();
    d.data = dst;
  }
  weights_.push_back(const_cast<void*>(d.data));
  // Every op issued after this on the compute stream sees the weight.
  HG_CUDA_CHECK(cudaEventRecord(uploaded_, copy_));
  HG_CUDA_CHECK(cudaStreamWaitEvent(compute_, uploaded_, 0));
  return d;
}

// ---- timing ----

int CudaDevice::timing_mark(bool copy_stream) {
  flush_capture();
  make_current();
  if (timing_.empty()) {
    timing_.resize(kTimingEvents);
    timing_seq_.assign(kTimingEvents, 0);
    timing_stream_.assign(kTimingEvents, 0);
    for (auto& e : timing_) HG_CUDA_CHECK(cudaEventCreate(&e));
  }
  const int handle = timing_next_;
  timing_next_ = (timing_next_ + 1) % kTimingEvents;
  const auto h = static_cast<size_t>(handle);
  HG_CUDA_CHECK(cudaEventRecord(timing_[h], copy_stream ? copy_ : compute_));
  const size_t stream = copy_stream ? 1 : 0;
  timing_seq_[h] = timing_seq_next_++;
  timing_stream_[h] = static_cast<uint8_t>(stream);
  recorded_seq_[stream] = timing_seq_[h];
  return handle;
}

// Marks on one stream complete in the order they were recorded: a wait for the latest covers
// every earlier one, so a step's per-layer durations cost one wait, not two per layer.
void CudaDevice::sync_mark(int handle) {
  const auto h = static_cast<size_t>(handle);
  const size_t stream = timing_stream_[h];
  if (timing_seq_[h] <= done_seq_[stream]) return;
  sync_event(timing_[h]);
  done_seq_[stream] = std::max(done_seq_[stream], timing_seq_[h]);
}

double CudaDevice::timing_elapsed_ms(int begin, int end) {
  if (begin < 0 || end < 0 || begin >= static_cast<int>(timing_.size()) || end >= static_cast<int>(timing_.size()))
    return -1.0;
  make_current();
  sync_mark(end);
  sync_mark(begin);
  float ms = 0.0f;
  HG_CUDA_CHECK(cudaEventElapsedTime(&ms, timing_[static_cast<size_t>(begin)], timing_[static_cast<size_t>(end)]));
  return ms;
}

}  // namespace HG_CUDA_BACKEND

// ---- entry points (device.h) ----

#ifdef HG_CUDA_EMU

std::unique_ptr<Device> make_cuda_emu_device(int gpu) {
  if (gpu != 0) throw Error("--gpu " + std::to_string(gpu) + ": no such GPU; the emulated device has one: 0");
  return std::make_unique<CudaDevice>(gpu);
}

#else

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: not an error for the caller, just none
    return 0;
  }
  return count;
}

std::unique_ptr<Device> make_cuda_device(int gpu) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(std::string("--device cuda: no CUDA GPU found (") +
                (e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices") + ")");
  }
  if (gpu < 0 || gpu >= count) {
    std::string list;
    for (int i = 0; i < count; ++i) list += (i ? "; " : "") + describe_gpu(i);
    throw Error("--gpu " + std::to_string(gpu) + ": no such GPU; this machine has " + std::to_string(count) + ": " + list);
  }
  return std::make_unique<CudaDevice>(gpu);
}

#endif

}  // namespace hg
