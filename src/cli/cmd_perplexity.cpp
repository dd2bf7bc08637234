// hybridgen perplexity, and the `ppl` and `fidelity` eval tasks: the options and the printing;
// the measurement is src/eval/perplexity.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/eval_tasks.h"
#include "cli/npy.h"
#include "device/device.h"
#include "eval/perplexity.h"
#include "eval/shared_prefill.h"
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
  int tail = 0;              // score the last `tail` predictions of each window (its context prefilled)
  bool second_half = false;  // llama-perplexity's scoring
  bool json = false;
  std::string save_logits;
  bool decode_path = false;    // token by token even for full attention without --ref (fidelity)
  bool ref_by_prefill = false; // the reference's logits from one prefill per window (fidelity)
  std::string prefill_cache;   // --prefill-cache DIR (with --tail)
};

void add_perplexity_options(CLI::App& cmd, PerplexityOptions& o) {
  add_model_options(cmd, o.model);
  add_runtime_options(cmd, o.runtime);
  add_policy_options(cmd, o.policy);
  cmd.add_option("--ref", o.ref, "also run this reference policy (full) token by token and report top-1 agreement and KL");
  cmd.add_option("-f,--file", o.file, "text file to evaluate");
  cmd.add_option("--ids-file", o.ids_file, "file holding a JSON array of token ids to evaluate");
  cmd.add_option("--max-windows", o.max_windows, "evaluate at most this many windows (0: all)");
  cmd.add_flag("--score-second-half", o.second_half,
               "score only the second half of each window, whole windows only, as llama-perplexity does "
               "(the first half is context)");
  cmd.add_option("--tail", o.tail,
                 "long context: score only the last N predictions of each window (whole windows only); the "
                 "tokens before them are prefilled in one pass (once for the policy and --ref where both prefill "
                 "exactly) and only the last N run token by token");
  add_prefill_cache_option(cmd, o.prefill_cache);
  cmd.add_option("--save-logits", o.save_logits,
                 "write the logits of every evaluated position as float32 .npy [positions, vocab]");
}

void check_perplexity_options(const PerplexityOptions& o) {
  if (o.file.empty() == o.ids_file.empty()) throw Error("give exactly one of -f FILE and --ids-file FILE");
  if (!o.ref.empty() && o.ref != "full") throw Error("--ref: only 'full' is a reference policy, got '" + o.ref + "'");
  if (o.runtime.ctx == 1) throw Error("--ctx must be at least 2: a window scores every token after its first");
  if (o.max_windows < 0) throw Error("--max-windows must be >= 0 (0: all), got " + std::to_string(o.max_windows));
  if (o.tail < 0) throw Error("--tail must be >= 1 (0: off), got " + std::to_string(o.tail));
  if (o.tail > 0 && !o.save_logits.empty())
    throw Error("--save-logits writes every position's logits; with --tail the context's positions have none");
  if (!o.prefill_cache.empty() && o.tail == 0)
    throw Error("--prefill-cache keeps the prefill of --tail's context; without --tail every position is scored");
  check_engine_options(o.runtime, o.policy, o.policy.preset);
}

