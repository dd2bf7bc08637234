// Device-side helpers shared by the kernels: element conversions for the three storage types
// (fp32, f16, bf16), pair loads, warp/block reductions, and the one place where a runtime DType
// becomes a template argument (dispatch_float_type).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "hybridgen/dtype.h"
#include "hybridgen/error.h"
#include "kernels/cuda/backend.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// Round to nearest even, like the CPU twins' fp32_to_f16 / fp32_to_bf16.
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Two consecutive elements (p must be aligned to two elements) as a float2: one 4-byte load for
// 16-bit types, one 8-byte load for fp32.
__device__ __forceinline__ float2 load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }
__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `shared` holds 32 floats; the trailing barrier lets the caller reuse it at once.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < n_warps ? shared[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// Calls f(T{}) with T the C++ type of a plain float dtype (f32, f16, bf16); throws otherwise.
// (The kernels library links nothing of hybridgen_core, hence no dtype_name here: callers check
// dtypes first and give the readable message.)
template <typename F>
void dispatch_float_type(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F16: f(__half{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
    default:
      throw Error(std::string(what) + ": dtype #" + std::to_string(static_cast<int>(t)) +
                  " is not supported by this CUDA kernel (f32, f16, bf16 only)");
  }
}

inline unsigned blocks_for(int64_t count, int threads, int64_t max_blocks = 65536) {
  int64_t b = (count + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < max_blocks ? b : max_blocks);
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
