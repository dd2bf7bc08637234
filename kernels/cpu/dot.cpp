// Dot kernels: argument checks, ISA dispatch and the scalar twins (baseline x86-64).
#include "kernels/cpu/dot.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "hybridgen/error.h"
#include "kernels/cpu/dot_internal.h"
#include "kernels/cpu/half.h"

namespace hg::cpu {

namespace {

float load_scalar(DType dt, const uint8_t* row, int64_t c) {
  if (dt == DType::F32) return reinterpret_cast<const float*>(row)[c];
  const uint16_t h = reinterpret_cast<const uint16_t*>(row)[c];
  return dt == DType::F16 ? f16_to_fp32(h) : bf16_to_fp32(h);
}

float dot_f32_scalar(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void dot_rows_heads_scalar(DType dt, const uint8_t* K, size_t row_bytes, int64_t n_rows, const float* q, int n_q,
                           int64_t ld_q, int64_t head_dim, float scale, float* out, int64_t ld_out) {
  for (int h = 0; h < n_q; ++h)
    for (int64_t i = 0; i < n_rows; ++i) {
      float s = 0.0f;
      for (int64_t c = 0; c < head_dim; ++c) s += load_scalar(dt, K + i * row_bytes, c) * q[h * ld_q + c];
      out[h * ld_out + i] = scale * s;
    }
}

void axpy_rows_heads_scalar(DType dt, const uint8_t* Vm, size_t row_bytes, int64_t n_rows, const float* p, int n_p,
                            int64_t ld_p, int64_t head_dim, float* out, int64_t ld_out) {
  for (int h = 0; h < n_p; ++h)
    for (int64_t i = 0; i < n_rows; ++i)
      for (int64_t c = 0; c < head_dim; ++c)
        out[h * ld_out + c] += p[h * ld_p + i] * load_scalar(dt, Vm + i * row_bytes, c);
}

float max_value_scalar(const float* p, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, p[i]);
  return m;
}

float exp_shift_sum_scalar(float* p, int64_t n, float shift) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += (p[i] = exp_nonpositive_scalar(p[i] - shift));
  return s;
}

const DotIsaFns kDotScalar = {dot_f32_scalar, dot_rows_heads_scalar, axpy_rows_heads_scalar, max_value_scalar,
                              exp_shift_sum_scalar};

const DotIsaFns& fns(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512:
      return kDotAvx512;
    case CpuIsa::Avx2:
      return kDotAvx2;
    case CpuIsa::Scalar:
      break;
  }
  return kDotScalar;
}

size_t kv_row_bytes(const char* fn, DType dt, int64_t ld) {
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16)
    throw Error(std::string(fn) + ": KV dtype " + std::string(dtype_name(dt)) + " is not supported (f32, f16, bf16)");
  return static_cast<size_t>(ld) * dtype_block_bytes(dt);
}

}  // namespace

float dot_f32_isa(CpuIsa isa, const float* a, const float* b, int64_t n) { return fns(isa).dot_f32(a, b, n); }

void dot_rows_heads_isa(CpuIsa isa, DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q,
                        int n_q, int64_t ld_q, int64_t head_dim, float scale, float* out, int64_t ld_out) {
  const size_t row_bytes = kv_row_bytes("dot_rows", kv_dtype, ld_k);
  fns(isa).dot_rows_heads(kv_dtype, static_cast<const uint8_t*>(K), row_bytes, n_rows, q, n_q, ld_q, head_dim, scale,
                          out, ld_out);
}

void dot_rows_isa(CpuIsa isa, DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q,
                  int64_t head_dim, float scale, float* out) {
  dot_rows_heads_isa(isa, kv_dtype, K, ld_k, n_rows, q, 1, head_dim, head_dim, scale, out, n_rows);
}

void axpy_rows_heads_isa(CpuIsa isa, DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p,
                         int n_p, int64_t ld_p, int64_t head_dim, float* out, int64_t ld_out) {
  const size_t row_bytes = kv_row_bytes("axpy_rows", kv_dtype, ld_v);
  fns(isa).axpy_rows_heads(kv_dtype, static_cast<const uint8_t*>(V), row_bytes, n_rows, p, n_p, ld_p, head_dim, out,
                           ld_out);
}

void axpy_rows_isa(CpuIsa isa, DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p,
                   int64_t head_dim, float* out) {
  axpy_rows_heads_isa(isa, kv_dtype, V, ld_v, n_rows, p, 1, n_rows, head_dim, out, head_dim);
}

float max_value_isa(CpuIsa isa, const float* p, int64_t n) { return fns(isa).max_value(p, n); }
float exp_shift_sum_isa(CpuIsa isa, float* p, int64_t n, float shift) { return fns(isa).exp_shift_sum(p, n, shift); }

float dot_f32(const float* a, const float* b, int64_t n) { return dot_f32_isa(active_cpu_isa(), a, b, n); }
float max_value(const float* p, int64_t n) { return max_value_isa(active_cpu_isa(), p, n); }
float exp_shift_sum(float* p, int64_t n, float shift) { return exp_shift_sum_isa(active_cpu_isa(), p, n, shift); }

void dot_rows(DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q, int64_t head_dim,
              float scale, float* out) {
  dot_rows_isa(active_cpu_isa(), kv_dtype, K, ld_k, n_rows, q, head_dim, scale, out);
}

void dot_rows_heads(DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q, int n_q, int64_t ld_q,
                    int64_t head_dim, float scale, float* out, int64_t ld_out) {
  dot_rows_heads_isa(active_cpu_isa(), kv_dtype, K, ld_k, n_rows, q, n_q, ld_q, head_dim, scale, out, ld_out);
}

void axpy_rows(DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p, int64_t head_dim,
               float* out) {
  axpy_rows_isa(active_cpu_isa(), kv_dtype, V, ld_v, n_rows, p, head_dim, out);
}

void axpy_rows_heads(DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p, int n_p, int64_t ld_p,
                     int64_t head_dim, float* out, int64_t ld_out) {
  axpy_rows_heads_isa(active_cpu_isa(), kv_dtype, V, ld_v, n_rows, p, n_p, ld_p, head_dim, out, ld_out);
}

}  // namespace hg::cpu
