#include "attention/selectors/infinigen_skew.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <numeric>

namespace hg {

int partial_channel_count(int head_dim, float ratio) {
  return std::clamp(static_cast<int>(static_cast<float>(head_dim) * ratio), 1, head_dim);
}

std::vector<float> skew_matrix(const float* q, int64_t n_rows, int head_dim) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::MatrixXd m = Eigen::Map<const RowMajor>(q, n_rows, head_dim).cast<double>();
  // V of the SVD Q = UΣVᵀ is the eigenvector basis of the Gram matrix QᵀQ = VΣ²Vᵀ [head_dim, head_dim]:
  // the symmetric eigensolver on it gives the same basis (up to each column's sign, which the
  // partial scores do not see: query and key are projected on the same column) for a fraction of
  // a full SVD's compile time, and a complete basis even when the prompt has fewer rows than
  // head_dim. Its eigenvalues come in increasing order: A takes the columns from the last.
  const Eigen::MatrixXd gram = m.transpose() * m;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);
  const Eigen::MatrixXd& v = eig.eigenvectors();  // [head_dim][head_dim], columns by increasing σ²
  std::vector<float> a(static_cast<size_t>(head_dim) * head_dim);
  for (int d = 0; d < head_dim; ++d)
    for (int c = 0; c < head_dim; ++c)
      a[static_cast<size_t>(d) * head_dim + c] = static_cast<float>(v(d, head_dim - 1 - c));
  return a;
}

std::vector<int32_t> choose_channels(const float* q, int64_t n_rows, const std::vector<float>& a, int head_dim,
                                     int n_partial) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::MatrixXd rotated = Eigen::Map<const RowMajor>(q, n_rows, head_dim).cast<double>() *
                                  Eigen::Map<const RowMajor>(a.data(), head_dim, head_dim).cast<double>();
  const Eigen::VectorXd weight = rotated.cwiseAbs().colwise().sum().transpose();  // Σ_rows |q A| per channel
  std::vector<int32_t> order(static_cast<size_t>(head_dim));
  std::iota(order.begin(), order.end(), 0);
  const int n = std::clamp(n_partial, 0, head_dim);
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](int32_t x, int32_t y) { return weight(x) > weight(y) || (weight(x) == weight(y) && x < y); });
  order.resize(static_cast<size_t>(n));
  std::sort(order.begin(), order.end());
  return order;
}

void PartialProjection::project(const float* x, float* out) const {
  for (size_t c = 0; c < channels.size(); ++c) {
    const float* b = basis.data() + c * static_cast<size_t>(head_dim);
    float s = 0;
    for (int d = 0; d < head_dim; ++d) s += x[d] * b[d];
    out[c] = s;
  }
}

PartialProjection make_partial_projection(const float* q, int64_t n_rows, int head_dim, int n_partial) {
  PartialProjection p;
  p.head_dim = head_dim;
  const std::vector<float> a = skew_matrix(q, n_rows, head_dim);
  p.channels = choose_channels(q, n_rows, a, head_dim, n_partial);
  p.basis.resize(p.channels.size() * static_cast<size_t>(head_dim));
  for (size_t c = 0; c < p.channels.size(); ++c)
    for (int d = 0; d < head_dim; ++d)
      p.basis[c * static_cast<size_t>(head_dim) + static_cast<size_t>(d)] =
          a[static_cast<size_t>(d) * head_dim + static_cast<size_t>(p.channels[c])];
  return p;
}

}  // namespace hg
