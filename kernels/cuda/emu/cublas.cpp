// The emulated device's cuBLAS: cublasGemmEx with cuBLAS's argument semantics (column-major
// operands, transposes, leading dimensions, data and compute types, alpha and beta on the host),
// queued on the handle's stream and computed by the project's CPU GEMM (cpu::sgemm, fp32
// accumulation: what CUBLAS_COMPUTE_32F asks for; f16 and bf16 operands are widened exactly).
// Operands must lie inside device allocations: one that does not is an illegal address, a sticky
// fault, as a stray read by the real library's kernel would be.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/sgemm.h"
#include "kernels/cuda/emu/runtime_internal.h"

namespace hg_cuda_emu {

struct BlasHandle {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

size_t type_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
  }
  return 0;
}

template <class Widen>
void widen_into(const void* m, cublasOperation_t op, int64_t rows, int64_t cols, int64_t ld, float scale, float* p,
                Widen widen) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) p[r * cols + c] = scale * widen(m, op == CUBLAS_OP_N ? r + c * ld : c + r * ld);
}

// The last element a column-major rows × cols operand with leading dimension ld touches, + 1.
size_t extent(int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return static_cast<size_t>((cols - 1) * ld + rows);
}

// P[r][c] = scale · op(M)(r, c) as a row-major rows × cols fp32 matrix; op(M)(r, c) is
// M[r + c·ld] (N) or M[c + r·ld] (T) in column-major storage.
std::vector<float> row_major(const void* m, cudaDataType_t t, cublasOperation_t op, int64_t rows, int64_t cols,
                             int64_t ld, float scale) {
  std::vector<float> p(static_cast<size_t>(rows * cols));
  switch (t) {
    case CUDA_R_32F:
      widen_into(m, op, rows, cols, ld, scale, p.data(),
                 [](const void* b, int64_t i) { return static_cast<const float*>(b)[i]; });
      break;
    case CUDA_R_16F:
      widen_into(m, op, rows, cols, ld, scale, p.data(),
                 [](const void* b, int64_t i) { return hg::cpu::f16_to_fp32(static_cast<const uint16_t*>(b)[i]); });
      break;
    case CUDA_R_16BF:
      widen_into(m, op, rows, cols, ld, scale, p.data(),
                 [](const void* b, int64_t i) { return hg::cpu::bf16_to_fp32(static_cast<const uint16_t*>(b)[i]); });
      break;
  }
  return p;
}

// The widened row of a stored operand: `count` elements from `m` with stride 1.
void widen_row(const void* m, cudaDataType_t t, int64_t count, float* out) {
  switch (t) {
    case CUDA_R_32F: std::memcpy(out, m, sizeof(float) * static_cast<size_t>(count)); return;
    case CUDA_R_16F:
      for (int64_t i = 0; i < count; ++i) out[i] = hg::cpu::f16_to_fp32(static_cast<const uint16_t*>(m)[i]);
      return;
    case CUDA_R_16BF:
      for (int64_t i = 0; i < count; ++i) out[i] = hg::cpu::bf16_to_fp32(static_cast<const uint16_t*>(m)[i]);
      return;
  }
}

