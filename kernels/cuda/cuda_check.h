// Error checks for CUDA runtime and cuBLAS calls: a failure becomes an hg::Error naming the call
// site, so a bad launch or an out-of-memory reaches `main` as one clear line.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "hybridgen/error.h"
#include "kernels/cuda/backend.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  throw Error(std::string("cuda: ") + what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
              ") at " + file + ":" + std::to_string(line));
}

[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* what, const char* file, int line) {
  throw Error(std::string("cublas: ") + what + " failed: " + cublasGetStatusName(s) + " (" +
              cublasGetStatusString(s) + ") at " + file + ":" + std::to_string(line));
}

// Kernel launches issued through this backend's launchers (HG_CUDA_CHECK_LAUNCH follows every
// launch): CudaDevice reports the difference as DeviceCounters::launches.
inline std::atomic<uint64_t>& launches_issued() {
  static std::atomic<uint64_t> count{0};
  return count;
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda

#define HG_CUDA_CHECK(call)                                                       \
  do {                                                                            \
    const cudaError_t hg_err_ = (call);                                           \
    if (hg_err_ != cudaSuccess) ::hg::cuda::throw_cuda(hg_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: counts it, and reports bad launch configurations at once (not at the
// next sync).
#define HG_CUDA_CHECK_LAUNCH(name)                                                         \
  do {                                                                                     \
    ::hg::cuda::launches_issued().fetch_add(1, std::memory_order_relaxed);                 \
    const cudaError_t hg_err_ = cudaGetLastError();                                        \
    if (hg_err_ != cudaSuccess) ::hg::cuda::throw_cuda(hg_err_, name, __FILE__, __LINE__); \
  } while (0)

#define HG_CUBLAS_CHECK(call)                                                     \
  do {                                                                            \
    const cublasStatus_t hg_st_ = (call);                                         \
    if (hg_st_ != CUBLAS_STATUS_SUCCESS) ::hg::cuda::throw_cublas(hg_st_, #call, __FILE__, __LINE__); \
  } while (0)
