// Llama / Qwen2 weight table, under HF names (model.layers.N.self_attn.q_proj.weight) or GGUF
// names (blk.N.attn_q.weight). Qwen2 adds q/k/v biases. lm_head is listed only when untied.
#include "model/weight_table.h"

namespace hg {

namespace {

struct Names {
  const char *embed, *final_norm, *lm_head, *layer_prefix;
  const char *attn_norm, *q, *k, *v, *o, *ffn_norm, *gate, *up, *down, *weight, *bias;
};

constexpr Names kHF = {"model.embed_tokens", "model.norm", "lm_head", "model.layers.",
                       "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                       "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                       "mlp.down_proj", ".weight", ".bias"};
constexpr Names kGGUF = {"token_embd", "output_norm", "output", "blk.", "attn_norm", "attn_q", "attn_k",
                         "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", ".weight",
                         ".bias"};

}  // namespace

std::vector<WeightSlot> llama_weight_slots(const ModelSpec& s, Naming naming, ModelWeights& w) {
  const Names& n = naming == Naming::HF ? kHF : kGGUF;
  const std::string W = n.weight, B = n.bias;
  const int64_t d = s.d_model, q = s.q_dim(), kv = s.kv_dim(), ff = s.d_ff;
  std::vector<WeightSlot> slots;
  auto add = [&](std::string name, std::vector<int64_t> shape, WeightKind kind, TensorView* dst) {
    slots.push_back({std::move(name), std::move(shape), kind, dst});
  };
  add(n.embed + W, {s.vocab_size, d}, WeightKind::Embedding, &w.tok_embed);
  for (int i = 0; i < s.n_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = n.layer_prefix + std::to_string(i) + ".";
    add(p + n.attn_norm + W, {d}, WeightKind::Norm, &l.attn_norm);
    add(p + n.q + W, {q, d}, WeightKind::Linear, &l.wq);
    add(p + n.k + W, {kv, d}, WeightKind::Linear, &l.wk);
    add(p + n.v + W, {kv, d}, WeightKind::Linear, &l.wv);
    if (s.qkv_bias) {
      add(p + n.q + B, {q}, WeightKind::Bias, &l.bq);
      add(p + n.k + B, {kv}, WeightKind::Bias, &l.bk);
      add(p + n.v + B, {kv}, WeightKind::Bias, &l.bv);
    }
    add(p + n.o + W, {d, q}, WeightKind::Linear, &l.wo);
    add(p + n.ffn_norm + W, {d}, WeightKind::Norm, &l.ffn_norm);
    add(p + n.gate + W, {ff, d}, WeightKind::Linear, &l.w_gate);
    add(p + n.up + W, {ff, d}, WeightKind::Linear, &l.w_up);
    add(p + n.down + W, {d, ff}, WeightKind::Linear, &l.w_down);
  }
  add(n.final_norm + W, {d}, WeightKind::Norm, &w.final_norm);
  if (!s.tied_embeddings) add(n.lm_head + W, {s.vocab_size, d}, WeightKind::Linear, &w.lm_head);
  return slots;
}

}  // namespace hg
