// The transformer forward pass over a set of token rows, written once for OPT, Llama and Qwen2
// (the architectures differ in norm type, biases, positions and MLP, all visible in the spec and
// in which weights are present).
#pragma once
#include <vector>

#include "device/device.h"
#include "hybridgen/model.h"
#include "hybridgen/prefill_state.h"
#include "attention/layer_attention.h"

namespace hg {


struct DeviceLayer {
  DeviceTensor attn_norm, attn_norm_bias;  // [d_model]
  DeviceTensor wq, wk, wv, wo;             // [q_dim, d_model], [kv_dim, d_model] x2, [d_model, q_dim]
  DeviceTensor bq, bk, bv, bo;             // [q_dim], [kv_dim] x2, [d_model]
  DeviceTensor ffn_norm, ffn_norm_bias;    // [d_model]
  DeviceTensor w_gate, w_up, b_up;         // [d_ff, d_model] x2, [d_ff]
  DeviceTensor w_down, b_down;             // [d_model, d_ff], [d_model]
};

struct DeviceWeights {
  DeviceTensor tok_embed;                    // [vocab, d_model or proj_dim]
  DeviceTensor pos_embed;                    // [max_ctx + 2, d_model] (OPT)
  DeviceTensor project_in, project_out;      // [d_model, proj_dim], [proj_dim, d_model] (OPT)
  std::vector<DeviceLayer> layers;
  DeviceTensor final_norm, final_norm_bias;  // [d_model]
  DeviceTensor lm_head;                      // [vocab, d_model or proj_dim]
};

std::unique_ptr<DeviceWeights> upload_weights(Device& device, const Model& model);

// Activations for up to max_rows rows, allocated once on the device.
struct Scratch {
  Scratch(Device& device, const ModelSpec& spec, int max_rows);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // Rows of logits computed at once: a prefill chunk's logits of every row (perplexity) come in
  // slices, so the scratch does not hold [max_rows, vocab] (622 MB at 1024 rows of Qwen2's 151936).
  static constexpr int kMaxLogitRows = 256;

  Device& device;
  int max_rows;
  int logit_rows;                 // min(max_rows, kMaxLogitRows)
  float* x;                       // [max_rows, d_model] residual stream
  float* h;                       // [max_rows, max(d_model, proj_dim)] normed input / projections
  float* q;                       // [max_rows, q_dim]
  float* k;                       // [max_rows, kv_dim]
  float* v;                       // [max_rows, kv_dim]
  float* attn;                    // [max_rows, q_dim]
  float* gate;                    // [max_rows, d_ff]
  float* up;                      // [max_rows, d_ff]
  float* logits;                  // [logit_rows, vocab]
  std::vector<int32_t> ids, pos;  // host copies of the rows' tokens and positions
  std::vector<int32_t> pos_ids;   // OPT: rows of the learned position table (pos + offset)
};

// Runs the rows through the model; the attention stage stores their K and V and attends (the
// caller brackets this with begin_step / end_step). logits_all: [rows, vocab] or null;
// logits_last: [vocab] of the last row or null. A recorded prefill passes a RecordingAttention
// (engine/prefill_recorder.h) as the stage.
void forward(Device& device, const ModelSpec& spec, const DeviceWeights& w, LayerAttention& attn, Scratch& s,
             const std::vector<TokenRow>& rows, float* logits_all, float* logits_last);

}  // namespace hg
