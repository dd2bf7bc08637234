// CudaDevice ops: argument checks on the host, then one launcher from kernels/cuda/ (or cuBLAS)
// on the compute stream. Nothing here waits for the GPU.
//
// Dense projections: y[n, rows] = x[n, cols] · Wᵀ is, in cuBLAS's column-major terms,
// C(rows × n) = op(A)ᵀ · B with A = W (cols × rows, lda = cols) and B = x (cols × n, ldb = cols).
// fp32 weights run with fp32 inputs and compute (no TF32); bf16 weights (f16 ones are converted at
// upload) need inputs of the same type (cublasGemmEx takes no mixed A/B types), so x is first rounded into a scratch buffer;
// accumulation and output stay fp32 either way.
#include <cmath>

#include "device/cuda_device.h"
#include "hybridgen/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace hg {
inline namespace HG_CUDA_BACKEND {

namespace {

// Rows up to which attention takes the split-K decode kernel rather than the tiled one.
constexpr int kDecodeMaxRows = 8;

cudaDataType_t cuda_type(DType t, const char* what) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: throw Error(std::string(what) + ": dtype " + std::string(dtype_name(t)) + " is not held on the GPU");
  }
}

void check_vector(const DeviceTensor& t, int64_t dim, const char* what) {
  if (!t.present() || t.dtype != DType::F32 || t.cols != dim)
    throw Error(std::string(what) + ": expected an fp32 vector of " + std::to_string(dim) + " elements, got " +
                (t.present() ? std::to_string(t.cols) + " " + std::string(dtype_name(t.dtype)) : "none"));
}

void check_kv(const KvView& kv, int64_t end, const char* what) {
  if (kv.dtype != DType::F32 && kv.dtype != DType::F16 && kv.dtype != DType::BF16)
    throw Error(std::string(what) + ": kv cache dtype " + std::string(dtype_name(kv.dtype)) +
                " is not supported (f32, f16, bf16)");
  if (end > kv.capacity)
    throw Error(std::string(what) + ": kv cache overflow: position " + std::to_string(end) + " > capacity " +
                std::to_string(kv.capacity));
}

}  // namespace

void CudaDevice::embed(const DeviceTensor& table, const int32_t* ids_host, int n, float* out) {
  if (n <= 0) return;
  for (int i = 0; i < n; ++i) {
    if (ids_host[i] < 0 || ids_host[i] >= table.rows)
      throw Error("token id " + std::to_string(ids_host[i]) + " is outside the vocabulary [0, " +
                  std::to_string(table.rows) + ")");
  }
  issue();
  if (cuda::held_quantized(table.dtype)) {
    cuda::embed_quantized(table.dtype, table.data, table.cols, stage_ints(ids_host, n), n, out, compute_);
    return;
  }
  cuda_type(table.dtype, "embed");
  cuda::embed(table.dtype, table.data, table.cols, stage_ints(ids_host, n), n, out, compute_);
}

void CudaDevice::matmul(const DeviceTensor& w, const DeviceTensor& bias, const float* x, int n, float* y) {
  const MatmulOut out{&w, &bias, y};
  matmul_group(x, n, &out, 1);
}

// One cuBLAS GEMM per output (beta 1 for accumulate), or for weights held in their blocks the
// quantized GEMV (few rows) or bf16 tiles (many): the stream orders them, and the input's
// conversion to a 16-bit dtype is shared by consecutive outputs that read it so.
void CudaDevice::matmul_group(const float* x, int n, const MatmulOut* outs, int count) {
  if (n <= 0) return;
  issue();
  DType converted_to = DType::F32;
  const void* converted = nullptr;
  const auto input_as = [&](DType t, int64_t cols) -> const void* {
    if (t == DType::F32) return x;
    if (t != converted_to) {
      const int64_t elems = static_cast<int64_t>(n) * cols;
      void* buffer = grow(gemm_input_, sizeof(uint16_t) * static_cast<size_t>(elems));
      cuda::convert_from_f32(x, elems, t, buffer, compute_);
      converted = buffer;
      converted_to = t;
    }
    return converted;
  };
  for (int i = 0; i < count; ++i) {
    const DeviceTensor& w = *outs[i].w;
    if (!w.present()) throw Error("matmul: weight not uploaded");
    if (cuda::held_quantized(w.dtype) && n <= cuda::kQuantizedMatmulMaxRows) {
      cuda::matmul_quantized(w.dtype, w.data, w.rows, w.cols, x, n, outs[i].y, outs[i].accumulate, compute_);
    } else if (cuda::held_quantized(w.dtype)) {
      quantized_gemm(w, input_as(DType::BF16, w.cols), n, outs[i].y, outs[i].accumulate);
    } else {
      const cudaDataType_t type = cuda_type(w.dtype, "matmul");
      const void* input = input_as(w.dtype, w.cols);
      const float one = 1.0f, beta = outs[i].accumulate ? 1.0f : 0.0f;
      HG_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), n,
                                   static_cast<int>(w.cols), &one, w.data, type, static_cast<int>(w.cols), input, type,
                                   static_cast<int>(w.cols), &beta, outs[i].y, CUDA_R_32F, static_cast<int>(w.rows),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      ++counters_.launches;
    }
    if (outs[i].bias && outs[i].bias->present()) add_bias(outs[i].y, *outs[i].bias, n, static_cast<int>(w.rows));
  }
}

