// hybridgen perplexity: split a token stream into non-overlapping windows of --ctx tokens and
// score every token of a window after its first (llama.cpp-style, without the half-window skip).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/npy.h"
#include "hybridgen/error.h"

namespace hg::cli {

namespace {

struct PerplexityOptions {
  ModelOptions model;
  RuntimeOptions runtime;
  PolicyOptions policy;
  std::string ref;  // --ref full: also run the reference policy and compare
  std::string file, ids_file;
  int max_windows = 0;
  bool json = false;
  std::string save_logits;
};

// log softmax(logits)[target], computed stably.
double log_prob(const float* logits, int vocab, int32_t target) {
  float max_v = logits[0];
  for (int i = 1; i < vocab; ++i) max_v = std::max(max_v, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_v));
  return static_cast<double>(logits[target] - max_v) - std::log(sum);
}

// KL(p_ref || p_policy) of two logit rows.
double kl_divergence(const float* ref, const float* pol, int vocab) {
  float mr = ref[0], mp = pol[0];
  for (int i = 1; i < vocab; ++i) {
    mr = std::max(mr, ref[i]);
    mp = std::max(mp, pol[i]);
  }
  double zr = 0.0, zp = 0.0;
  for (int i = 0; i < vocab; ++i) {
    zr += std::exp(static_cast<double>(ref[i] - mr));
    zp += std::exp(static_cast<double>(pol[i] - mp));
  }
  const double lzr = std::log(zr), lzp = std::log(zp);
  double kl = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double lr = ref[i] - mr - lzr, lp = pol[i] - mp - lzp;
    kl += std::exp(lr) * (lr - lp);
  }
  return std::max(0.0, kl);
}

int argmax_row(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

int64_t total_positions(const std::vector<std::pair<size_t, size_t>>& windows) {
  int64_t n = 0;
  for (auto [b, e] : windows) n += static_cast<int64_t>(e - b);
  return n;
}

// The progress status after window w: "window 2/5, ppl so far 12.3456".
std::string window_status(size_t w, size_t n_windows, double nll, int64_t scored) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "window %zu/%zu, ppl so far %.4f", w + 1, n_windows,
                std::exp(nll / static_cast<double>(std::max<int64_t>(scored, 1))));
  return buf;
}

// Token by token through the decode path (so the policy applies to every position), optionally
// beside a reference engine: perplexity of both, top-1 agreement and mean KL(ref || policy).
void run_decode_path(const PerplexityOptions& o, const Model& model, const std::vector<int32_t>& ids, int ctx,
                     const std::vector<std::pair<size_t, size_t>>& windows, NpyWriter* npy) {
  RuntimeOptions rt = o.runtime;
  rt.ctx = ctx;
  EngineOptions eo = engine_options(rt, model.spec, ctx, 1);
  apply_policy_options(o.policy, o.policy.preset, eo);
  Engine engine(model, eo);
  std::unique_ptr<Engine> ref;
  if (!o.ref.empty()) {
    EngineOptions ro = engine_options(rt, model.spec, ctx, 1);
    ro.policy = policy_preset(o.ref);
    ref = std::make_unique<Engine>(model, ro);
  }
  const int vocab = model.spec.vocab_size;
  std::vector<float> logits(static_cast<size_t>(vocab)), ref_logits(static_cast<size_t>(vocab));
  double nll = 0.0, ref_nll = 0.0, kl = 0.0;
  int64_t scored = 0, agree = 0;
  const int seq = 0;
  Progress progress("perplexity", total_positions(windows), "tokens", progress_options(o.runtime));
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto [b, e] = windows[w];
    engine.reset(0);
    if (ref) ref->reset(0);
    for (size_t i = b; i + 1 < e; ++i) {
      const int32_t tok = ids[i];
      if (i == b) {
        engine.prefill(0, std::span(&tok, 1), logits.data());
        if (ref) ref->prefill(0, std::span(&tok, 1), ref_logits.data());
      } else {
        engine.decode(std::span(&seq, 1), std::span(&tok, 1), logits.data());
        if (ref) ref->decode(std::span(&seq, 1), std::span(&tok, 1), ref_logits.data());
      }
      nll -= log_prob(logits.data(), vocab, ids[i + 1]);
      if (ref) {
        ref_nll -= log_prob(ref_logits.data(), vocab, ids[i + 1]);
        agree += argmax_row(logits.data(), vocab) == argmax_row(ref_logits.data(), vocab);
        kl += kl_divergence(ref_logits.data(), logits.data(), vocab);
      }
      if (npy) npy->write_rows(logits.data(), 1);
      ++scored;
      progress.advance(1);
    }
    if (npy) {  // the window's last position: its logits predict past the window
      const int32_t tok = ids[e - 1];
      engine.decode(std::span(&seq, 1), std::span(&tok, 1), logits.data());
      npy->write_rows(logits.data(), 1);
    }
    progress.advance(1, window_status(w, windows.size(), nll, scored));
  }
  progress.finish();
  const double n = static_cast<double>(scored);
  nlohmann::json j = {{"ppl", std::exp(nll / n)}, {"n_tokens", scored}, {"nll_mean", nll / n}, {"ctx", ctx},
                      {"windows", windows.size()}, {"policy", engine.describe_attention()}};
  if (ref) {
    j["ref_ppl"] = std::exp(ref_nll / n);
    j["top1_agreement"] = static_cast<double>(agree) / n;
    j["kl_mean"] = kl / n;
    j["ref"] = o.ref;
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("perplexity: %.4f over %lld tokens (%zu windows of %d, token by token; %s)\n", std::exp(nll / n),
                static_cast<long long>(scored), windows.size(), ctx, engine.describe_attention().c_str());
    if (ref)
      std::printf("reference %s: perplexity %.4f, top-1 agreement %.4f, mean KL(ref || policy) %.6f\n", o.ref.c_str(),
                  j["ref_ppl"].get<double>(), j["top1_agreement"].get<double>(), j["kl_mean"].get<double>());
  }
}

