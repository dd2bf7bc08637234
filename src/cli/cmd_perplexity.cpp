// hybridgen perplexity: split a token stream into non-overlapping windows of --ctx tokens and
// score every token of a window after its first (llama.cpp-style, without the half-window skip).
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

void run_perplexity(const PerplexityOptions& o) {
  setup_logging(o.runtime.verbose);
  if (o.file.empty() == o.ids_file.empty()) throw Error("give exactly one of -f FILE and --ids-file FILE");
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
  RuntimeOptions rt = o.runtime;
  rt.ctx = ctx;
  Engine engine(*model, engine_options(rt, model->spec, ctx, 1));

  // Windows: [w*ctx, min((w+1)*ctx, n)); a final partial window counts when it has 2+ tokens.
  std::vector<std::pair<size_t, size_t>> windows;
  for (size_t b = 0; b < ids.size(); b += static_cast<size_t>(ctx)) {
    const size_t e = std::min(ids.size(), b + static_cast<size_t>(ctx));
    if (e - b >= 2) windows.emplace_back(b, e);
    if (o.max_windows > 0 && static_cast<int>(windows.size()) == o.max_windows) break;
  }
  size_t positions = 0;
  for (auto [b, e] : windows) positions += e - b;
  std::unique_ptr<NpyWriter> npy;
  if (!o.save_logits.empty()) npy = std::make_unique<NpyWriter>(o.save_logits, static_cast<int64_t>(positions), vocab);

  std::vector<float> logits(static_cast<size_t>(ctx) * vocab);
  double nll = 0.0;
  int64_t scored = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto [b, e] = windows[w];
    engine.reset(0);
    const std::span<const int32_t> window(ids.data() + b, e - b);
    engine.prefill(0, window, nullptr, logits.data());
    for (size_t i = 0; i + 1 < window.size(); ++i) nll -= log_prob(logits.data() + i * static_cast<size_t>(vocab), vocab, window[i + 1]);
    scored += static_cast<int64_t>(window.size()) - 1;
    if (npy) npy->write_rows(logits.data(), static_cast<int64_t>(window.size()));
    if (!o.json)
      std::fprintf(stderr, "[%zu/%zu] ppl so far %.4f\n", w + 1, windows.size(), std::exp(nll / static_cast<double>(scored)));
  }
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
  cmd->add_option("-f,--file", o->file, "text file to evaluate");
  cmd->add_option("--ids-file", o->ids_file, "file holding a JSON array of token ids to evaluate");
  cmd->add_option("--max-windows", o->max_windows, "evaluate at most this many windows (0: all)");
  cmd->add_flag("--json", o->json, "print {\"ppl\", \"n_tokens\", \"nll_mean\"} as JSON");
  cmd->add_option("--save-logits", o->save_logits, "write the logits of every evaluated position as float32 .npy [positions, vocab]");
  cmd->callback([o] { run_perplexity(*o); });
}

}  // namespace hg::cli
