// run_ruler: the RULER samples through several policies, one shared prefill per sample.
#include <algorithm>
#include <chrono>
#include <optional>

#include "device/device.h"
#include "eval/greedy.h"
#include "eval/ruler.h"
#include "eval/ruler_checkpoint.h"
#include "eval/shared_prefill.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"

namespace hg::eval {

void RulerConfig::validate() const {
  if (length < 256 || length > (1 << 20))
    throw Error("--length: " + std::to_string(length) + " is outside [256, 1048576] tokens");
  if (samples < 1 || samples > 100000) throw Error("--samples must be in [1, 100000], got " + std::to_string(samples));
  if (answer_tokens < 0 || answer_tokens > 4096)
    throw Error("--answer-tokens must be in [0, 4096] (0: each task's own), got " + std::to_string(answer_tokens));
  selected();  // names
}

std::vector<const RulerTask*> RulerConfig::selected() const {
  std::vector<const RulerTask*> out;
  if (tasks.empty())
    for (const RulerTask& t : ruler_tasks()) out.push_back(&t);
  for (const std::string& name : tasks) out.push_back(&find_ruler_task(name));
  return out;
}

namespace {

// What the replies of a run depend on beyond the prompts (whose hash each checkpoint line keeps).
nlohmann::json describe_run(const std::vector<PolicyEngine>& policies, const std::vector<const RulerTask*>& tasks,
                            const RulerConfig& c) {
  nlohmann::json run_policies = nlohmann::json::array(), task_names = nlohmann::json::array();
  for (const PolicyEngine& p : policies)
    run_policies.push_back({{"policy", p.label}, {"attention", p.engine->describe_attention()}});
  for (const RulerTask* t : tasks) task_names.push_back(t->name);
  Engine& first = *policies.front().engine;
  return {{"model", first.fingerprint()},
          {"device", first.device().name()},
          {"length", c.length},
          {"samples", c.samples},
          {"seed", c.seed},
          {"tasks", task_names},
          {"answer_tokens", c.answer_tokens},
          {"policies", run_policies}};
}

// One sample's replies, {label: text}, and how each policy came to hold its prompt.
struct SampleReplies {
  nlohmann::json replies = nlohmann::json::object();
  std::vector<PrefillRole> roles;
};

// A finished sample of an earlier run of this one, from its checkpoint line.
SampleReplies kept_replies(const nlohmann::json& kept, const std::vector<PolicyEngine>& policies) {
  SampleReplies r;
  for (const PolicyEngine& p : policies) {
    r.replies[p.label] = kept.at("replies").at(p.label);
    r.roles.push_back(prefill_role_of(kept.at("prefill").at(p.label).get<std::string>()));
  }
  return r;
}

// Every policy's reply to the sample, kept in the checkpoint when there is one.
SampleReplies answer_sample(const RulerSample& s, int n_answer, const std::vector<PolicyEngine>& policies,
                            GreedyReplies& greedy, RulerCheckpoint* checkpoint) {
  SampleReplies r;
  const std::vector<std::string> texts = greedy.reply(s.ids, n_answer);
  r.roles = greedy.roles();
  nlohmann::json prefill = nlohmann::json::object();
  for (size_t p = 0; p < policies.size(); ++p) {
    r.replies[policies[p].label] = texts[p];
    prefill[policies[p].label] = prefill_role_name(r.roles[p]);
  }
  if (checkpoint) checkpoint->add(s.task, s.index, s.ids, prefill, r.replies);
  return r;
}

// The scores as the samples come: per policy and task, and one line per sample.
struct RulerTally {
  std::vector<std::vector<std::vector<double>>> scores;  // [policy][task][sample]
  std::vector<PrefillRole> roles;                        // [policy]: the same for every sample
  nlohmann::json answers = nlohmann::json::array();

  RulerTally(size_t policies, size_t tasks)
      : scores(policies, std::vector<std::vector<double>>(tasks)), roles(policies, PrefillRole::Own) {}