void run_perplexity(const PerplexityOptions& o) {
  setup_logging(o.runtime.verbose);
  if (o.file.empty() == o.ids_file.empty()) throw Error("give exactly one of -f FILE and --ids-file FILE");
  if (o.runtime.ctx == 1) throw Error("--ctx must be at least 2: a window scores every token after its first");
  if (o.max_windows < 0) throw Error("--max-windows must be >= 0 (0: all), got " + std::to_string(o.max_windows));
  auto model = load_model(o.model);
  std::vector<int32_t> ids;
  if (!o.ids_file.empty()) {
    ids = parse_ids(read_text_file(o.ids_file), o.ids_file);
  } else {
    auto tok = load_tokenizer(o.model, *model);
    if (!tok) throw Error("this model has no tokenizer: give --tokenizer FILE or --ids-file");
    ids = tok->encode(read_text_file(o.file), /*add_special=*/false);
  }
  if (ids.size() < 2) throw Error("perplexity needs at least 2 tokens, got " + std::to_string(ids.size()));

  const int vocab = model->spec.vocab_size;
  const int ctx = o.runtime.ctx > 0 ? o.runtime.ctx : std::min<int>(static_cast<int>(ids.size()), std::min(model->spec.max_ctx, 2048));
  if (!o.ref.empty() && o.ref != "full") throw Error("--ref: only 'full' is a reference policy, got '" + o.ref + "'");

  // Windows: [w*ctx, min((w+1)*ctx, n)); a final partial window counts when it has 2+ tokens.
  std::vector<std::pair<size_t, size_t>> windows;
  for (size_t b = 0; b < ids.size(); b += static_cast<size_t>(ctx)) {
    const size_t e = std::min(ids.size(), b + static_cast<size_t>(ctx));
    if (e - b >= 2) windows.emplace_back(b, e);
    if (o.max_windows > 0 && static_cast<int>(windows.size()) == o.max_windows) break;
  }
  std::unique_ptr<NpyWriter> npy;
  if (!o.save_logits.empty()) npy = std::make_unique<NpyWriter>(o.save_logits, total_positions(windows), vocab);

  if (o.policy.preset != "full" || !o.ref.empty()) {
    run_decode_path(o, *model, ids, ctx, windows, npy.get());
    if (npy) npy->close();
    return;
  }
  RuntimeOptions rt = o.runtime;
  rt.ctx = ctx;
  Engine engine(*model, engine_options(rt, model->spec, ctx, 1));
  std::vector<float> logits(static_cast<size_t>(ctx) * vocab);
  double nll = 0.0;
  int64_t scored = 0;
  Progress progress("perplexity", total_positions(windows), "tokens", progress_options(o.runtime));
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto [b, e] = windows[w];
    engine.reset(0);
    const std::span<const int32_t> window(ids.data() + b, e - b);
    engine.prefill(0, window, nullptr, logits.data());
    for (size_t i = 0; i + 1 < window.size(); ++i) nll -= log_prob(logits.data() + i * static_cast<size_t>(vocab), vocab, window[i + 1]);
    scored += static_cast<int64_t>(window.size()) - 1;
    if (npy) npy->write_rows(logits.data(), static_cast<int64_t>(window.size()));
    progress.advance(static_cast<int64_t>(window.size()), window_status(w, windows.size(), nll, scored));
  }
  progress.finish();
  if (npy) npy->close();
  const double nll_mean = nll / static_cast<double>(scored);
  if (o.json) {
    nlohmann::json j = {{"ppl", std::exp(nll_mean)}, {"n_tokens", scored}, {"nll_mean", nll_mean},
                        {"ctx", ctx}, {"windows", windows.size()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("perplexity: %.4f over %lld tokens (%zu windows of %d, mean NLL %.4f)\n", std::exp(nll_mean),
                static_cast<long long>(scored), windows.size(), ctx, nll_mean);
  }
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text over non-overlapping context windows");
  add_model_options(*cmd, o->model);
  add_runtime_options(*cmd, o->runtime);
  add_policy_options(*cmd, o->policy);
  cmd->add_option("--ref", o->ref, "also run this reference policy (full) token by token and report top-1 agreement and KL");
  cmd->add_option("-f,--file", o->file, "text file to evaluate");
  cmd->add_option("--ids-file", o->ids_file, "file holding a JSON array of token ids to evaluate");
  cmd->add_option("--max-windows", o->max_windows, "evaluate at most this many windows (0: all)");
  cmd->add_flag("--json", o->json, "print {\"ppl\", \"n_tokens\", \"nll_mean\"} as JSON");
  cmd->add_option("--save-logits", o->save_logits, "write the logits of every evaluated position as float32 .npy [positions, vocab]");
  cmd->callback([o] { run_perplexity(*o); });
}

}  // namespace hg::cli
