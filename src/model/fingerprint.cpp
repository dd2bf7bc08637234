// The model's fingerprint: FNV-1a (64 bit) over every tensor's name, dtype and shape and over three
// 4 KiB samples of its bytes (start, middle, end). It keys what is stored per model (K_min
// profiles, prefill state files): the same weights in two files share it; a fine-tune, a
// requantization or another shape does not. Sampling keeps it to microseconds on a 16 GB model.
#include <algorithm>

#include "hybridgen/dtype.h"
#include "hybridgen/model.h"
#include "util/hash.h"

namespace hg {

namespace {

constexpr size_t kSample = 4096;

void add_tensor(Fnv1a& h, const TensorView& t) {
  if (!t.present()) return;
  h.add(t.name);
  h.add(std::string(dtype_name(t.dtype)));
  for (int64_t d : t.shape) h.add(d);
  h.add(static_cast<int64_t>(t.nbytes));
  const auto* bytes = static_cast<const unsigned char*>(t.data);
  const size_t n = std::min(kSample, t.nbytes);
  for (size_t offset : {size_t{0}, (t.nbytes - n) / 2, t.nbytes - n}) h.add(bytes + offset, n);
}

}  // namespace

std::string model_fingerprint(const Model& model) {
  Fnv1a h;
  const ModelWeights& w = model.weights;
  for (const TensorView* t :
       {&w.tok_embed, &w.pos_embed, &w.project_in, &w.project_out, &w.final_norm, &w.final_norm_bias, &w.lm_head})
    add_tensor(h, *t);
  for (const LayerWeights& l : w.layers)
    for (const TensorView* t : {&l.attn_norm, &l.attn_norm_bias, &l.wq, &l.wk, &l.wv, &l.bq, &l.bk, &l.bv, &l.wo, &l.bo,
                                &l.ffn_norm, &l.ffn_norm_bias, &l.w_gate, &l.w_up, &l.b_up, &l.w_down, &l.b_down})
      add_tensor(h, *t);
  return h.hex();
}

}  // namespace hg
