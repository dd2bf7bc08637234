// Rotary position embedding on [n, n_heads, head_dim] fp32 rows, in place.
#pragma once
#include <cstdint>

namespace hg::cpu {

// inv_freq[i] = theta^(-2i / rotary_dim), i < rotary_dim / 2, with llama3 scaling applied when
// `llama3` is set (HF's _compute_llama3_parameters), then divided by freq_factors[i] when
// freq_factors is not null (GGUF's rope_freqs.weight, as ggml's rope applies its freq_factors).
void rope_inv_freq(int rotary_dim, float theta, bool llama3, float factor, float low_freq_factor,
                   float high_freq_factor, int original_max_position, const float* freq_factors, float* inv_freq);

// interleaved = false: HF rotate_half pairs (i, i + rotary_dim/2); true: pairs (2i, 2i+1).
void rope_rows(float* x, const int32_t* pos, int n_heads, int head_dim, int rotary_dim,
               const float* inv_freq, bool interleaved, int64_t row_begin, int64_t row_end);

}  // namespace hg::cpu
