// describe(): the model summary printed by `hybridgen info`.
#include <cstdio>
#include <map>
#include <set>

#include "hybridgen/model.h"
#include "util/strings.h"

namespace hg {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

void collect(const TensorView& t, std::set<const void*>& seen, std::map<std::string, std::pair<int, size_t>>& hist) {
  if (!t.present() || !seen.insert(t.data).second) return;
  auto& h = hist[std::string(dtype_name(t.dtype))];
  h.first += 1;
  h.second += t.nbytes;
}

}  // namespace

std::string describe(const Model& m) {
  const ModelSpec& s = m.spec;
  std::string out;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
    out += '\n';
  };
  add("model:        %s (%s, %s)", s.name.c_str(), std::string(arch_name(s.arch)).c_str(), m.format.c_str());
  add("source:       %s", m.source.string().c_str());
  add("layers:       %d   d_model %d   d_ff %d   vocab %d   max_ctx %d", s.n_layers, s.d_model, s.d_ff,
      s.vocab_size, s.max_ctx);
  add("attention:    %d heads, %d kv heads, head_dim %d", s.n_heads, s.n_kv_heads, s.head_dim);
  if (s.is_opt()) {
    add("opt:          %s-LayerNorm, word_embed_proj_dim %d, positions offset %d",
        s.do_layer_norm_before ? "pre" : "post", s.word_embed_proj_dim, s.pos_offset);
  } else {
    add("rope:         theta %g, %s layout%s", static_cast<double>(s.rope_theta),
        s.rope_layout == RopeLayout::Interleaved ? "interleaved" : "rotate-half",
        s.rope_scaling.llama3         ? ", llama3 scaling"
        : s.rope_freq_factors.empty() ? ""
                                      : ", per-pair frequency factors (rope_freqs.weight)");
  }
  add("norm eps:     %g   tied embeddings: %s   qkv bias: %s", static_cast<double>(s.norm_eps),
      s.tied_embeddings ? "yes" : "no", s.qkv_bias ? "yes" : "no");
  add("parameters:   %.3f M   weights %s", static_cast<double>(m.n_params()) / 1e6,
      human_bytes(static_cast<double>(m.weight_bytes())).c_str());
  add("kv per token: %s (f16, all layers)",
      human_bytes(2.0 * 2.0 * s.n_layers * s.kv_dim()).c_str());

  std::set<const void*> seen;
  std::map<std::string, std::pair<int, size_t>> hist;
  const ModelWeights& w = m.weights;
  for (const TensorView* t : {&w.tok_embed, &w.pos_embed, &w.project_in, &w.project_out}) collect(*t, seen, hist);
  for (const LayerWeights& l : w.layers)
    for (const TensorView* t : {&l.attn_norm, &l.attn_norm_bias, &l.wq, &l.wk, &l.wv, &l.bq, &l.bk, &l.bv, &l.wo,
                                &l.bo, &l.ffn_norm, &l.ffn_norm_bias, &l.w_gate, &l.w_up, &l.b_up, &l.w_down,
                                &l.b_down})
      collect(*t, seen, hist);
  for (const TensorView* t : {&w.final_norm, &w.final_norm_bias, &w.lm_head}) collect(*t, seen, hist);
  const std::string types = join(hist, ", ", [](const auto& type_hist) {
    const auto& [name, h] = type_hist;
    return name + " x" + std::to_string(h.first) + " (" + human_bytes(static_cast<double>(h.second)) + ")";
  });
  add("dtypes:       %s", types.c_str());
  add("tok_embed:    %s", std::string(dtype_name(w.tok_embed.dtype)).c_str());
  return out;
}

}  // namespace hg
