#include "attention/selectors/top_k.h"

#include <algorithm>
#include <numeric>

namespace hg {

void top_k_indices(const float* scores, int64_t n, int K, int32_t* out, std::vector<int32_t>& order) {
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a > b); };
  std::nth_element(order.begin(), order.begin() + K, order.end(), better);
  std::sort(order.begin(), order.begin() + K);
  std::copy(order.begin(), order.begin() + K, out);
}

}  // namespace hg
