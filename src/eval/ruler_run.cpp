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

nlohmann::json run_ruler(const RulerGenerator& gen, const Tokenizer& tok, const std::vector<RulerPolicy>& policies,
                         const RulerConfig& c, const std::function<void(int, int)>& on_sample) {
  c.validate();
  const std::vector<const RulerTask*> tasks = c.selected();
  const std::vector<int32_t> stop = tok.stop_ids();
  std::vector<Engine*> engines;
  for (const RulerPolicy& p : policies) engines.push_back(p.engine);
  // per policy, per task: the per-sample scores
  std::vector<std::vector<std::vector<double>>> scores(policies.size(), std::vector<std::vector<double>>(tasks.size()));
  std::vector<PrefillRole> roles, role(policies.size(), PrefillRole::Own);
  SharedPrefillStats stats;
  nlohmann::json answers = nlohmann::json::array(), prompt_tokens = nlohmann::json::object();
  std::vector<std::vector<float>> logits;
  const int total = static_cast<int>(tasks.size()) * c.samples;
  int done = 0, resumed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<RulerCheckpoint> checkpoint;
  if (!c.checkpoint.empty()) {
    // what the replies depend on beyond the prompt (whose hash each sample line keeps)
    nlohmann::json run_policies = nlohmann::json::array(), task_names = nlohmann::json::array();
    for (size_t p = 0; p < policies.size(); ++p)
      run_policies.push_back({{"policy", policies[p].label}, {"attention", engines[p]->describe_attention()}});
    for (const RulerTask* t : tasks) task_names.push_back(t->name);
    checkpoint.emplace(c.checkpoint, nlohmann::json{{"model", engines.front()->fingerprint()},
                                                    {"device", engines.front()->device().name()},
                                                    {"length", c.length},
                                                    {"samples", c.samples},
                                                    {"seed", c.seed},
                                                    {"tasks", task_names},
                                                    {"answer_tokens", c.answer_tokens},
                                                    {"policies", run_policies}});
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    const RulerTask& task = *tasks[t];
    const int n_answer = c.answer_tokens > 0 ? c.answer_tokens : task.answer_tokens;
    double tokens_sum = 0;
    for (int i = 0; i < c.samples; ++i) {
      const RulerSample s = gen.make(task, c.length, i, c.samples, c.seed);
      tokens_sum += static_cast<double>(s.ids.size());
      nlohmann::json replies = nlohmann::json::object(), sample_scores = nlohmann::json::object();
      if (const nlohmann::json* kept = checkpoint ? checkpoint->find(task.name, i, s.ids) : nullptr) {
        // a finished sample of an earlier run of this one: its replies, scored again
        for (size_t p = 0; p < policies.size(); ++p) {
          const std::string& label = policies[p].label;
          replies[label] = kept->at("replies").at(label);
          role[p] = prefill_role_of(kept->at("prefill").at(label).get<std::string>());
        }
        ++resumed;
      } else {
        shared_prefill(engines, 0, s.ids, logits, stats, &roles, c.prefill_cache);
        nlohmann::json prefill = nlohmann::json::object();
        for (size_t p = 0; p < policies.size(); ++p) {
          replies[policies[p].label] =
              tok.decode(greedy_tokens(*engines[p], 0, logits[p], n_answer, stop), /*skip_special=*/true);
          role[p] = roles[p];  // the same for every sample
          prefill[policies[p].label] = prefill_role_name(roles[p]);
        }
        if (checkpoint) checkpoint->add(task.name, i, s.ids, prefill, replies);
      }
      for (size_t p = 0; p < policies.size(); ++p) {
        scores[p][t].push_back(string_match_all(replies[policies[p].label].get<std::string>(), s.answers));
        sample_scores[policies[p].label] = scores[p][t].back();
      }
      // the sample's score per policy, so that rows of a sweep split by task can be pooled again
      // (tools/plot_sweep.py)
      nlohmann::json a = {{"task", task.name},         {"index", i},          {"tokens", s.ids.size()},
                          {"answers", s.answers},      {"replies", replies}, {"scores", sample_scores}};
      if (s.depth >= 0) a["depth"] = s.depth;
      answers.push_back(std::move(a));
      if (on_sample) on_sample(++done, total);
    }
    prompt_tokens[task.name] = tokens_sum / c.samples;
  }
  nlohmann::json out_policies = nlohmann::json::array();
  for (size_t p = 0; p < policies.size(); ++p) {
    nlohmann::json per_task = nlohmann::json::object();
    std::vector<double> all;
    for (size_t t = 0; t < tasks.size(); ++t) {
      per_task[tasks[t]->name] = ruler_score(scores[p][t]).to_json();
      all.insert(all.end(), scores[p][t].begin(), scores[p][t].end());
    }
    out_policies.push_back({{"policy", policies[p].label},
                            {"attention", engines[p]->describe_attention()},
                            {"prefill", prefill_role_name(role[p])},
                            {"tasks", per_task},
                            {"mean", ruler_score(all).to_json()}});
  }
  nlohmann::json task_names = nlohmann::json::array();
  for (const RulerTask* t : tasks) task_names.push_back(t->name);
  return {{"length", c.length},
          {"samples", c.samples},
          {"seed", c.seed},
          {"tasks", task_names},
          {"prompt_tokens", prompt_tokens},
          {"policies", out_policies},
          {"prefill",
           {{"prefills", stats.prefills},
            {"loads", stats.loads},
            {"cache_hits", stats.cache_hits},
            {"prefill_seconds", stats.prefill_seconds},
            {"load_seconds", stats.load_seconds}}},
          {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
          {"resumed", resumed},
          {"answers", answers}};
}

}  // namespace hg::eval
