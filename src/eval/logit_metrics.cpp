#include "eval/logit_metrics.h"

#include <algorithm>
#include <cmath>

namespace hg::eval {

double log_prob(const float* logits, int vocab, int32_t target) {
  const float max_v = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_v));
  return static_cast<double>(logits[target] - max_v) - std::log(sum);
}

double kl_divergence(const float* ref, const float* policy, int vocab) {
  const float mr = *std::max_element(ref, ref + vocab);
  const float mp = *std::max_element(policy, policy + vocab);
  double zr = 0.0, zp = 0.0;
  for (int i = 0; i < vocab; ++i) {
    zr += std::exp(static_cast<double>(ref[i] - mr));
    zp += std::exp(static_cast<double>(policy[i] - mp));
  }
  const double lzr = std::log(zr), lzp = std::log(zp);
  double kl = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double lr = ref[i] - mr - lzr, lp = policy[i] - mp - lzp;
    kl += std::exp(lr) * (lr - lp);
  }
  return std::max(0.0, kl);
}

int argmax(const float* logits, int vocab) { return static_cast<int>(std::max_element(logits, logits + vocab) - logits); }

}  // namespace hg::eval
