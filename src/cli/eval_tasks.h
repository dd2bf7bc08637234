// Evaluation tasks: what `hybridgen eval --task NAME` runs and what a sweep file's `task:` names.
// A task registers its options on a CLI11 app with the same definitions the CLI's subcommands use
// (add_model_options, add_policy_options, ...) and returns a run bound to the values parsed into
// them. A sweep point {window: 256, k: 64} is therefore parsed exactly as `--window=256 --k=64`,
// and every CLI option (and every knob of the registry that feeds them) is a sweep key.
//
// Adding a task: write `std::unique_ptr<TaskRun> bind_X_task(CLI::App&)` in its own file
// (src/cli/task_X.cpp; the measurement itself in src/eval/X.*) and list it in eval_tasks()
// (cmd_eval.cpp). src/cli/task_passkey.cpp with src/eval/passkey.* is an example.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "eval/greedy.h"
#include "eval/prefill_cache.h"

namespace hg::cli {

// Sweeps run many points on one model: the last model (and its tokenizer) stays loaded.
class ModelCache {
 public:
  const Model& model(const ModelOptions& o);
  // The tokenizer from --tokenizer or the model's own; hg::Error naming `task` when there is none.
  const Tokenizer& tokenizer(const ModelOptions& o, const std::string& task);

 private:
  std::string key_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  bool tokenizer_loaded_ = false;
};

struct TaskContext {
  ModelCache& models;
  bool progress = true;  // report the task's own progress (windows, trials) on stderr
};

// The task's own progress (windows, trials, runs): off inside a sweep, which shows its own.
ProgressOptions task_progress(const TaskContext& ctx, const RuntimeOptions& r);

// --prefill-cache DIR of the tasks that prefill long prompts (fidelity --tail, passkey, ruler):
// the prefill states kept between runs (eval/prefill_cache.h), so that the points of a sweep, each
// its own run, prefill a prompt once. open_prefill_cache: none when `dir` is empty.
void add_prefill_cache_option(CLI::App& app, std::string& dir);
std::optional<eval::PrefillCache> open_prefill_cache(const std::string& dir);

// How the tasks that answer prompts under policies (passkey, ruler) run them, set up alike: one
// engine per policy entry, for `ctx` tokens of one sequence (the prompt and the answer, whatever
// --ctx says) with the task's seed as the policies' noise; then `answer` with them, its progress
// shown on a bar named after the task (off inside a sweep). Its result gets "device": where the
// engines ran.
struct PolicyRun {
  std::string task;                   // the bar's label: "passkey"
  std::string units;                  // what the bar counts: "trials"
  int64_t total = 0;                  // ... in all
  std::vector<PolicyEntry> entries;   // one engine each
  std::vector<std::string> compared;  // as apply_policy_options' (the presets of a --policy list)
  int ctx = 0;
  uint64_t seed = 0;
};
using AnswerPrompts = std::function<nlohmann::json(const std::vector<eval::PolicyEngine>& engines,
                                                   const std::function<void(int done, int total)>& on_done)>;
nlohmann::json run_under_policies(const TaskContext& ctx, const Model& model, const RuntimeOptions& runtime,
                                  const PolicyOptions& policy, const PolicyRun& run, const AnswerPrompts& answer);

class TaskRun {
 public:
  virtual ~TaskRun() = default;
  // Checks that need no model (contradictory knobs, bad names): run on every sweep point before
  // the first one runs. hg::Error naming the option.
  virtual void check() const = 0;
  // Runs the task; returns its metrics as a JSON object ("device" names the device it ran on).
  virtual nlohmann::json run(TaskContext& ctx) = 0;
  // The result for a reader (eval without --json).
  virtual std::string summary(const nlohmann::json& result) const { return result.dump(2); }
};

struct EvalTask {
  std::string name;
  std::string help;
  std::function<std::unique_ptr<TaskRun>(CLI::App&)> bind;  // registers the task's options
};

// Every task, in the order `eval --help` lists them.
const std::vector<EvalTask>& eval_tasks();
// hg::Error listing the tasks when there is no such task.
const EvalTask& find_eval_task(const std::string& name);
std::string eval_task_names();  // "ppl, fidelity, ..."

// Builds the options of `task` on a fresh app (returned through `app`) and parses `args`
// ("--key=value" words); hg::Error with CLI11's message on a bad option or value.
std::unique_ptr<TaskRun> parse_task_args(const EvalTask& task, std::unique_ptr<CLI::App>& app,
                                         const std::vector<std::string>& args);

// The tasks (one file each).
std::unique_ptr<TaskRun> bind_ppl_task(CLI::App& app);       // cmd_perplexity.cpp
std::unique_ptr<TaskRun> bind_fidelity_task(CLI::App& app);  // cmd_perplexity.cpp
std::unique_ptr<TaskRun> bind_passkey_task(CLI::App& app);   // task_passkey.cpp
std::unique_ptr<TaskRun> bind_bench_task(CLI::App& app);     // cmd_bench.cpp
std::unique_ptr<TaskRun> bind_kmin_task(CLI::App& app);      // task_kmin.cpp
std::unique_ptr<TaskRun> bind_ruler_task(CLI::App& app);     // task_ruler.cpp

}  // namespace hg::cli