nlohmann::json measure_perplexity(const PerplexityOptions& o, ModelCache& models, const ProgressOptions& progress) {
  check_perplexity_options(o);
  const Model& model = models.model(o.model);
  std::vector<int32_t> ids = !o.ids_file.empty()
                                 ? parse_ids(read_text_file(o.ids_file), o.ids_file)
                                 : models.tokenizer(o.model, "perplexity").encode(read_text_file(o.file), false);
  const int ctx = o.runtime.ctx > 0 ? o.runtime.ctx
                                    : std::min<int>(static_cast<int>(ids.size()), std::min(model.spec.max_ctx, 2048));
  const std::vector<eval::TokenWindow> windows =
      eval::split_windows(ids.size(), ctx, o.max_windows, o.second_half, o.tail);

  eval::ScoreHooks hooks;
  std::unique_ptr<NpyWriter> npy;
  if (!o.save_logits.empty()) {
    npy = std::make_unique<NpyWriter>(o.save_logits, eval::total_positions(windows), model.spec.vocab_size);
    hooks.on_logits = [&](const float* rows, int64_t n) { npy->write_rows(rows, n); };
  }
  Progress bar("perplexity", eval::total_positions(windows), "tokens", progress);
  hooks.on_progress = [&](const eval::ScoreProgress& p) {
    char status[96];
    std::snprintf(status, sizeof status, "window %zu/%zu, ppl so far %.4f", p.window + 1, p.windows, p.ppl);
    bar.update(p.positions, status);
  };

  RuntimeOptions rt = o.runtime;
  rt.ctx = ctx;
  EngineOptions eo = engine_options(rt, model.spec, ctx, 1);
  apply_policy_options(o.policy, o.policy.preset, eo);
  Engine engine(model, eo);
  const bool decode = o.decode_path || o.policy.preset != "full" || !o.ref.empty();
  std::unique_ptr<Engine> ref;
  if (!o.ref.empty()) {
    EngineOptions ro = engine_options(rt, model.spec, ctx, 1);
    ro.policy = policy_preset(o.ref);
    ref = std::make_unique<Engine>(model, ro);
  }
  eval::PerplexityResult r;
  eval::SharedPrefillStats prefills;
  const std::optional<eval::PrefillCache> cache = open_prefill_cache(o.prefill_cache);
  if (o.tail > 0)
    r = eval::score_tail(engine, ref.get(), ids, windows, hooks, &prefills, cache ? &*cache : nullptr);
  else if (ref && o.ref_by_prefill)
    r = eval::score_decode(engine, eval::reference_logits(*ref, ids, windows), ids, windows, hooks);
  else if (decode)
    r = eval::score_decode(engine, ref.get(), ids, windows, hooks);
  else
    r = eval::score_prefill(engine, ids, windows, hooks);
  bar.finish();
  if (npy) npy->close();
  nlohmann::json j = r.to_json();
  j["ctx"] = ctx;
  j["windows"] = windows.size();
  j["path"] = o.tail > 0 ? "tail" : decode ? "decode" : "prefill";
  if (o.tail > 0) {
    j["tail"] = o.tail;
    j["prefills"] = prefills.prefills;
    j["prefill_loads"] = prefills.loads;
    if (cache) j["prefill_cache_hits"] = prefills.cache_hits;
  }
  j["policy"] = engine.describe_attention();
  j["device"] = engine.device().name();
  if (!o.ref.empty()) j["ref"] = o.ref;
  return j;
}

std::string perplexity_summary(const nlohmann::json& j) {
  char line[512];
  std::snprintf(line, sizeof line, "perplexity: %.4f over %lld tokens (%zu windows of %d, %s; %s)",
                j["ppl"].get<double>(), j["n_tokens"].get<long long>(), j["windows"].get<size_t>(),
                j["ctx"].get<int>(),
                j["path"] == "tail"     ? "the context prefilled, the tail token by token"
                : j["path"] == "decode" ? "token by token"
                                        : "prefill",
                j["policy"].get<std::string>().c_str());
  std::string s = line;
  if (j.contains("ref")) {
    std::snprintf(line, sizeof line, "\nreference %s: perplexity %.4f, top-1 agreement %.4f, mean KL(ref || policy) %.6f",
                  j["ref"].get<std::string>().c_str(), j["ref_ppl"].get<double>(), j["top1_agreement"].get<double>(),
                  j["kl_mean"].get<double>());
    s += line;
  }
  return s;
}

class PerplexityTask : public TaskRun {
 public:
  PerplexityTask(CLI::App& app, bool fidelity) {
    add_perplexity_options(app, o_);
    if (fidelity) {
      o_.ref = "full";
      o_.decode_path = true;
      o_.ref_by_prefill = true;  // half the work of stepping a reference engine alongside
      app.get_option("--ref")->capture_default_str();
    }
  }
  void check() const override { check_perplexity_options(o_); }
  nlohmann::json run(TaskContext& ctx) override {
    setup_logging(o_.runtime.verbose);
    return measure_perplexity(o_, ctx.models, task_progress(ctx, o_.runtime));
  }
  std::string summary(const nlohmann::json& result) const override { return perplexity_summary(result); }

 private:
  PerplexityOptions o_;
};

}  // namespace

std::unique_ptr<TaskRun> bind_ppl_task(CLI::App& app) { return std::make_unique<PerplexityTask>(app, false); }
std::unique_ptr<TaskRun> bind_fidelity_task(CLI::App& app) { return std::make_unique<PerplexityTask>(app, true); }

void add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text over non-overlapping context windows");
  add_perplexity_options(*cmd, *o);
  cmd->add_flag("--json", o->json, "print {\"ppl\", \"n_tokens\", \"nll_mean\", ...} as JSON");
  cmd->callback([o] {
    setup_logging(o->runtime.verbose);
    ModelCache models;
    const nlohmann::json j = measure_perplexity(*o, models, progress_options(o->runtime));
    std::printf("%s\n", o->json ? j.dump().c_str() : perplexity_summary(j).c_str());
  });
}

}  // namespace hg::cli
