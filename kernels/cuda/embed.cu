// Embedding lookup: one block per token row, threads stride over the columns, so each row is
// one coalesced read. The table keeps its storage type (f32/f16/bf16; quantized tables are
// expanded to bf16 at upload); ids are bounds-checked on the host before the launch.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

namespace {

template <typename T>
__global__ void embed_kernel(const T* __restrict__ table, int64_t cols, const int32_t* __restrict__ ids,
                             float* __restrict__ out) {
  const int64_t row = blockIdx.x;
  const T* src = table + static_cast<int64_t>(ids[row]) * cols;
  float* dst = out + row * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = to_float(src[c]);
}

}  // namespace

void embed(DType table_dtype, const void* table, int64_t cols, const int32_t* ids, int n, float* out,
           cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_float_type(table_dtype, "embed", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(n, 256, 0, stream, embed_kernel<T>)(static_cast<const T*>(table), cols, ids, out);
  });
  HG_CUDA_CHECK_LAUNCH("embed_kernel");
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
