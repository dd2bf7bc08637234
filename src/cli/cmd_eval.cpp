// hybridgen eval --task NAME [--json] [task options]: one evaluation task (eval_tasks.h), its
// options parsed by the task's own app so `eval --task passkey --help` lists exactly them.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/eval_tasks.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "util/strings.h"

namespace hg::cli {

const Model& ModelCache::model(const ModelOptions& o) {
  const std::string key = o.model + '\n' + o.synthetic + '\n' + o.synthetic_dtype + '\n' +
                          std::to_string(o.synthetic_seed) + '\n' + o.tokenizer;
  if (!model_ || key != key_) {
    model_.reset();
    tokenizer_.reset();
    tokenizer_loaded_ = false;
    model_ = load_model(o);
    key_ = key;
  }
  return *model_;
}

const Tokenizer& ModelCache::tokenizer(const ModelOptions& o, const std::string& task) {
  const Model& m = model(o);
  if (!tokenizer_loaded_) {
    tokenizer_ = load_tokenizer(o, m);
    tokenizer_loaded_ = true;
  }
  if (!tokenizer_) throw Error(task + ": this model has no tokenizer: give --tokenizer FILE");
  return *tokenizer_;
}

ProgressOptions task_progress(const TaskContext& ctx, const RuntimeOptions& r) {
  ProgressOptions p = progress_options(r);
  if (!ctx.progress) p.mode = ProgressMode::Off;
  return p;
}

void add_prefill_cache_option(CLI::App& app, std::string& dir) {
  app.add_option("--prefill-cache", dir,
                 "directory of prefill states kept between runs: a prompt this model already prefilled on this device "
                 "is loaded instead (the points of a sweep share one prefill); entries are ~1 GB at 32K tokens");
}

std::optional<eval::PrefillCache> open_prefill_cache(const std::string& dir) {
  if (dir.empty()) return std::nullopt;
  return eval::PrefillCache(dir);
}

nlohmann::json run_under_policies(const TaskContext& ctx, const Model& model, const RuntimeOptions& runtime,
                                  const PolicyOptions& policy, const PolicyRun& run, const AnswerPrompts& answer) {
  RuntimeOptions rt = runtime;
  rt.ctx = run.ctx;
  std::vector<std::unique_ptr<Engine>> owned;
  std::vector<eval::PolicyEngine> engines;
  for (const PolicyEntry& e : run.entries) {
    EngineOptions eo = engine_options(rt, model.spec, rt.ctx, 1);
    PolicyOptions po = entry_options(policy, e);
    po.seed = run.seed;
    apply_policy_options(po, e.preset, eo, run.compared);
    owned.push_back(std::make_unique<Engine>(model, eo));
    engines.push_back({e.label, owned.back().get()});
  }
  Progress bar(run.task, run.total, run.units, task_progress(ctx, runtime));
  nlohmann::json j = answer(engines, [&](int done, int) { bar.update(done); });
  bar.finish();
  j["device"] = owned.front()->device().name();
  return j;
}

const std::vector<EvalTask>& eval_tasks() {
  static const std::vector<EvalTask> tasks = {
      {"ppl", "perplexity of a text (-f) over windows of --ctx tokens, as `hybridgen perplexity`", bind_ppl_task},
      {"fidelity", "the policy token by token against --ref full: top-1 agreement, mean KL, perplexity",
       bind_fidelity_task},
      {"passkey", "find a 5-digit key hidden at --depths of filler text (-f) cut to --ctx tokens", bind_passkey_task},
      {"bench", "prefill and decode throughput, as `hybridgen bench` (a sweep task)", bind_bench_task},
      {"kmin", "K_min profile: fidelity against full for --ks, the knee within --tolerance, saved for --k-min auto",
       bind_kmin_task},
      {"ruler",
       "RULER's synthetic tasks (needles, variable tracking, common/frequent words) at --length tokens, every "
       "--policy on the same samples, one prefill per sample",
       bind_ruler_task},
  };
  return tasks;
}

std::string eval_task_names() {
  return join(eval_tasks(), ", ", &EvalTask::name);
}

const EvalTask& find_eval_task(const std::string& name) {
  const auto& tasks = eval_tasks();
  auto it = std::find_if(tasks.begin(), tasks.end(), [&](const EvalTask& t) { return t.name == name; });
  if (it == tasks.end()) throw Error("task '" + name + "' is not one of " + eval_task_names());
  return *it;
}

std::unique_ptr<TaskRun> parse_task_args(const EvalTask& task, std::unique_ptr<CLI::App>& app,
                                         const std::vector<std::string>& args) {
  app = std::make_unique<CLI::App>(task.help, "hybridgen eval --task " + task.name);
  std::unique_ptr<TaskRun> run = task.bind(*app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    throw;
  } catch (const CLI::ParseError& e) {
    throw Error(e.what());
  }
  return run;
}

namespace {

struct EvalOptions {
  std::string task;
  bool json = false;
  bool help = false;
};

void run_eval(const EvalOptions& o, const std::vector<std::string>& args) {
  if (o.task.empty()) {
    if (o.help) {
      std::printf("hybridgen eval --task NAME [--json] [options of the task]\n\ntasks:\n");
      for (const auto& t : eval_tasks()) std::printf("  %-10s %s\n", t.name.c_str(), t.help.c_str());
      std::printf("\n`hybridgen eval --task NAME --help` lists the options of a task.\n");
      return;
    }
    throw Error("--task: give one of " + eval_task_names());
  }
  const EvalTask& task = find_eval_task(o.task);
  std::unique_ptr<CLI::App> app;
  std::vector<std::string> task_args = args;
  if (o.help) task_args.push_back("--help");
  std::unique_ptr<TaskRun> run;
  try {
    run = parse_task_args(task, app, task_args);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app->help().c_str());
    return;
  }
  run->check();
  ModelCache models;
  TaskContext ctx{models, true};
  const nlohmann::json result = run->run(ctx);
  std::printf("%s\n", o.json ? result.dump().c_str() : run->summary(result).c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd =
      app.add_subcommand("eval", "evaluation tasks: " + eval_task_names() + " (--task NAME --help: its options)");
  cmd->set_help_flag();  // --help goes to the task's own options
  cmd->add_flag("-h,--help", o->help, "list the tasks, or with --task the options of that task");
  cmd->add_option("--task", o->task, "task to run: " + eval_task_names());
  cmd->add_flag("--json", o->json, "print the result as one JSON object");
  cmd->allow_extras();
  cmd->callback([o, cmd] {
    setup_logging(0);
    run_eval(*o, cmd->remaining());
  });
}

}  // namespace hg::cli
