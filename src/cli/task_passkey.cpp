// The `passkey` eval task: options and printing; the generator and the scoring are
// src/eval/passkey.
#include <cstdio>
#include <sstream>

#include "cli/eval_tasks.h"
#include "eval/passkey.h"
#include "hybridgen/error.h"

namespace hg::cli {

namespace {

std::vector<double> parse_depths(const std::string& s) {
  std::vector<double> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error("--depths: '" + item + "' is not a number");
    }
  }
  return out;
}

class PasskeyTask : public TaskRun {
 public:
  explicit PasskeyTask(CLI::App& app) {
    add_model_options(app, model_);
    add_runtime_options(app, runtime_);
    // one seed for the keys, the filler offsets and the policy's noise (keyformer): copied in run
    app.add_option("--seed", config_.seed, "seed of the keys, the filler offsets and the policy's noise (keyformer)")
        ->capture_default_str();
    add_policy_options(app, policy_);
    runtime_.ctx = config_.ctx;
    app.get_option("--ctx")->description("prompt tokens: the filler text is cut to make the prompt this long");
    app.get_option("--ctx")->capture_default_str();
    app.add_option("-f,--file", file_, "filler text (e.g. Moby-Dick chapters); required");
    app.add_option("--depths", depths_, "comma list of depths of the key in the filler, fractions in [0, 1]")
        ->capture_default_str();
    app.add_option("--trials", config_.trials, "keys per depth")->capture_default_str();
    app.add_option("-n,--n-gen", config_.n_gen, "answer tokens generated greedily")->capture_default_str();
    app.add_flag("--chat", config_.chat, "wrap the task in the model's chat template");
    add_prefill_cache_option(app, prefill_cache_);
  }

  eval::PasskeyConfig config() const {
    eval::PasskeyConfig c = config_;
    c.ctx = runtime_.ctx;
    c.depths = parse_depths(depths_);
    return c;
  }

  void check() const override {
    if (file_.empty()) throw Error("passkey needs -f FILE: the filler text");
    config().validate();
    check_engine_options(runtime_, policy_, policy_.preset);
  }

  nlohmann::json run(TaskContext& ctx) override {
    setup_logging(runtime_.verbose);
    const std::optional<eval::PrefillCache> cache = open_prefill_cache(prefill_cache_);
    eval::PasskeyConfig c = config();
    c.prefill_cache = cache ? &*cache : nullptr;
    c.validate();
    const Model& model = ctx.models.model(model_);
    const Tokenizer& tok = ctx.models.tokenizer(model_, "passkey");
    const std::string filler = read_text_file(file_);
    PolicyRun run;
    run.task = "passkey";
    run.units = "trials";
    run.total = c.trials * static_cast<int64_t>(c.depths.size());
    run.entries = {{policy_.preset, policy_.preset, {}}};  // one policy, not a list
    run.ctx = c.ctx + c.n_gen;                             // the prompt and the answer
    run.seed = c.seed;
    return run_under_policies(ctx, model, runtime_, policy_, run, [&](const auto& engines, const auto& on_done) {
      Engine& engine = *engines.front().engine;
      nlohmann::json j = eval::run_passkey(engine, tok, filler, c, on_done).to_json(c);
      j["ctx"] = c.ctx;
      j["policy"] = engine.describe_attention();
      return j;
    });
  }

  std::string summary(const nlohmann::json& j) const override {
    std::string s = "passkey accuracy " + std::to_string(j["accuracy"].get<double>()) + " over " +
                    std::to_string(j["answers"].size()) + " trials at " +
                    std::to_string(j["prompt_tokens"].get<int>()) + " tokens (" + j["policy"].get<std::string>() + ")";
    for (const auto& [depth, acc] : j["per_depth"].items())
      s += "\n  depth " + depth + ": " + std::to_string(acc.get<double>());
    return s;
  }

 private:
  ModelOptions model_;
  RuntimeOptions runtime_;
  PolicyOptions policy_;
  eval::PasskeyConfig config_;
  std::string file_;
  std::string depths_ = "0.1,0.5,0.9";
  std::string prefill_cache_;
};

}  // namespace

std::unique_ptr<TaskRun> bind_passkey_task(CLI::App& app) { return std::make_unique<PasskeyTask>(app); }

}  // namespace hg::cli
