#include <cmath>

#include "kernels/cpu/rope.h"

namespace hg::cpu {

void rope_inv_freq(int rotary_dim, float theta, bool llama3, float factor, float low_freq_factor,
                   float high_freq_factor, int original_max_position, const float* freq_factors, float* inv_freq) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    // HF computes inv_freq in float32 from an int64 arange; match that rounding.
    float f = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    if (llama3) {
      const float low_freq_wavelen = static_cast<float>(original_max_position) / low_freq_factor;
      const float high_freq_wavelen = static_cast<float>(original_max_position) / high_freq_factor;
      const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
      if (wavelen > low_freq_wavelen) {
        f = f / factor;
      } else if (wavelen >= high_freq_wavelen) {
        const float smooth = (static_cast<float>(original_max_position) / wavelen - low_freq_factor) /
                             (high_freq_factor - low_freq_factor);
        f = (1.0f - smooth) * f / factor + smooth * f;
      }
    }
    if (freq_factors != nullptr) f /= freq_factors[i];
    inv_freq[i] = f;
  }
}

void rope_rows(float* x, const int32_t* pos, int n_heads, int head_dim, int rotary_dim,
               const float* inv_freq, bool interleaved, int64_t row_begin, int64_t row_end) {
  const int half = rotary_dim / 2;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float p = static_cast<float>(pos[r]);
    for (int i = 0; i < half; ++i) {
      const float angle = p * inv_freq[i];  // float32 product, as HF does
      const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
      const int a = interleaved ? 2 * i : i;
      const int b = interleaved ? 2 * i + 1 : i + half;
      for (int h = 0; h < n_heads; ++h) {
        float* xh = x + (r * n_heads + h) * head_dim;
        const float x0 = xh[a], x1 = xh[b];
        xh[a] = x0 * c - x1 * s;
        xh[b] = x1 * c + x0 * s;
      }
    }
  }
}

}  // namespace hg::cpu
