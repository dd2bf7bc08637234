// matmul dispatch: ISA selection, the decode (GEMV) path over the thread pool, and the prefill
// path (dequantize tiles of W to fp32, then oneDNN sgemm per tile).
//
// Threading of the prefill path: each pool thread owns a contiguous range of weight rows and
// calls sgemm (sgemm.h: single-threaded oneDNN) on its own tiles.

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/sgemm.h"
#include "util/thread_pool.h"

namespace hg::cpu {

namespace {

constexpr int64_t kGemvGrainRows = 16;   // rows per scheduling unit of the GEMV path
constexpr int64_t kTileRows = 128;       // rows of W dequantized per sgemm call
constexpr size_t kAlign = 64;

// A grow-only, 64-byte aligned float buffer.
class FloatBuffer {
 public:
  float* get(size_t n) {
    if (n > size_) {
      data_.reset(static_cast<float*>(std::aligned_alloc(kAlign, (n * sizeof(float) + kAlign - 1) / kAlign * kAlign)));
      if (!data_) throw Error("matmul: out of memory for a workspace of " + std::to_string(n) + " floats");
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t size_ = 0;
};

using GemvFn = void (*)(const GemvArgs&, int64_t, int64_t);
using DequantFn = void (*)(DType, const uint8_t*, int64_t, float*);

GemvFn gemv_fn(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512: return gemv_rows_avx512;
    case CpuIsa::Avx2: return gemv_rows_avx2;
    case CpuIsa::Scalar: break;
  }
  return gemv_rows_scalar;
}

void dequantize_span_scalar(DType wt, const uint8_t* row, int64_t n, float* out) {
  dequantize_span(wt, row, n, out);
}

DequantFn dequant_fn(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512: return dequantize_span_avx512;
    case CpuIsa::Avx2: return dequantize_span_avx2;
    case CpuIsa::Scalar: break;
  }
  return dequantize_span_scalar;
}

void check_shape(DType wt, int64_t cols) {
  if (cols <= 0 || cols % dtype_block_elems(wt) != 0)
    throw Error("matmul: cols " + std::to_string(cols) + " is not a positive multiple of the " +
                std::string(dtype_name(wt)) + " block size " + std::to_string(dtype_block_elems(wt)));
}

}  // namespace

struct MatmulWorkspace::Impl {
  FloatBuffer x_sums;               // [n_tokens, cols / 32]
  std::vector<FloatBuffer> tiles;   // per pool thread: [kTileRows, cols]
};

MatmulWorkspace::MatmulWorkspace() : impl_(std::make_unique<Impl>()) {}
MatmulWorkspace::~MatmulWorkspace() = default;
MatmulWorkspace::MatmulWorkspace(MatmulWorkspace&&) noexcept = default;
MatmulWorkspace& MatmulWorkspace::operator=(MatmulWorkspace&&) noexcept = default;

namespace {

GemvArgs make_gemv_args(MatmulWorkspace& ws, DType wt, const void* W, int64_t cols, const float* X,
                        int64_t n_tokens, float* Y, int64_t ldy) {
  GemvArgs a{wt, static_cast<const uint8_t*>(W), dtype_row_bytes(wt, cols), cols, X, n_tokens,
             nullptr, Y, ldy};
  if (wt == DType::Q4_1) {
    float* sums = ws.impl().x_sums.get(static_cast<size_t>(n_tokens * (cols / 32)));
    x_block_sums(X, n_tokens, cols, sums);
    a.x_block_sums = sums;
  }
  return a;
}

MatmulWorkspace& thread_workspace() {
  thread_local MatmulWorkspace ws;
  return ws;
}

// Rows [row_begin, row_end) through the sgemm path, using `tile` as the fp32 copy of W.
void sgemm_rows(DequantFn dequant, FloatBuffer& tile, DType wt, const void* W, int64_t cols,
                const float* X, int64_t n_tokens, float* Y, int64_t ldy, int64_t row_begin,
                int64_t row_end) {
  SingleThreadedOmp omp_guard;
  if (wt == DType::F32) {
    sgemm(n_tokens, row_end - row_begin, cols, X, cols, static_cast<const float*>(W) + row_begin * cols,
          cols, Y + row_begin, ldy);
    return;
  }
  const size_t row_bytes = dtype_row_bytes(wt, cols);
  float* w = tile.get(static_cast<size_t>(kTileRows * cols));
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
    const int64_t n = std::min(kTileRows, row_end - r0);
    for (int64_t i = 0; i < n; ++i)
      dequant(wt, static_cast<const uint8_t*>(W) + static_cast<size_t>(r0 + i) * row_bytes, cols,
              w + i * cols);
    sgemm(n_tokens, n, cols, X, cols, w, cols, Y + r0, ldy);
  }
}

}  // namespace

void matmul_rows_isa(CpuIsa isa, MatmulWorkspace& ws, DType wt, const void* W, int64_t cols,
                     const float* X, int64_t n_tokens, float* Y, int64_t ldy, int64_t row_begin,
                     int64_t row_end) {
  check_shape(wt, cols);
  if (n_tokens <= 0 || row_begin >= row_end) return;
  const GemvArgs a = make_gemv_args(ws, wt, W, cols, X, n_tokens, Y, ldy);
  gemv_fn(isa)(a, row_begin, row_end);
}

void matmul_isa(CpuIsa isa, ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W,
                int64_t rows, int64_t cols, const float* X, int64_t n_tokens, float* Y, int64_t ldy) {
  check_shape(wt, cols);
  if (n_tokens <= 0 || rows <= 0) return;
  if (n_tokens >= kMatmulSgemmMinTokens) {
    auto& tiles = ws.impl().tiles;
    if (tiles.size() < static_cast<size_t>(pool.size())) tiles.resize(static_cast<size_t>(pool.size()));
    const DequantFn dequant = dequant_fn(isa);
    pool.parallel_for(
        rows,
        [&](int64_t begin, int64_t end, int thread) {
          sgemm_rows(dequant, tiles[static_cast<size_t>(thread)], wt, W, cols, X, n_tokens, Y, ldy,
                     begin, end);
        },
        kGemvGrainRows);
    return;
  }
  const GemvArgs a = make_gemv_args(ws, wt, W, cols, X, n_tokens, Y, ldy);
  const GemvFn fn = gemv_fn(isa);
  pool.parallel_for(
      rows, [&](int64_t begin, int64_t end, int) { fn(a, begin, end); }, kGemvGrainRows);
}

void matmul_rows(DType wt, const void* W, int64_t cols, const float* X, int64_t n_tokens, float* Y,
                 int64_t ldy, int64_t row_begin, int64_t row_end) {
  matmul_rows_isa(active_cpu_isa(), thread_workspace(), wt, W, cols, X, n_tokens, Y, ldy, row_begin,
                  row_end);
}

void matmul(ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W, int64_t rows,
            int64_t cols, const float* X, int64_t n_tokens, float* Y, int64_t ldy) {
  matmul_isa(active_cpu_isa(), pool, ws, wt, W, rows, cols, X, n_tokens, Y, ldy);
}

void matmul(ThreadPool& pool, DType wt, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tokens, float* Y, int64_t ldy) {
  matmul(pool, thread_workspace(), wt, W, rows, cols, X, n_tokens, Y, ldy);
}

const char* cpu_isa_name() { return cpu_isa_label(active_cpu_isa()); }

}  // namespace hg::cpu
