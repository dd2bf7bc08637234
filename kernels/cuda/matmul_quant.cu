// Weights held in their GGUF blocks (quant.cuh), dequantized in registers:
//
//  - matmul_quantized: y[n, rows] (+)= x[n, cols] · Wᵀ for the few rows of a decode step. One warp
//    per weight row; lane l dequantizes groups l, l + 32, ... of the row (consecutive lanes read
//    consecutive blocks, so a warp streams the row once) and multiplies each group's 32 values by
//    the n input rows, read through the read-only cache; a warp sum per input row. The weights
//    cross HBM once per step at their stored size, which is what decode is bound by.
//  - dequantize_rows_bf16: rows [r0, r0 + n_rows) expanded to bf16, one group per thread: the
//    tiles a prefill GEMM (cuBLAS) runs on.
//  - embed_quantized: the rows of the ids dequantized to fp32, one block per id.
//
// Twins: cpu::dequantize_row (a row's values), then the dot in fp32 (matmul) or the rounding to
// bf16 (dequantize_rows_bf16).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/quant.cuh"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

constexpr int kWarpsPerBlock = 4;  // rows per block of matmul_quantized

template <class Q>
__device__ __forceinline__ void load_group(const uint8_t* row, int64_t g, float* v) {
  Q::group(row + (g / Q::kGroups) * Q::kBytes, static_cast<int>(g % Q::kGroups), v);
}

// Bytes of a weight row of `cols` values in Q's blocks (32 * kGroups values per kBytes block).
template <class Q>
int64_t quant_row_bytes(int64_t cols) {
  return cols / (32 * Q::kGroups) * Q::kBytes;
}

template <class Q, int N>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matmul_quantized_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols, int64_t row_bytes,
                            const float* __restrict__ x, float* y, bool accumulate) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;  // the whole warp: r is the warp's
  const uint8_t* row = w + r * row_bytes;
  const int64_t groups = cols / 32;
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = 0.0f;
  for (int64_t g = lane; g < groups; g += 32) {
    float v[32];
    load_group<Q>(row, g, v);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float4* xi = reinterpret_cast<const float4*>(x + i * cols + g * 32);
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 xx = __ldg(xi + j);
        s += v[4 * j] * xx.x + v[4 * j + 1] * xx.y + v[4 * j + 2] * xx.z + v[4 * j + 3] * xx.w;
      }
      acc[i] += s;
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float s = warp_sum(acc[i]);
    if (lane == 0) y[i * rows + r] = accumulate ? y[i * rows + r] + s : s;
  }
}

template <class Q>
__global__ void dequantize_bf16_kernel(const uint8_t* __restrict__ w, int64_t cols, int64_t row_bytes, int64_t r0,
                                       int64_t n_groups, __nv_bfloat16* __restrict__ out) {
  const int64_t groups = cols / 32;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n_groups;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / groups, g = t % groups;
    float v[32];
    load_group<Q>(w + (r0 + r) * row_bytes, g, v);
    __nv_bfloat16* o = out + r * cols + g * 32;
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = from_float<__nv_bfloat16>(v[j]);
  }
}

template <class Q>
__global__ void embed_quantized_kernel(const uint8_t* __restrict__ table, int64_t cols, int64_t row_bytes,
                                       const int32_t* __restrict__ ids, float* __restrict__ out) {
  const uint8_t* row = table + static_cast<int64_t>(ids[blockIdx.x]) * row_bytes;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * cols;
  for (int64_t g = threadIdx.x; g < cols / 32; g += blockDim.x) {
    float v[32];
    load_group<Q>(row, g, v);
#pragma unroll
    for (int j = 0; j < 32; ++j) dst[g * 32 + j] = v[j];
  }
}

template <class Q, int N>
void launch_matmul(const void* w, int64_t rows, int64_t cols, const float* x, int n, float* y, bool accumulate,
                   cudaStream_t stream) {
  if constexpr (N > 1) {
    if (n < N) return launch_matmul<Q, N - 1>(w, rows, cols, x, n, y, accumulate, stream);
  }
  const int64_t row_bytes = quant_row_bytes<Q>(cols);
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  HG_LAUNCH(blocks, kWarpsPerBlock * 32, 0, stream, matmul_quantized_kernel<Q, N>)(
      static_cast<const uint8_t*>(w), rows, cols, row_bytes, x, y, accumulate);
}

template <class Q>
void check_shape(const char* what, int64_t cols) {
  if (cols <= 0 || cols % (32 * Q::kGroups) != 0)
    throw Error(std::string(what) + ": " + std::to_string(cols) + " columns is not a whole number of " +
                std::to_string(32 * Q::kGroups) + "-value blocks");
}

}  // namespace

void matmul_quantized(DType wt, const void* w, int64_t rows, int64_t cols, const float* x, int n, float* y,
                      bool accumulate, cudaStream_t stream) {
  if (n <= 0 || rows <= 0) return;
  if (n > kQuantizedMatmulMaxRows)
    throw Error("matmul_quantized: " + std::to_string(n) + " input rows > " + std::to_string(kQuantizedMatmulMaxRows));
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) throw Error("matmul_quantized: the input is not 16-byte aligned");
  dispatch_quant_type(wt, "matmul_quantized", [&](auto q) {
    using Q = decltype(q);
    check_shape<Q>("matmul_quantized", cols);
    launch_matmul<Q, kQuantizedMatmulMaxRows>(w, rows, cols, x, n, y, accumulate, stream);
  });
  HG_CUDA_CHECK_LAUNCH("matmul_quantized_kernel");
}

void dequantize_rows_bf16(DType wt, const void* w, int64_t cols, int64_t r0, int64_t n_rows, void* out,
                          cudaStream_t stream) {
  if (n_rows <= 0) return;
  const int64_t n_groups = n_rows * (cols / 32);
  dispatch_quant_type(wt, "dequantize_rows_bf16", [&](auto q) {
    using Q = decltype(q);
    check_shape<Q>("dequantize_rows_bf16", cols);
    const int64_t row_bytes = quant_row_bytes<Q>(cols);
    HG_LAUNCH(blocks_for(n_groups, 256), 256, 0, stream, dequantize_bf16_kernel<Q>)(
        static_cast<const uint8_t*>(w), cols, row_bytes, r0, n_groups, static_cast<__nv_bfloat16*>(out));
  });
  HG_CUDA_CHECK_LAUNCH("dequantize_bf16_kernel");
}

void embed_quantized(DType wt, const void* table, int64_t cols, const int32_t* ids, int n, float* out,
                     cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_quant_type(wt, "embed_quantized", [&](auto q) {
    using Q = decltype(q);
    check_shape<Q>("embed_quantized", cols);
    const int64_t row_bytes = quant_row_bytes<Q>(cols);
    HG_LAUNCH(n, 128, 0, stream, embed_quantized_kernel<Q>)(static_cast<const uint8_t*>(table), cols, row_bytes, ids,
                                                            out);
  });
  HG_CUDA_CHECK_LAUNCH("embed_quantized_kernel");
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
