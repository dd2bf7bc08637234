// The query the host workers select with, one of three (--query; hybrid: refine):
//   exact        the device's own q of the layer, copied to the host when the layer reaches it;
//   speculative  q̃ = RoPE(Wq · norm(x) + bq) of layer ℓ+1 from layer ℓ's input x, with the host's
//                own copies of Wq, bq and the norm, so the host part of ℓ+1 runs while the device
//                computes layer ℓ (layers below --exact-layers use the exact query);
//   refine       selected with q̃, then the selected tokens scored again with the true q (over
//                every host token, --select all or --k -1, that is the exact query).
#pragma once
#include <memory>
#include <vector>

#include "attention/layer_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"

namespace hg {

class HostQuery {
 public:
  HostQuery(const Model& model, const Policy& policy);

  // The source in effect: the policy's, but exact for refine over every host token.
  QuerySource source() const { return source_; }
  // Whether layer ℓ's host part is computed ahead, from layer ℓ-1's input (layer 0's from its own).
  bool speculates(int layer) const { return source_ != QuerySource::Exact && layer >= exact_layers_; }
  // Whether a speculated layer's selection is scored again with the true query.
  bool refines(int layer) const { return source_ == QuerySource::Refine && speculates(layer); }
  // Whether layer ℓ needs the device's q on the host (exact or refined).
  bool needs_true_query(int layer) const { return source_ != QuerySource::Speculative || !speculates(layer); }

  // q̃ of one row at position `pos` from x [d_model] into q_out [n_heads][head_dim]. One call at a
  // time (the host stage runs one job at a time); the matmul splits over `pool`.
  void speculate(int layer, const float* x, int pos, float* q_out, ThreadPool& pool);

  // cos(q̃, q) per head, summed into stats (reported by --stats as q_cosine).
  void compare(const float* q_spec, const float* q_true, LayerStats& stats) const;

 private:
  struct HostLayer {  // the host's own copies
    TensorView wq;
    std::unique_ptr<cpu::PackedWeight> wq_packed;  // Wq for the packed GEMV, where it pays (or null)
    std::vector<float> bq, norm_w, norm_b;
  };
  const ModelSpec& spec_;
  QuerySource source_;
  int exact_layers_;
  std::vector<HostLayer> layers_;
  std::vector<float> inv_freq_;
  std::vector<float> norm_;             // norm(x) [d_model]
  cpu::MatmulWorkspace workspace_;      // the matmul's scratch
};

}  // namespace hg
