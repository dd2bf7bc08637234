// OPT weight table (HF names). Post-LayerNorm variants (do_layer_norm_before = false, OPT-350m)
// have no decoder-level final LayerNorm; word_embed_proj_dim != d_model adds project_in/out.
#include "hybridgen/error.h"
#include "model/weight_table.h"

namespace hg {

std::vector<WeightSlot> opt_weight_slots(const ModelSpec& s, const std::string& prefix, ModelWeights& w) {
  const int64_t d = s.d_model, proj = s.word_embed_proj_dim, ff = s.d_ff;
  std::vector<WeightSlot> slots;
  auto add = [&](std::string name, std::vector<int64_t> shape, WeightKind kind, TensorView* dst) {
    slots.push_back({std::move(name), std::move(shape), kind, dst});
  };
  add(prefix + "embed_tokens.weight", {s.vocab_size, proj}, WeightKind::Embedding, &w.tok_embed);
  add(prefix + "embed_positions.weight", {s.max_ctx + s.pos_offset, d}, WeightKind::Embedding, &w.pos_embed);
  if (proj != d) {
    add(prefix + "project_in.weight", {d, proj}, WeightKind::Linear, &w.project_in);
    add(prefix + "project_out.weight", {proj, d}, WeightKind::Linear, &w.project_out);
  }
  for (int i = 0; i < s.n_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    add(p + "self_attn_layer_norm.weight", {d}, WeightKind::Norm, &l.attn_norm);
    add(p + "self_attn_layer_norm.bias", {d}, WeightKind::NormBias, &l.attn_norm_bias);
    add(p + "self_attn.q_proj.weight", {d, d}, WeightKind::Linear, &l.wq);
    add(p + "self_attn.q_proj.bias", {d}, WeightKind::Bias, &l.bq);
    add(p + "self_attn.k_proj.weight", {d, d}, WeightKind::Linear, &l.wk);
    add(p + "self_attn.k_proj.bias", {d}, WeightKind::Bias, &l.bk);
    add(p + "self_attn.v_proj.weight", {d, d}, WeightKind::Linear, &l.wv);
    add(p + "self_attn.v_proj.bias", {d}, WeightKind::Bias, &l.bv);
    add(p + "self_attn.out_proj.weight", {d, d}, WeightKind::Linear, &l.wo);
    add(p + "self_attn.out_proj.bias", {d}, WeightKind::Bias, &l.bo);
    add(p + "final_layer_norm.weight", {d}, WeightKind::Norm, &l.ffn_norm);
    add(p + "final_layer_norm.bias", {d}, WeightKind::NormBias, &l.ffn_norm_bias);
    add(p + "fc1.weight", {ff, d}, WeightKind::Linear, &l.w_up);
    add(p + "fc1.bias", {ff}, WeightKind::Bias, &l.b_up);
    add(p + "fc2.weight", {d, ff}, WeightKind::Linear, &l.w_down);
    add(p + "fc2.bias", {d}, WeightKind::Bias, &l.b_down);
  }
  // HF builds the decoder-level final LayerNorm only for pre-LN models.
  if (s.do_layer_norm_before) {
    add(prefix + "final_layer_norm.weight", {d}, WeightKind::Norm, &w.final_norm);
    add(prefix + "final_layer_norm.bias", {d}, WeightKind::NormBias, &w.final_norm_bias);
  }
  return slots;
}

}  // namespace hg
