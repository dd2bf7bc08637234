// Dot-product kernels for attention over KV caches (host logits, P·V).
//
// K and V rows are head_dim values of `kv_dtype` (F32, F16 or BF16) with a row stride of ld_k /
// ld_v elements, so a cache laid out [token, n_kv_heads * head_dim] is read in place. These
// stream the cache once and are bound by its bytes; accumulation is fp32.
#pragma once
#include <cstdint>

#include "hybridgen/dtype.h"
#include "kernels/cpu/cpu_isa.h"

namespace hg::cpu {

// sum_i a[i] * b[i]
float dot_f32(const float* a, const float* b, int64_t n);

// out[i] = scale * (q · K[i, 0:head_dim])   for i < n_rows
void dot_rows(DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q, int64_t head_dim,
              float scale, float* out);

// out[h * ld_out + i] = scale * (q[h * ld_q : +head_dim] · K[i, 0:head_dim])   for h < n_q, i < n_rows
// The n_q query heads of a GQA group share one pass over the keys (each row is read and widened
// once); dot_rows is the n_q = 1 case.
void dot_rows_heads(DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q, int n_q, int64_t ld_q,
                    int64_t head_dim, float scale, float* out, int64_t ld_out);

// out[d] += sum_i p[i] * V[i, d]   for d < head_dim
void axpy_rows(DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p, int64_t head_dim,
               float* out);

// out[h * ld_out + d] += sum_i p[h * ld_p + i] * V[i, d]   for h < n_p, d < head_dim
// The n_p heads of a GQA group share one pass over the values (each row is read and widened once
// per group of three); axpy_rows is the n_p = 1 case.
void axpy_rows_heads(DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p, int n_p, int64_t ld_p,
                     int64_t head_dim, float* out, int64_t ld_out);

// max of p[0 .. n) (-inf when n = 0)
float max_value(const float* p, int64_t n);
// p[i] = e^(p[i] - shift) for i < n, shift >= every p[i] (softmax numerators); returns their sum.
// A polynomial exp (relative error < 2e-7), not libm's.
float exp_shift_sum(float* p, int64_t n, float shift);

// The same with a given ISA (must be supported by this CPU); tests run every supported one.
float dot_f32_isa(CpuIsa isa, const float* a, const float* b, int64_t n);
void dot_rows_isa(CpuIsa isa, DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q,
                  int64_t head_dim, float scale, float* out);
void dot_rows_heads_isa(CpuIsa isa, DType kv_dtype, const void* K, int64_t ld_k, int64_t n_rows, const float* q,
                        int n_q, int64_t ld_q, int64_t head_dim, float scale, float* out, int64_t ld_out);
void axpy_rows_isa(CpuIsa isa, DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p,
                   int64_t head_dim, float* out);
void axpy_rows_heads_isa(CpuIsa isa, DType kv_dtype, const void* V, int64_t ld_v, int64_t n_rows, const float* p,
                         int n_p, int64_t ld_p, int64_t head_dim, float* out, int64_t ld_out);
float max_value_isa(CpuIsa isa, const float* p, int64_t n);
float exp_shift_sum_isa(CpuIsa isa, float* p, int64_t n, float shift);

}  // namespace hg::cpu
