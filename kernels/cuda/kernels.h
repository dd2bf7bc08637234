// Host-side launchers of the CUDA kernels. Raw device pointers, sizes and a stream; they know
// nothing of models. Each has a CPU twin in kernels/cpu/ with the same math (named beside it),
// which is its test oracle. Every launcher checks the launch and throws hg::Error on failure.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cuda/backend.h"
#include "kernels/device_tokens.h"
#include "kernels/kv_layout.h"

namespace hg::cuda {
inline namespace HG_CUDA_BACKEND {

// embed.cu — twin: cpu::dequantize_row per id.  out[i, :] = table[ids[i], :]  (table f32/f16/bf16)
void embed(DType table_dtype, const void* table, int64_t cols, const int32_t* ids, int n, float* out,
           cudaStream_t stream);

// norm.cu — twins: cpu::rmsnorm_rows, cpu::layernorm_rows.  x, y: [n, dim] (y may alias x)
void rmsnorm(const float* x, const float* weight, float eps, int n, int dim, float* y, cudaStream_t stream);
void layernorm(const float* x, const float* weight, const float* bias, float eps, int n, int dim, float* y,
               cudaStream_t stream);

// rope.cu — twin: cpu::rope_rows.  x: [n, n_heads, head_dim] in place; pos: [n]; inv_freq: [rotary_dim / 2]
void rope(float* x, const int32_t* pos, int n, int n_heads, int head_dim, int rotary_dim, const float* inv_freq,
          bool interleaved, cudaStream_t stream);

// elementwise.cu — twins: cpu::silu_mul_range, relu_range, add_range, add_bias_rows.
void silu_mul(float* gate, const float* up, int64_t count, cudaStream_t stream);
void relu(float* x, int64_t count, cudaStream_t stream);
void add(float* y, const float* x, int64_t count, cudaStream_t stream);
void add_bias(float* y, const float* bias, int n, int dim, cudaStream_t stream);
// y = x rounded to nearest even in `to` (F16 or BF16): GEMM inputs for 16-bit weights.
void convert_from_f32(const float* x, int64_t count, DType to, void* y, cudaStream_t stream);

// matmul_quant.cu — weights in their GGUF blocks (quant.cuh: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K,
// Q6_K), dequantized in registers. Twin: cpu::dequantize_row, then the fp32 dot / bf16 rounding.
// y[n, rows] (+= with accumulate) x[n, cols] · Wᵀ for n <= kQuantizedMatmulMaxRows (x 16-byte aligned):
constexpr int kQuantizedMatmulMaxRows = 8;
// The block types the GPU keeps in their blocks (others are expanded to bf16 at upload).
inline bool held_quantized(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}
void matmul_quantized(DType wt, const void* w, int64_t rows, int64_t cols, const float* x, int n, float* y,
                      bool accumulate, cudaStream_t stream);
// Rows [r0, r0 + n_rows) of W as bf16 [n_rows, cols] (a prefill GEMM's tile).
void dequantize_rows_bf16(DType wt, const void* w, int64_t cols, int64_t r0, int64_t n_rows, void* out,
                          cudaStream_t stream);
// out[i, :] = table[ids[i], :] dequantized to fp32.
void embed_quantized(DType wt, const void* table, int64_t cols, const int32_t* ids, int n, float* out,
                     cudaStream_t stream);

// kv_store.cu — twin: cpu::kv_store_rows.  k, v: [n, n_kv_heads * head_dim] -> slots pos0 .. pos0+n-1
void kv_store(DType kv_dtype, void* k_cache, void* v_cache, int64_t capacity, int n_kv_heads, int head_dim,
              const float* k, const float* v, int n, int64_t pos0, cudaStream_t stream);

// kv_store.cu — twin: Device::gather_ring_rows (its default). The rows of both sources of g
// (kernels/kv_layout.h, RingRows; neither null) to dst [2][blocks][n][row_bytes]; row_bytes and
// block_bytes whole 4-byte words. One kernel.
void gather_ring_rows(const RingRows& g, void* dst, cudaStream_t stream);

// attention_decode.cu / attention_prefill.cu — twin: cpu::attention_items.
// Causal attention of n query rows at positions past .. past+n-1 over a cache
// [n_kv_heads][capacity][head_dim]; q, out: [n, n_heads, head_dim]. head_dim even, <= 256.
struct AttentionArgs : AttentionRows {  // kernels/device_tokens.h
  int64_t past = 0;
};

// Split-K ("flash-decoding") decode attention: one block per (row, kv head, query-head group,
// split of the context), then a reduction over splits. Best for few rows. `workspace` holds
// attention_decode_workspace_floats(...) floats; n_sms sizes the split.
int attention_decode_splits(const AttentionArgs& a, int n_sms);
size_t attention_decode_workspace_floats(const AttentionArgs& a, int splits);
void attention_decode(const AttentionArgs& a, int splits, float* workspace, cudaStream_t stream);

// Tiled causal attention for many rows (prefill): one block per (32 query rows, query head),
// streaming 32-key tiles of K and V through shared memory with an online softmax.
void attention_prefill(const AttentionArgs& a, cudaStream_t stream);

// hybrid_attention.cu — twin: cpu::hybrid_attention_items. HybridAttentionArgs
// (kernels/device_tokens.h): n query rows attend over their visible device tokens (a slot table
// or a ring over [n_kv_heads][capacity][head_dim] caches) merged with the host's part; every
// pointer is device memory. head_dim even, <= 256.
// Split-K over each row's token union (online softmax within a split), then a combine kernel that
// also merges a host Partial. The plan: `splits` equal splits of the union, query heads in n_sub()
// subgroups of up to sub_heads heads per kv head (derived from the heads); blocks() of them, at least two waves over
// n_sms SMs where the union allows. `workspace` holds hybrid_attention_workspace_floats(...) floats.
struct HybridLaunch {
  int splits = 1;
  int sub_heads = 1;
  int n_sub(const AttentionRows& a) const { return (a.n_heads / a.n_kv_heads + sub_heads - 1) / sub_heads; }
  int64_t blocks(const AttentionRows& a) const { return int64_t{splits} * a.n_kv_heads * n_sub(a) * a.n; }
};
HybridLaunch hybrid_attention_plan(const HybridAttentionArgs& a, int n_sms);
size_t hybrid_attention_workspace_floats(const HybridAttentionArgs& a, const HybridLaunch& plan);
void hybrid_attention(const HybridAttentionArgs& a, const HybridLaunch& plan, float* workspace, cudaStream_t stream);

}  // namespace HG_CUDA_BACKEND
}  // namespace hg::cuda
