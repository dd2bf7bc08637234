// The `ruler` eval task: options, the engines of the compared policies, and the table; the
// generators, the scoring and the run are src/eval/ruler*, the shared prefill
// src/eval/shared_prefill.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/eval_tasks.h"
#include "eval/ruler.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"

namespace hg::cli {

namespace {

// A file, or every .txt file of a directory in natural order (chapter_2 before chapter_10),
// joined by blank lines.
std::string read_haystack(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) return read_text_file(path);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  if (files.empty()) throw Error("-f " + path + ": the directory holds no .txt file");
  auto key = [](const fs::path& p) {
    const std::string s = p.filename().string();
    const size_t d = s.find_first_of("0123456789");
    const long n = d == std::string::npos ? -1 : std::strtol(s.c_str() + d, nullptr, 10);
    return std::make_pair(s.substr(0, d), n);
  };
  std::sort(files.begin(), files.end(),
            [&](const fs::path& a, const fs::path& b) { return key(a) != key(b) ? key(a) < key(b) : a < b; });
  std::string text;
  for (const fs::path& f : files) text += read_text_file(f.string()) + "\n\n";
  return text;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string cell(const nlohmann::json& score) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f (%.0f–%.0f)", score["score"].get<double>(), score["ci95"][0].get<double>(),
                score["ci95"][1].get<double>());
  return buf;
}

class RulerTaskRun : public TaskRun {
 public:
  explicit RulerTaskRun(CLI::App& app) {
    add_model_options(app, model_);
    add_runtime_options(app, runtime_);
    app.add_option("--seed", config_.seed, "seed of the samples and of the policies' noise (keyformer)")
        ->capture_default_str();
    add_policy_options(app, policy_, /*preset_list=*/true);
    app.get_option("--policy")
        ->description(
            "comma list of policies answering the same samples, each PRESET or PRESET:KNOB=VALUE[:KNOB=VALUE] "
            "(e.g. full,hybrid,hybrid:k=64); they share one prefill per sample (but a dropping policy with exact-prefill=false)");
    app.add_option("--length", config_.length, "tokens per sample: the prompt and the task's answer tokens")
        ->capture_default_str();
    app.add_option("--samples", config_.samples, "samples per task")->capture_default_str();
    app.add_option("--tasks", tasks_, "comma list of tasks (default: all): " + eval::ruler_task_names());
    app.add_option("--answer-tokens", config_.answer_tokens,
                   "greedy reply tokens (0: each task's own, as RULER: niah 128, vt 30, cwe 120, fwe 50)")
        ->capture_default_str();
    app.add_option("-f,--file", file_,
                   "prose for the essay haystacks (niah_single_2/3, multikey_1, multivalue, multiquery): a text "
                   "file or a directory of .txt files read in natural order, e.g. data/text/moby-dick");
    app.add_flag("--no-chat", no_chat_, "do not wrap the prompts in the model's chat template");
    add_prefill_cache_option(app, prefill_cache_);
    app.add_option("--checkpoint", config_.checkpoint,
                   "file of the finished samples (JSON Lines), written as each one finishes: a run given the file of "
                   "an interrupted run with the same options resumes where it stopped (sweep gives each point one)");
  }

  eval::RulerConfig config() const {
    eval::RulerConfig c = config_;
    c.tasks = split_names(tasks_);
    return c;
  }

  void check() const override {
    const eval::RulerConfig c = config();
    c.validate();
    const auto entries = parse_policy_list(policy_.preset);
    const std::vector<std::string> presets = entry_presets(entries);
    for (const PolicyEntry& e : entries) check_engine_options(runtime_, entry_options(policy_, e), e.preset, presets);
    const auto tasks = c.selected();
    if (file_.empty() && std::any_of(tasks.begin(), tasks.end(), [](auto* t) { return t->needs_essay(); }))
      throw Error(
          "ruler: the essay tasks need -f FILE|DIR (prose, e.g. data/text/moby-dick), or choose --tasks "
          "without them");
  }

  nlohmann::json run(TaskContext& ctx) override {
    setup_logging(runtime_.verbose);
    check();
    const std::optional<eval::PrefillCache> cache = open_prefill_cache(prefill_cache_);
    eval::RulerConfig c = config();
    c.prefill_cache = cache ? &*cache : nullptr;
    const Model& model = ctx.models.model(model_);
    const Tokenizer& tok = ctx.models.tokenizer(model_, "ruler");
    const std::string essay = file_.empty() ? std::string() : read_haystack(file_);
    const eval::RulerGenerator gen(tok, essay, !no_chat_);
    PolicyRun run;
    run.task = "ruler";
    run.units = "samples";
    run.total = static_cast<int64_t>(c.selected().size()) * c.samples;
    run.entries = parse_policy_list(policy_.preset);
    run.compared = entry_presets(run.entries);
    run.ctx = c.length + c.answer_tokens;  // the prompt and the reply
    run.seed = c.seed;
    nlohmann::json j = run_under_policies(
        ctx, model, runtime_, policy_, run,
        [&](const auto& engines, const auto& on_done) { return eval::run_ruler(gen, tok, engines, c, on_done); });
    j["chat"] = !no_chat_;
    return j;
  }

  std::string summary(const nlohmann::json& j) const override {
    std::string s = "RULER at " + std::to_string(j["length"].get<int>()) + " tokens, " +
                    std::to_string(j["samples"].get<int>()) + " samples per task; score % (95% interval)\n\n";
    std::string head = "| policy |", rule = "|---|";
    for (const auto& t : j["tasks"]) head += " " + t.get<std::string>() + " |", rule += "---|";
    head += " mean | prefill |\n";
    rule += "---|---|\n";
    s += head + rule;
    for (const auto& p : j["policies"]) {
      s += "| " + p["policy"].get<std::string>() + " |";
      for (const auto& t : j["tasks"]) s += " " + cell(p["tasks"][t.get<std::string>()]) + " |";
      s += " " + cell(p["mean"]) + " | " + p["prefill"].get<std::string>() + " |\n";
    }
    const auto& pf = j["prefill"];
    char buf[160];
    std::snprintf(buf, sizeof buf, "\nprefills: %d (%.1f s), loaded from a shared prefill: %d (%.1f s)",
                  pf["prefills"].get<int>(), pf["prefill_seconds"].get<double>(), pf["loads"].get<int>(),
                  pf["load_seconds"].get<double>());
    s += buf;
    if (j.value("resumed", 0) > 0) s += "; samples taken from --checkpoint: " + std::to_string(j["resumed"].get<int>());
    return s;
  }

 private:
  ModelOptions model_;
  RuntimeOptions runtime_;
  PolicyOptions policy_;
  eval::RulerConfig config_;
  std::string tasks_, file_, prefill_cache_;
  bool no_chat_ = false;
};

}  // namespace

std::unique_ptr<TaskRun> bind_ruler_task(CLI::App& app) { return std::make_unique<RulerTaskRun>(app); }

}  // namespace hg::cli
