// RMSNorm and LayerNorm over fp32 rows: one block per row, the row is read once into registers
// (strided by the block), reduced with warp shuffles, then scaled. The sums are fp32 tree
// reductions, within ~1e-6 relative of the CPU twins' double sums (kernels/cpu/norm_cpu.cpp).
// LayerNorm uses the two-pass (x - mean)² variance like its twin, not E[x²] - mean².
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(const float* x, const float* __restrict__ weight,
                                                           float eps, int dim, float* y) {
  HG_SHARED(float, shared, 32);
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) sum_sq += xr[i] * xr[i];
  sum_sq = block_sum(sum_sq, shared);
  const float inv = rsqrtf(sum_sq / static_cast<float>(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) yr[i] = xr[i] * inv * weight[i];
}

__global__ void __launch_bounds__(kThreads) layernorm_kernel(const float* x, const float* __restrict__ weight,
                                                             const float* __restrict__ bias, float eps, int dim,
                                                             float* y) {
  HG_SHARED(float, shared, 32);
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) sum += xr[i];
  const float mean = block_sum(sum, shared) / static_cast<float>(dim);
  float var = 0.0f;
  for (int i = threadIdx.x; i < dim; i += kThreads) var += (xr[i] - mean) * (xr[i] - mean);
  var = block_sum(var, shared) / static_cast<float>(dim);
  const float inv = rsqrtf(var + eps);
  for (int i = threadIdx.x; i < dim; i += kThreads) yr[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float eps, int n, int dim, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  HG_LAUNCH(n, kThreads, 0, stream, rmsnorm_kernel)(x, weight, eps, dim, y);
  HG_CUDA_CHECK_LAUNCH("rmsnorm_kernel");
}

void layernorm(const float* x, const float* weight, const float* bias, float eps, int n, int dim, float* y,
               cudaStream_t stream) {
  if (n <= 0) return;
  HG_LAUNCH(n, kThreads, 0, stream, layernorm_kernel)(x, weight, bias, eps, dim, y);
  HG_CUDA_CHECK_LAUNCH("layernorm_kernel");
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