float dot(const float* a, const float* b, int64_t k) {
  float acc[16] = {};  // independent sums the compiler keeps in vector registers
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  for (; i < k; ++i) acc[0] += a[i] * b[i];
  float s = 0.0f;
  for (float v : acc) s += v;
  return s;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new BlasHandle();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  cudaDeviceSynchronize();
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !runtime::device_range(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown status";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (transa == CUBLAS_OP_C || transb == CUBLAS_OP_C) transa = transa == CUBLAS_OP_C ? CUBLAS_OP_T : transa;
  if (transb == CUBLAS_OP_C) transb = CUBLAS_OP_T;  // real types: the conjugate transpose is the transpose
  const int64_t a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const int64_t b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (lda < std::max<int64_t>(1, a_rows) || ldb < std::max<int64_t>(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a_type != b_type || type_bytes(a_type) == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (c_type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;  // the engine's outputs are fp32
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
      compute != CUBLAS_COMPUTE_32F_FAST_TF32 && compute != CUBLAS_COMPUTE_32F_FAST_16BF &&
      compute != CUBLAS_COMPUTE_32F_FAST_16F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const size_t a_bytes = extent(a_rows, a_cols, lda) * type_bytes(a_type);
  const size_t b_bytes = extent(b_rows, b_cols, ldb) * type_bytes(b_type);
  const size_t c_bytes = extent(m, n, ldc) * sizeof(float);
  const auto outside = [](const void* p, size_t bytes) { return bytes > 0 && !runtime::device_range(p, bytes); };
  if (outside(A, a_bytes) || outside(B, b_bytes) || outside(C, c_bytes)) {
    runtime::set_sticky_error(cudaErrorIllegalAddress,
                              "cublasGemmEx: an operand reaches outside its device allocation (m " + std::to_string(m) +
                                  ", n " + std::to_string(n) + ", k " + std::to_string(k) + ", lda " +
                                  std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                                  std::to_string(ldc) + ")");
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  const float alpha_v = *static_cast<const float*>(alpha), beta_v = *static_cast<const float*>(beta);
  runtime::enqueue(handle->stream, [=] {
    runtime::count_gemm();
    auto* c = static_cast<float*>(C);
    // cuBLAS reads C only when beta != 0: clear it so stale NaNs cannot leak through 0 · NaN.
    if (beta_v == 0.0f)
      for (int64_t j = 0; j < n; ++j) std::fill(c + j * ldc, c + j * ldc + m, 0.0f);
    if (k == 0) {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) c[j * ldc + i] *= beta_v;
      return;
    }
    // Few columns (decode): each of A's rows widened once and dotted with every column, instead
    // of widening all of A into an m × k copy first (a vocabulary head is 0.5 GB as fp32).
    if (transa == CUBLAS_OP_T && n <= 16) {
      const std::vector<float> xs =
          row_major(B, b_type, transb == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N, n, k, ldb, alpha_v);
      std::vector<float> row(static_cast<size_t>(k));
      const size_t esize = type_bytes(a_type);
      for (int64_t i = 0; i < m; ++i) {
        widen_row(static_cast<const uint8_t*>(A) + static_cast<size_t>(i * lda) * esize, a_type, k, row.data());
        for (int64_t j = 0; j < n; ++j) {
          float& out = c[j * ldc + i];
          out = dot(row.data(), xs.data() + j * k, k) + (beta_v == 0.0f ? 0.0f : beta_v * out);
        }
      }
      return;
    }
    // Row-major, C's storage is R[n][m] (row j at c + j·ldc): R = X · Yᵀ + beta · R with
    // X[j][kk] = alpha · op(B)(kk, j) and Y[i][kk] = op(A)(i, kk). Operands already in that
    // layout (fp32, A transposed, B not) are used in place.
    std::vector<float> xs, ys;
    const float* X;
    const float* Y;
    int64_t ldx, ldy;
    if (b_type == CUDA_R_32F && transb == CUBLAS_OP_N && alpha_v == 1.0f) {
      X = static_cast<const float*>(B);
      ldx = ldb;
    } else {
      xs = row_major(B, b_type, transb == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N, n, k, ldb, alpha_v);
      X = xs.data();
      ldx = k;
    }
    if (a_type == CUDA_R_32F && transa == CUBLAS_OP_T) {
      Y = static_cast<const float*>(A);
      ldy = lda;
    } else {
      ys = row_major(A, a_type, transa, m, k, lda, 1.0f);
      Y = ys.data();
      ldy = k;
    }
    hg::cpu::sgemm(n, m, k, X, ldx, Y, ldy, beta_v, c, ldc);
  }, "cublasGemmEx");
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace hg_cuda_emu
