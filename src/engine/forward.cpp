#include "engine/forward.h"

#include <algorithm>
#include <cmath>

#include "hybridgen/error.h"

namespace hg {

namespace {

DeviceLayer upload_layer(Device& d, const LayerWeights& l) {
  DeviceLayer o;
  o.attn_norm = d.upload_weight(l.attn_norm);
  o.attn_norm_bias = d.upload_weight(l.attn_norm_bias);
  o.wq = d.upload_weight(l.wq);
  o.wk = d.upload_weight(l.wk);
  o.wv = d.upload_weight(l.wv);
  o.wo = d.upload_weight(l.wo);
  o.bq = d.upload_weight(l.bq);
  o.bk = d.upload_weight(l.bk);
  o.bv = d.upload_weight(l.bv);
  o.bo = d.upload_weight(l.bo);
  o.ffn_norm = d.upload_weight(l.ffn_norm);
  o.ffn_norm_bias = d.upload_weight(l.ffn_norm_bias);
  o.w_gate = d.upload_weight(l.w_gate);
  o.w_up = d.upload_weight(l.w_up);
  o.b_up = d.upload_weight(l.b_up);
  o.w_down = d.upload_weight(l.w_down);
  o.b_down = d.upload_weight(l.b_down);
  return o;
}

// norm(x): LayerNorm when the norm has a bias (OPT), RMSNorm otherwise.
void norm(Device& d, const ModelSpec& spec, const DeviceTensor& w, const DeviceTensor& b, const float* x, int n,
          float* y) {
  if (b.present())
    d.layernorm(x, w, b, spec.norm_eps, n, spec.d_model, y);
  else
    d.rmsnorm(x, w, spec.norm_eps, n, spec.d_model, y);
}

RopeParams rope_params(const ModelSpec& spec) {
  RopeParams p;
  p.head_dim = spec.head_dim;
  p.rotary_dim = spec.head_dim;
  p.theta = spec.rope_theta;
  p.layout = spec.rope_layout;
  p.scaling = spec.rope_scaling;
  if (!spec.rope_freq_factors.empty()) p.freq_factors = spec.rope_freq_factors.data();
  return p;
}

void transformer_layer(Device& d, const ModelSpec& spec, const DeviceLayer& l, LayerAttention& attn, Scratch& s,
                       int layer, const std::vector<TokenRow>& rows) {
  const int n = static_cast<int>(rows.size());
  const bool pre_norm = spec.do_layer_norm_before || !spec.is_opt();
  attn.layer_input(layer, s.x, rows);

  // h = norm(x)  [n, d_model]   (post-LN OPT normalizes after the residual instead)
  const float* attn_in = s.x;
  if (pre_norm) {
    norm(d, spec, l.attn_norm, l.attn_norm_bias, s.x, n, s.h);
    attn_in = s.h;
  }
  // q, k, v = W·h + b  [n, q_dim], [n, kv_dim], [n, kv_dim]  (one pass over the shared input)
  const Device::MatmulOut qkv[3] = {{&l.wq, &l.bq, s.q}, {&l.wk, &l.bk, s.k}, {&l.wv, &l.bv, s.v}};
  d.matmul_group(attn_in, n, qkv, 3);
  // RoPE(q), RoPE(k) at each row's position (OPT uses learned positions instead)
  if (!spec.is_opt()) {
    const RopeParams rp = rope_params(spec);
    d.rope(s.q, s.pos.data(), n, spec.n_heads, rp);
    d.rope(s.k, s.pos.data(), n, spec.n_kv_heads, rp);
  }
  // attn = softmax(q·Kᵀ/√d)·V over each sequence's tokens, wherever they live  [n, q_dim]
  attn.attend(layer, s.q, s.k, s.v, rows, s.attn);
  // x += Wo·attn + bo  (the residual add fused into the matmul)
  const Device::MatmulOut wo{&l.wo, &l.bo, s.x, true};
  d.matmul_group(s.attn, n, &wo, 1);
  if (!pre_norm) norm(d, spec, l.attn_norm, l.attn_norm_bias, s.x, n, s.x);

  // h = norm(x)
  const float* ffn_in = s.x;
  if (pre_norm) {
    norm(d, spec, l.ffn_norm, l.ffn_norm_bias, s.x, n, s.h);
    ffn_in = s.h;
  }
  const int64_t ff = static_cast<int64_t>(n) * spec.d_ff;
  if (l.w_gate.present()) {
    // SwiGLU: up = silu(W_gate·h) ⊙ (W_up·h)  [n, d_ff]
    const Device::MatmulOut gate_up[2] = {{&l.w_gate, nullptr, s.gate}, {&l.w_up, &l.b_up, s.up}};
    d.matmul_group(ffn_in, n, gate_up, 2);
    d.silu_mul(s.gate, s.up, ff);
  } else {
    // OPT: relu(fc1·h + b1)  [n, d_ff]
    d.matmul(l.w_up, l.b_up, ffn_in, n, s.gate);
    d.relu(s.gate, ff);
  }
  // x += W_down·up + b_down
  const Device::MatmulOut down{&l.w_down, &l.b_down, s.x, true};
  d.matmul_group(s.gate, n, &down, 1);
  if (!pre_norm) norm(d, spec, l.ffn_norm, l.ffn_norm_bias, s.x, n, s.x);
}

// logits = lm_head · project_out(norm(x))  for rows [first, first + n), in slices of the logits
// scratch (Scratch::logit_rows)
void output_head(Device& d, const ModelSpec& spec, const DeviceWeights& w, Scratch& s, int first, int n,
                 float* logits_host) {
  for (int r0 = first; r0 < first + n; r0 += s.logit_rows) {
    const int m = std::min(s.logit_rows, first + n - r0);
    const float* x = s.x + static_cast<int64_t>(r0) * spec.d_model;
    const float* head_in = x;
    if (w.final_norm.present()) {
      norm(d, spec, w.final_norm, w.final_norm_bias, x, m, s.h);
      head_in = s.h;
    }
    if (w.project_out.present()) {
      d.matmul(w.project_out, DeviceTensor{}, head_in, m, s.q);
      head_in = s.q;
    }
    d.matmul(w.lm_head, DeviceTensor{}, head_in, m, s.logits);
    d.copy_to_host(logits_host + static_cast<int64_t>(r0 - first) * spec.vocab_size, s.logits,
                   sizeof(float) * static_cast<size_t>(m) * spec.vocab_size);
  }
}

}  // namespace

std::unique_ptr<DeviceWeights> upload_weights(Device& d, const Model& model) {
  const ModelWeights& mw = model.weights;
  auto w = std::make_unique<DeviceWeights>();
  w->tok_embed = d.upload_weight(mw.tok_embed);
  w->pos_embed = d.upload_weight(mw.pos_embed);
  w->project_in = d.upload_weight(mw.project_in);
  w->project_out = d.upload_weight(mw.project_out);
  for (const auto& l : mw.layers) w->layers.push_back(upload_layer(d, l));
  w->final_norm = d.upload_weight(mw.final_norm);
  w->final_norm_bias = d.upload_weight(mw.final_norm_bias);
  w->lm_head = mw.lm_head.data == mw.tok_embed.data ? w->tok_embed : d.upload_weight(mw.lm_head);
  return w;
}

Scratch::Scratch(Device& dev, const ModelSpec& spec, int rows)
    : device(dev), max_rows(rows), logit_rows(std::min(rows, kMaxLogitRows)) {
  auto f = [&](int64_t per_row, int64_t n = 0) {
    return static_cast<float*>(dev.alloc(sizeof(float) * per_row * (n > 0 ? n : rows)));
  };
  const int64_t wide = std::max<int64_t>({spec.d_model, spec.word_embed_proj_dim, spec.q_dim()});
  x = f(spec.d_model);
  h = f(wide);
  q = f(wide);
  k = f(spec.kv_dim());
  v = f(spec.kv_dim());
  attn = f(spec.q_dim());
  gate = f(spec.d_ff);
  up = f(spec.d_ff);
  logits = f(spec.vocab_size, logit_rows);
  ids.resize(static_cast<size_t>(rows));
  pos.resize(static_cast<size_t>(rows));
  pos_ids.resize(static_cast<size_t>(rows));
}

Scratch::~Scratch() {
  for (float* p : {x, h, q, k, v, attn, gate, up, logits}) device.free(p);
}

void forward(Device& d, const ModelSpec& spec, const DeviceWeights& w, LayerAttention& attn, Scratch& s,
             const std::vector<TokenRow>& rows, float* logits_all, float* logits_last) {
  const int n = static_cast<int>(rows.size());
  if (n > s.max_rows) throw Error("forward: " + std::to_string(n) + " rows > scratch of " + std::to_string(s.max_rows));
  for (int i = 0; i < n; ++i) {
    s.ids[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)].token;
    s.pos[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)].pos;
  }

  // x = embed(tokens) (OPT: project_in, + learned position embedding at pos + 2)  [n, d_model]
  if (w.project_in.present()) {
    d.embed(w.tok_embed, s.ids.data(), n, s.h);
    d.matmul(w.project_in, DeviceTensor{}, s.h, n, s.x);
  } else {
    d.embed(w.tok_embed, s.ids.data(), n, s.x);
  }
  if (w.pos_embed.present()) {
    for (int i = 0; i < n; ++i) s.pos_ids[static_cast<size_t>(i)] = s.pos[static_cast<size_t>(i)] + spec.pos_offset;
    d.embed(w.pos_embed, s.pos_ids.data(), n, s.h);
    d.add(s.x, s.h, static_cast<int64_t>(n) * spec.d_model);
  }

  for (int layer = 0; layer < spec.n_layers; ++layer)
    transformer_layer(d, spec, w.layers[static_cast<size_t>(layer)], attn, s, layer, rows);
  attn.layers_done();

  if (logits_all) output_head(d, spec, w, s, 0, n, logits_all);
  if (logits_last) output_head(d, spec, w, s, n - 1, 1, logits_last);
}

}  // namespace hg
