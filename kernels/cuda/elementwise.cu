// Elementwise activations, residual adds, bias adds and the fp32 -> f16/bf16 conversion of GEMM
// inputs. Grid-stride loops over coalesced fp32 elements: these ops are a few percent of a step
// next to the weight reads, so they stay simple. silu uses expf (not __expf) to track the twin
// (kernels/cpu/elementwise_cpu.cpp) closely.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

constexpr int kThreads = 256;

#define HG_GRID_STRIDE(i, count)                                                                   \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (count); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void silu_mul_kernel(float* gate, const float* __restrict__ up, int64_t count) {
  HG_GRID_STRIDE(i, count) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void relu_kernel(float* x, int64_t count) {
  HG_GRID_STRIDE(i, count) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void add_kernel(float* y, const float* x, int64_t count) {
  HG_GRID_STRIDE(i, count) y[i] += x[i];
}

__global__ void add_bias_kernel(float* y, const float* __restrict__ bias, int64_t count, int dim) {
  HG_GRID_STRIDE(i, count) y[i] += bias[i % dim];
}

template <typename T>
__global__ void convert_kernel(const float* __restrict__ x, int64_t count, T* __restrict__ y) {
  HG_GRID_STRIDE(i, count) y[i] = from_float<T>(x[i]);
}

#undef HG_GRID_STRIDE

}  // namespace

void silu_mul(float* gate, const float* up, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  HG_LAUNCH(blocks_for(count, kThreads), kThreads, 0, stream, silu_mul_kernel)(gate, up, count);
  HG_CUDA_CHECK_LAUNCH("silu_mul_kernel");
}

void relu(float* x, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  HG_LAUNCH(blocks_for(count, kThreads), kThreads, 0, stream, relu_kernel)(x, count);
  HG_CUDA_CHECK_LAUNCH("relu_kernel");
}

void add(float* y, const float* x, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  HG_LAUNCH(blocks_for(count, kThreads), kThreads, 0, stream, add_kernel)(y, x, count);
  HG_CUDA_CHECK_LAUNCH("add_kernel");
}

void add_bias(float* y, const float* bias, int n, int dim, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(n) * dim;
  if (count <= 0) return;
  HG_LAUNCH(blocks_for(count, kThreads), kThreads, 0, stream, add_bias_kernel)(y, bias, count, dim);
  HG_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

void convert_from_f32(const float* x, int64_t count, DType to, void* y, cudaStream_t stream) {
  if (count <= 0) return;
  dispatch_float_type(to, "convert_from_f32", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(blocks_for(count, kThreads), kThreads, 0, stream, convert_kernel<T>)(x, count, static_cast<T*>(y));
  });
  HG_CUDA_CHECK_LAUNCH("convert_kernel");
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
