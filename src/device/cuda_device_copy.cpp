// CudaDevice's device -> device copies (on `compute`, in order with the ops) and its copy stream
// for streamed KV (the offload policy): host -> device copies queued on
// `copy`, fences as events recorded on it (a ring of kCopyFences), and the two joins: compute
// waits for a fence, later copies wait for the compute work issued so far (double buffering).
// Copies from pageable host memory are staged by the driver; HostStore arenas registered for DMA
// (mem::DmaRegistrar) copy asynchronously. Host callbacks (the hybrid policies' pipeline) are
// queued on `compute` too; copies to and from pinned memory and the callbacks are captured into
// the decode step's graphs.
#include <spdlog/spdlog.h>

#include "device/cuda_device.h"
#include "hybridgen/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg {
inline namespace HG_CUDA_BACKEND {

bool CudaDevice::HostRegistrar::register_range(void* addr, size_t bytes) {
  device_.make_current();
  const cudaError_t e = cudaHostRegister(addr, bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (!warned_)
      spdlog::warn("{}: cannot pin host KV memory for DMA ({}); its copies go through the driver's staging",
                   device_.name(), cudaGetErrorString(e));
    warned_ = true;
    return false;
  }
  ranges_.insert(addr);
  bytes_ += bytes;
  return true;
}

void CudaDevice::HostRegistrar::unregister_range(void* addr, size_t bytes) {
  if (ranges_.erase(addr) == 0) return;  // never pinned
  // Called from arena destructors: an error (the process unwinding from a CUDA failure) is left
  // for the next checked call rather than thrown here.
  cudaSetDevice(device_.gpu());
  if (cudaHostUnregister(addr) != cudaSuccess) cudaGetLastError();
  bytes_ -= bytes;
}

void CudaDevice::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  issue_node();
  HG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_));
}

void CudaDevice::gather_ring_rows(const RingRows& r, void* dst) {
  if (!r.src[0] || !r.src[1]) return Device::gather_ring_rows(r, dst);  // one source: copies
  if (r.n <= 0 || r.blocks <= 0) return;
  if (r.ring_slots <= 0 || r.n > r.ring_slots || r.ring_head < 0 || r.ring_head >= r.ring_slots)
    throw Error("gather_ring_rows: " + std::to_string(r.n) + " rows from head " + std::to_string(r.ring_head) +
                " of a ring of " + std::to_string(r.ring_slots));
  issue();
  cuda::gather_ring_rows(r, dst, compute_);
}

void CudaDevice::copy_to_device_async(void* dst, const void* src_host, size_t bytes) {
  if (bytes == 0) return;
  flush_capture();
  make_current();
  HG_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, copy_));
  counters_.h2d_bytes += bytes;
  // From pageable memory the runtime synchronizes the copy stream before it stages the source.
  if (!pinned(src_host)) ++counters_.syncs;
}

int64_t CudaDevice::copy_fence() {
  flush_capture();
  make_current();
  if (copy_fences_.empty()) {
    copy_fences_.resize(kCopyFences);
    for (auto& e : copy_fences_) HG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  const int64_t f = copy_fence_next_++;
  HG_CUDA_CHECK(cudaEventRecord(copy_fences_[static_cast<size_t>(f % kCopyFences)], copy_));
  return f;
}

void CudaDevice::wait_copy_fence(int64_t f) {
  if (f < 0 || copy_fences_.empty()) return;
  if (f < copy_fence_next_ - kCopyFences) throw Error("cuda copy fence " + std::to_string(f) + " was recycled");
  flush_capture();
  make_current();
  HG_CUDA_CHECK(cudaStreamWaitEvent(compute_, copy_fences_[static_cast<size_t>(f % kCopyFences)], 0));
}

void CudaDevice::copy_to_device_queued(void* dst, const void* src_host, size_t bytes) {
  if (bytes == 0) return;
  if (!pinned(src_host)) return copy_to_device(dst, src_host, bytes);
  issue_node();  // from pinned memory: a copy node inside a capture
  HG_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, compute_));
  counters_.h2d_bytes += bytes;
}

void CudaDevice::host_callback(HostCallback fn, void* arg) {
  if (!host_callbacks_) {  // turned off: the host waits for the work before it, then calls fn
    sync_stream(compute_);
    return fn(arg);
  }
  issue_node();
  HG_CUDA_CHECK(cudaLaunchHostFunc(compute_, fn, arg));
}

int64_t CudaDevice::compute_fence() {
  flush_capture();
  make_current();
  if (compute_fences_.empty()) {
    compute_fences_.resize(kCopyFences);
    compute_fence_epoch_.resize(kCopyFences);
    for (auto& e : compute_fences_) HG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  const int64_t f = compute_fence_next_++;
  const auto at = static_cast<size_t>(f % kCopyFences);
  HG_CUDA_CHECK(cudaEventRecord(compute_fences_[at], compute_));
  compute_fence_epoch_[at] = compute_syncs_;
  return f;
}

void CudaDevice::wait_compute_fence(int64_t f) {
  if (f < compute_fences_passed_ || compute_fences_.empty()) return;  // f < 0 too: none
  if (f < compute_fence_next_ - kCopyFences) throw Error("cuda compute fence " + std::to_string(f) + " was recycled");
  if (f >= compute_fence_next_) throw Error("cuda compute fence " + std::to_string(f) + " was never recorded");
  const auto at = static_cast<size_t>(f % kCopyFences);
  if (compute_syncs_ > compute_fence_epoch_[at]) return;  // the host waited for the whole stream since
  make_current();
  const cudaError_t done = cudaEventQuery(compute_fences_[at]);
  if (done == cudaSuccess) return;
  if (done != cudaErrorNotReady) HG_CUDA_CHECK(done);
  sync_event(compute_fences_[at]);
}

void CudaDevice::copies_after_compute() {
  flush_capture();
  make_current();
  if (!compute_done_) HG_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
  HG_CUDA_CHECK(cudaEventRecord(compute_done_, compute_));
  HG_CUDA_CHECK(cudaStreamWaitEvent(copy_, compute_done_, 0));
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg
