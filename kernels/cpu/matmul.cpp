// matmul dispatch: ISA selection, the decode (GEMV) path over the thread pool, and the prefill
// path: dequantize tiles of W to fp32, then oneDNN sgemm per tile; or, on a CPU with AVX512_BF16,
// the bf16 GEMMs of gemm_bf16.h (AMX tiles where the CPU has them, vdpbf16ps otherwise).
//
// Threading of the prefill path: each chunk of the pool is a contiguous range of weight rows, one
// per thread for sgemm (sgemm.h: single-threaded oneDNN), whole 32-row panels for a bf16 kernel.

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "hybridgen/error.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/sgemm.h"
#include "util/thread_pool.h"

namespace hg::cpu {

namespace {

constexpr int64_t kGemvGrainRows = 16;   // rows per scheduling unit of the GEMV path
constexpr int64_t kTileRows = 128;       // rows of W dequantized per sgemm call

using FloatBuffer = AlignedBuffer<float>;

using GemvFn = void (*)(const GemvArgs&, int64_t, int64_t);
using GemvInt8Fn = void (*)(const GemvInt8Args&, int64_t, int64_t);
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

GemvInt8Fn gemv_int8_fn(DotInt8 dot) {
  switch (dot) {
    case DotInt8::Avx512Vnni: return gemv_int8_rows_avx512vnni;
    case DotInt8::AvxVnni: return gemv_int8_rows_avxvnni;
    case DotInt8::Avx2: return gemv_int8_rows_avx2;
    case DotInt8::Scalar: break;
  }
  return gemv_int8_rows_scalar;
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
  AlignedBuffer<int8_t> x_q;        // [n_tokens, cols]: X quantized to int8
  FloatBuffer x_d, x_s;             // [n_tokens, cols / 32]: block scales and sums
  AlignedBuffer<int8_t> split_q;    // X in the packed weights' order (ActSplit)
  FloatBuffer split_dx, split_s, split_sh;
  std::vector<FloatBuffer> tiles;  // per pool thread: [kTileRows, cols], or bf16_gemm_work_bytes
  AlignedBuffer<uint16_t> x_bf16;  // X for the bf16 GEMMs (bf16_pack_x)
};

MatmulWorkspace::MatmulWorkspace() : impl_(std::make_unique<Impl>()) {}
MatmulWorkspace::~MatmulWorkspace() = default;
MatmulWorkspace::MatmulWorkspace(MatmulWorkspace&&) noexcept = default;
MatmulWorkspace& MatmulWorkspace::operator=(MatmulWorkspace&&) noexcept = default;

namespace {

// X quantized to int8 in the workspace (the int8 GEMV's input).
ActQ8 quantize_x(CpuIsa isa, MatmulWorkspace& ws, const float* X, int64_t n_tokens, int64_t cols) {
  auto& w = ws.impl();
  const size_t n_blocks = static_cast<size_t>(n_tokens * (cols / 32));
  int8_t* q = w.x_q.get(n_blocks * 32);
  float* d = w.x_d.get(n_blocks);
  float* s = w.x_s.get(n_blocks);
  quantize_act_fn(dot_int8_for(isa))(X, n_tokens, cols, q, d, s);
  return ActQ8{q, d, s};
}

// X quantized in the packed weights' order, in the workspace.
ActSplit split_x(MatmulWorkspace& ws, const ActQ8& xq, int64_t n_tokens, int64_t cols) {
  auto& w = ws.impl();
  const int64_t quads = act_split_quads(cols);
  const auto n = static_cast<size_t>(n_tokens * quads);
  int8_t* q = w.split_q.get(n * 128);
  float* dx = w.split_dx.get(n * 16);
  float* s = w.split_s.get(n * 4);
  float* sh = w.split_sh.get(n * 8);
  split_act(xq, n_tokens, cols, q, dx, s, sh);
  return ActSplit{q, dx, s, sh, n_tokens};
}

// Rows [row_begin, row_end) of one target through the GEMV path (`xq`: X quantized, when W is;
// `xs`: the same in the packed order, when a target is packed).
void gemv_target_rows(CpuIsa isa, const MatmulTarget& t, int64_t cols, const float* X, const ActQ8& xq,
                      const ActSplit& xs, int64_t n_tokens, int64_t row_begin, int64_t row_end) {
  if (t.packed) {
    const GemvPackedArgs a{t.packed, xs, n_tokens, t.Y, t.ldy, t.accumulate};
    switch (dot_int8_for(isa)) {
      case DotInt8::Avx512Vnni: return gemv_packed_rows_avx512vnni(a, row_begin, row_end);
      case DotInt8::AvxVnni: return gemv_packed_rows_avxvnni(a, row_begin, row_end);
      case DotInt8::Avx2: return gemv_packed_rows_avx2(a, row_begin, row_end);
      case DotInt8::Scalar: break;
    }
    gemv_packed_rows_scalar(a, row_begin, row_end);
    return;
  }
  const auto* W = static_cast<const uint8_t*>(t.W);
  const size_t row_bytes = dtype_row_bytes(t.wt, cols);
  if (dtype_is_quantized(t.wt)) {
    const GemvInt8Args a{t.wt, W, row_bytes, cols, xq, n_tokens, t.Y, t.ldy, t.accumulate};
    gemv_int8_fn(dot_int8_for(isa))(a, row_begin, row_end);
  } else {
    const GemvArgs a{t.wt, W, row_bytes, cols, X, n_tokens, t.Y, t.ldy, t.accumulate};
    gemv_fn(isa)(a, row_begin, row_end);
  }
}

MatmulWorkspace& thread_workspace() {
  thread_local MatmulWorkspace ws;
  return ws;
}

// Rows [row_begin, row_end) of one target through the sgemm path, using `tile` as the fp32 copy of W.
void sgemm_rows(DequantFn dequant, FloatBuffer& tile, const MatmulTarget& t, int64_t cols, const float* X,
                int64_t n_tokens, int64_t row_begin, int64_t row_end) {
  SingleThreadedOmp omp_guard;
  const float beta = t.accumulate ? 1.0f : 0.0f;
  if (t.wt == DType::F32) {
    sgemm(n_tokens, row_end - row_begin, cols, X, cols, static_cast<const float*>(t.W) + row_begin * cols, cols, beta,
          t.Y + row_begin, t.ldy);
    return;
  }
  const size_t row_bytes = dtype_row_bytes(t.wt, cols);
  float* w = tile.get(static_cast<size_t>(kTileRows * cols));
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
    const int64_t n = std::min(kTileRows, row_end - r0);
    for (int64_t i = 0; i < n; ++i)
      dequant(t.wt, static_cast<const uint8_t*>(t.W) + static_cast<size_t>(r0 + i) * row_bytes, cols, w + i * cols);
    sgemm(n_tokens, n, cols, X, cols, w, cols, beta, t.Y + r0, t.ldy);
  }
}

// Calls fn(target, begin, end) for the pieces of the concatenated row range [begin, end).
template <class Fn>
void for_target_rows(const MatmulTarget* targets, int count, int64_t begin, int64_t end, Fn&& fn) {
  int64_t first = 0;
  for (int i = 0; i < count && first < end; first += targets[i].rows, ++i) {
    const int64_t b = std::max(begin, first), e = std::min(end, first + targets[i].rows);
    if (b < e) fn(targets[i], b - first, e - first);
  }
}

}  // namespace

QuantizeActFn quantize_act_fn(DotInt8 dot) { return dot == DotInt8::Scalar ? quantize_act_scalar : quantize_act_avx2; }

void matmul_rows_isa(CpuIsa isa, MatmulWorkspace& ws, DType wt, const void* W, int64_t cols,
                     const float* X, int64_t n_tokens, float* Y, int64_t ldy, int64_t row_begin,
                     int64_t row_end) {
  check_shape(wt, cols);
  if (n_tokens <= 0 || row_begin >= row_end) return;
  const ActQ8 xq = dtype_is_quantized(wt) ? quantize_x(isa, ws, X, n_tokens, cols) : ActQ8{};
  const MatmulTarget t{wt, W, row_end, Y, ldy, false};
  gemv_target_rows(isa, t, cols, X, xq, ActSplit{}, n_tokens, row_begin, row_end);
}

void matmul_group_isa(CpuIsa isa, ThreadPool& pool, MatmulWorkspace& ws, const MatmulTarget* targets, int count,
                      int64_t cols, const float* X, int64_t n_tokens) {
  int64_t total_rows = 0;
  bool any_quantized = false, any_packed = false;
  for (int i = 0; i < count; ++i) {
    check_shape(targets[i].wt, cols);
    total_rows += targets[i].rows;
    any_quantized = any_quantized || dtype_is_quantized(targets[i].wt);
    any_packed = any_packed || targets[i].packed;
  }
  if (n_tokens <= 0 || total_rows <= 0) return;
  if (n_tokens >= kMatmulSgemmMinTokens) {
    auto& tiles = ws.impl().tiles;
    if (tiles.size() < static_cast<size_t>(pool.size())) tiles.resize(static_cast<size_t>(pool.size()));
    const DequantFn dequant = dequant_fn(isa);
    const PrefillGemm gemm = ws.bf16 ? prefill_gemm_for(isa) : PrefillGemm::Sgemm;
    if (gemm != PrefillGemm::Sgemm && cols % kBf16Cols == 0) {
      uint16_t* x = ws.impl().x_bf16.get(static_cast<size_t>(bf16_padded_tokens(n_tokens) * cols));
      bf16_pack_x(X, n_tokens, cols, x);
      const size_t work_floats = (bf16_gemm_work_bytes(cols) + sizeof(float) - 1) / sizeof(float);
      const auto kernel = gemm == PrefillGemm::AmxBf16 ? amx_gemm_rows : avx512_bf16_gemm_rows;
      // Whole 32-row panels per scheduling unit, so that no panel is split between two threads.
      pool.parallel_for(
          (total_rows + 31) / 32,
          [&](int64_t begin, int64_t end, int thread) {
            float* work = tiles[static_cast<size_t>(thread)].get(work_floats);
            for_target_rows(targets, count, begin * 32, std::min(end * 32, total_rows),
                            [&](const MatmulTarget& t, int64_t b, int64_t e) {
                              const Bf16GemmArgs a{t.wt,
                                                   static_cast<const uint8_t*>(t.W),
                                                   dtype_row_bytes(t.wt, cols),
                                                   cols,
                                                   dequant,
                                                   x,
                                                   n_tokens,
                                                   t.Y,
                                                   t.ldy,
                                                   t.accumulate};
                              kernel(a, work, b, e);
                            });
          },
          1);
      return;
    }
    // One chunk per thread (a grain of a thread's share), as before the pool took smaller chunks:
    // each sgemm call is a GEMM of its own over all of X, and its tiles of up to 128 rows would
    // otherwise shrink to the chunks' 72 (SmolLM2) and leave a thread with one more than the other.
    const int64_t share = (total_rows + pool.width() - 1) / pool.width();
    pool.parallel_for(
        total_rows,
        [&](int64_t begin, int64_t end, int thread) {
          for_target_rows(targets, count, begin, end, [&](const MatmulTarget& t, int64_t b, int64_t e) {
            sgemm_rows(dequant, tiles[static_cast<size_t>(thread)], t, cols, X, n_tokens, b, e);
          });
        },
        (share + kGemvGrainRows - 1) / kGemvGrainRows * kGemvGrainRows);
    return;
  }
  const ActQ8 xq = any_quantized ? quantize_x(isa, ws, X, n_tokens, cols) : ActQ8{};
  const ActSplit xs = any_packed ? split_x(ws, xq, n_tokens, cols) : ActSplit{};
  pool.parallel_for(
      total_rows,
      [&](int64_t begin, int64_t end, int) {
        for_target_rows(targets, count, begin, end, [&](const MatmulTarget& t, int64_t b, int64_t e) {
          gemv_target_rows(isa, t, cols, X, xq, xs, n_tokens, b, e);
        });
      },
      kGemvGrainRows);
}

void matmul_isa(CpuIsa isa, ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W, int64_t rows, int64_t cols,
                const float* X, int64_t n_tokens, float* Y, int64_t ldy, bool accumulate) {
  const MatmulTarget t{wt, W, rows, Y, ldy, accumulate};
  matmul_group_isa(isa, pool, ws, &t, 1, cols, X, n_tokens);
}

void matmul_rows(DType wt, const void* W, int64_t cols, const float* X, int64_t n_tokens, float* Y,
                 int64_t ldy, int64_t row_begin, int64_t row_end) {
  matmul_rows_isa(active_cpu_isa(), thread_workspace(), wt, W, cols, X, n_tokens, Y, ldy, row_begin,
                  row_end);
}

void matmul(ThreadPool& pool, MatmulWorkspace& ws, DType wt, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tokens, float* Y, int64_t ldy, bool accumulate) {
  matmul_isa(active_cpu_isa(), pool, ws, wt, W, rows, cols, X, n_tokens, Y, ldy, accumulate);
}

void matmul_group(ThreadPool& pool, MatmulWorkspace& ws, const MatmulTarget* targets, int count, int64_t cols,
                  const float* X, int64_t n_tokens) {
  matmul_group_isa(active_cpu_isa(), pool, ws, targets, count, cols, X, n_tokens);
}

void matmul(ThreadPool& pool, DType wt, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tokens, float* Y, int64_t ldy) {
  matmul(pool, thread_workspace(), wt, W, rows, cols, X, n_tokens, Y, ldy);
}

void dequantize_row(DType wt, const void* W, int64_t cols, int64_t row, float* out) {
  check_shape(wt, cols);
  const auto* base = static_cast<const uint8_t*>(W) + static_cast<size_t>(row) * dtype_row_bytes(wt, cols);
  dequant_fn(active_cpu_isa())(wt, base, cols, out);
}

const char* cpu_isa_name() { return cpu_isa_label(active_cpu_isa()); }

const char* dot_int8_name() { return dot_int8_label(dot_int8_for(active_cpu_isa())); }

}  // namespace hg::cpu