// Many rows (prefill): W in bf16 tiles of rows, each dequantized on the fly into a scratch tile
// and multiplied by cuBLAS into its rows of y (C's leading dimension stays w.rows).
void CudaDevice::quantized_gemm(const DeviceTensor& w, const void* x_bf16, int n, float* y, bool accumulate) {
  const int64_t tile_rows = std::min<int64_t>(w.rows, std::max<int64_t>(1, kDequantTileElems / w.cols));
  void* tile = grow(dequant_tile_, sizeof(uint16_t) * static_cast<size_t>(tile_rows * w.cols));
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    const int64_t tr = std::min(tile_rows, w.rows - r0);
    cuda::dequantize_rows_bf16(w.dtype, w.data, w.cols, r0, tr, tile, compute_);
    HG_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(tr), n, static_cast<int>(w.cols),
                                 &one, tile, CUDA_R_16BF, static_cast<int>(w.cols), x_bf16, CUDA_R_16BF,
                                 static_cast<int>(w.cols), &beta, y + r0, CUDA_R_32F, static_cast<int>(w.rows),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    ++counters_.launches;
  }
}

void CudaDevice::rmsnorm(const float* x, const DeviceTensor& weight, float eps, int n, int dim, float* y) {
  check_vector(weight, dim, "rmsnorm");
  issue();
  cuda::rmsnorm(x, weight.f32(), eps, n, dim, y, compute_);
}

void CudaDevice::layernorm(const float* x, const DeviceTensor& weight, const DeviceTensor& bias, float eps, int n,
                           int dim, float* y) {
  check_vector(weight, dim, "layernorm weight");
  check_vector(bias, dim, "layernorm bias");
  issue();
  cuda::layernorm(x, weight.f32(), bias.f32(), eps, n, dim, y, compute_);
}

void CudaDevice::rope(float* x, const int32_t* pos_host, int n, int n_heads, const RopeParams& p) {
  if (n <= 0) return;
  issue();
  const float* inv_freq = rope_table(p);
  cuda::rope(x, stage_ints(pos_host, n), n, n_heads, p.head_dim, p.rotary_dim, inv_freq,
             p.layout == RopeLayout::Interleaved, compute_);
}

void CudaDevice::silu_mul(float* gate, const float* up, int64_t count) {
  issue();
  cuda::silu_mul(gate, up, count, compute_);
}

void CudaDevice::relu(float* x, int64_t count) {
  issue();
  cuda::relu(x, count, compute_);
}

void CudaDevice::add(float* y, const float* x, int64_t count) {
  issue();
  cuda::add(y, x, count, compute_);
}

void CudaDevice::add_bias(float* y, const DeviceTensor& b, int n, int dim) {
  check_vector(b, dim, "add_bias");
  issue();
  cuda::add_bias(y, b.f32(), n, dim, compute_);
}

void CudaDevice::kv_store(const KvView& kv, const float* k, const float* v, int n, int pos0) {
  check_kv(kv, static_cast<int64_t>(pos0) + n, "kv_store");
  if (pos0 < 0) throw Error("kv_store: negative position " + std::to_string(pos0));
  issue();
  cuda::kv_store(kv.dtype, kv.k, kv.v, kv.capacity, kv.n_kv_heads, kv.head_dim, k, v, n, pos0, compute_);
}

void CudaDevice::attention(const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out) {
  if (n <= 0) return;
  check_kv(kv, static_cast<int64_t>(past) + n, "attention");
  issue();
  cuda::AttentionArgs a;
  a.q = q;
  a.out = out;
  a.k_cache = kv.k;
  a.v_cache = kv.v;
  a.kv_dtype = kv.dtype;
  a.capacity = kv.capacity;
  a.n = n;
  a.n_heads = n_heads;
  a.n_kv_heads = kv.n_kv_heads;
  a.head_dim = kv.head_dim;
  a.past = past;
  a.scale = scale;
  if (n > kDecodeMaxRows) {
    cuda::attention_prefill(a, compute_);
    return;
  }
  const int splits = cuda::attention_decode_splits(a, prop_.multiProcessorCount);
  const size_t ws_floats = cuda::attention_decode_workspace_floats(a, splits);
  float* ws = ws_floats ? static_cast<float*>(grow(attention_ws_, sizeof(float) * ws_floats)) : nullptr;
  cuda::attention_decode(a, splits, ws, compute_);
}

}  // namespace HG_CUDA_BACKEND
}  // namespace hg