  void add(size_t task, const RulerSample& s, const std::vector<PolicyEngine>& policies, const SampleReplies& r) {
    nlohmann::json sample_scores = nlohmann::json::object();
    for (size_t p = 0; p < policies.size(); ++p) {
      const std::string& label = policies[p].label;
      scores[p][task].push_back(string_match_all(r.replies.at(label).get<std::string>(), s.answers));
      sample_scores[label] = scores[p][task].back();
      roles[p] = r.roles[p];
    }
    // the sample's score per policy, so that rows of a sweep split by task can be pooled again
    // (tools/plot_sweep.py)
    nlohmann::json a = {{"task", s.task},       {"index", s.index},     {"tokens", s.ids.size()},
                        {"answers", s.answers}, {"replies", r.replies}, {"scores", sample_scores}};
    if (s.depth >= 0) a["depth"] = s.depth;
    answers.push_back(std::move(a));
  }

  // [{"policy", "attention", "prefill", "tasks": {task: score}, "mean": score}]
  nlohmann::json policy_scores(const std::vector<PolicyEngine>& policies,
                               const std::vector<const RulerTask*>& tasks) const {
    nlohmann::json out = nlohmann::json::array();
    for (size_t p = 0; p < policies.size(); ++p) {
      nlohmann::json per_task = nlohmann::json::object();
      std::vector<double> all;
      for (size_t t = 0; t < tasks.size(); ++t) {
        per_task[tasks[t]->name] = ruler_score(scores[p][t]).to_json();
        all.insert(all.end(), scores[p][t].begin(), scores[p][t].end());
      }
      out.push_back({{"policy", policies[p].label},
                     {"attention", policies[p].engine->describe_attention()},
                     {"prefill", prefill_role_name(roles[p])},
                     {"tasks", per_task},
                     {"mean", ruler_score(all).to_json()}});
    }
    return out;
  }
};

nlohmann::json prefill_json(const SharedPrefillStats& stats) {
  return {{"prefills", stats.prefills},
          {"loads", stats.loads},
          {"cache_hits", stats.cache_hits},
          {"prefill_seconds", stats.prefill_seconds},
          {"load_seconds", stats.load_seconds}};
}

}  // namespace

nlohmann::json run_ruler(const RulerGenerator& gen, const Tokenizer& tok, const std::vector<PolicyEngine>& policies,
                         const RulerConfig& c, const std::function<void(int, int)>& on_sample) {
  c.validate();
  const std::vector<const RulerTask*> tasks = c.selected();
  std::vector<Engine*> engines;
  for (const PolicyEngine& p : policies) engines.push_back(p.engine);
  GreedyReplies greedy(engines, tok, c.prefill_cache);
  RulerTally tally(policies.size(), tasks.size());
  nlohmann::json prompt_tokens = nlohmann::json::object(), task_names = nlohmann::json::array();
  const int total = static_cast<int>(tasks.size()) * c.samples;
  int done = 0, resumed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<RulerCheckpoint> checkpoint;
  if (!c.checkpoint.empty()) checkpoint.emplace(c.checkpoint, describe_run(policies, tasks, c));
  for (size_t t = 0; t < tasks.size(); ++t) {
    const RulerTask& task = *tasks[t];
    const int n_answer = c.answer_tokens > 0 ? c.answer_tokens : task.answer_tokens;
    double tokens_sum = 0;
    for (int i = 0; i < c.samples; ++i) {
      const RulerSample s = gen.make(task, c.length, i, c.samples, c.seed);
      tokens_sum += static_cast<double>(s.ids.size());
      const nlohmann::json* kept = checkpoint ? checkpoint->find(task.name, i, s.ids) : nullptr;
      resumed += kept != nullptr;  // a finished sample of an earlier run of this one: its replies, scored again
      tally.add(t, s, policies,
                kept ? kept_replies(*kept, policies)
                     : answer_sample(s, n_answer, policies, greedy, checkpoint ? &*checkpoint : nullptr));
      if (on_sample) on_sample(++done, total);
    }
    prompt_tokens[task.name] = tokens_sum / c.samples;
    task_names.push_back(task.name);
  }
  return {{"length", c.length},
          {"samples", c.samples},
          {"seed", c.seed},
          {"tasks", task_names},
          {"prompt_tokens", prompt_tokens},
          {"policies", tally.policy_scores(policies, tasks)},
          {"prefill", prefill_json(greedy.stats())},
          {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
          {"resumed", resumed},
          {"answers", tally.answers}};
}

}  // namespace hg::eval
