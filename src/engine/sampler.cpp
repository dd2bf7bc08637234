#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace hg {

int32_t argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

Sampler::Sampler(const SamplerOptions& options, int vocab_size) : opt_(options), rng_(options.seed) {
  candidates_.reserve(static_cast<size_t>(vocab_size));
  probs_.reserve(static_cast<size_t>(vocab_size));
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> history) {
  const int vocab = static_cast<int>(candidates_.capacity());
  if (opt_.repeat_penalty != 1.0f && opt_.repeat_last_n != 0) {
    const size_t n = opt_.repeat_last_n < 0 ? history.size()
                                            : std::min(history.size(), static_cast<size_t>(opt_.repeat_last_n));
    // Penalize each distinct recent token once.
    auto& recent = recent_;
    recent.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
    std::sort(recent.begin(), recent.end());
    recent.erase(std::unique(recent.begin(), recent.end()), recent.end());
    for (int32_t t : recent) {
      if (t < 0 || t >= vocab) continue;
      logits[t] = logits[t] > 0 ? logits[t] / opt_.repeat_penalty : logits[t] * opt_.repeat_penalty;
    }
  }
  if (opt_.temperature <= 0.0f) return argmax(logits, vocab);

  candidates_.clear();
  for (int i = 0; i < vocab; ++i) candidates_.emplace_back(logits[i] / opt_.temperature, i);
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (opt_.top_k > 0 && static_cast<size_t>(opt_.top_k) < keep) {
    keep = static_cast<size_t>(opt_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // softmax over the kept candidates (sorted, so [0] is the max)
  const float max_logit = candidates_[0].first;
  double sum = 0.0;
  auto& probs = probs_;
  probs.resize(keep);
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit));
    sum += probs[i];
  }
  for (size_t i = 0; i < keep; ++i) probs[i] /= sum;
  // min-p: drop tokens whose probability is below min_p times the best one
  if (opt_.min_p > 0.0f) {
    size_t k = 1;
    while (k < keep && probs[k] >= opt_.min_p * probs[0]) ++k;
    keep = k;
  }
  // top-p: the smallest prefix whose mass reaches top_p
  if (opt_.top_p < 1.0f) {
    double mass = 0.0;
    size_t k = 0;
    while (k < keep) {
      mass += probs[k++];
      if (mass >= opt_.top_p) break;
    }
    keep = std::max<size_t>(k, 1);
  }
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r <= 0.0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace hg
