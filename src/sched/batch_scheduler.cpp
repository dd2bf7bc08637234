#include "sched/batch_scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hybridgen/error.h"
#include "policy/enum_names.h"
#include "sched/kmin_profile.h"

namespace hg {

const char* selection_name(Selection s) { return enum_name(s).data(); }

FeedbackParams feedback_params(const Policy& p, int k_min, double host_share) {
  FeedbackParams f;
  f.host_share = host_share;
  f.k_min = k_min;
  f.k_max = p.feedback.k_max;
  f.alpha = p.feedback.alpha;
  f.margin = p.feedback.margin;
  f.grow = 1.0 + p.feedback.grow;
  f.pre_after = p.feedback.pre_after;
  f.hysteresis = p.feedback.hysteresis;
  f.post_margin = p.feedback.post_margin;
  f.probe_every = p.feedback.probe;
  f.shared_loss = p.feedback.shared_loss;
  f.k_min_share = p.feedback.k_min_share;
  f.k_max_share = p.feedback.k_max_share;
  f.device_tokens = p.window + p.n_sinks;
  f.min_recall = p.feedback.min_recall;
  f.min_pre_saving = p.feedback.min_pre_saving;
  f.adapt_k = p.sched == SchedMode::Adaptive || p.sched == SchedMode::AdaptiveK;
  f.adapt_select = p.sched_switches_mode();
  if (p.sched == SchedMode::AdaptiveSelect) {
    // Only the mode adapts: K is pinned at --k.
    if (p.K < 1) throw Error("--sched adaptive-select needs a fixed --k >= 1, got " + std::to_string(p.K));
    f.k_min = f.k_max = p.K;
    f.k_min_share = f.k_max_share = 0;
  }
  f.validate();
  return f;
}

int resolve_k_min(const Policy& p, const Model& model) {
  if (p.feedback.k_min >= 0) return p.feedback.k_min;
  const std::string fingerprint = model_fingerprint(model);
  const auto path = profile_dir() / (fingerprint + ".json");
  const auto profile = read_profile(path, fingerprint);
  if (!profile) {
    spdlog::info(
        "--k-min auto: no K_min profile for this model ({} does not exist; run `hybridgen eval --task kmin`), "
        "using k_min {}",
        path.string(), kDefaultKMin);
    return kDefaultKMin;
  }
  spdlog::info("--k-min auto: k_min {} from the K_min profile {}", profile->k_min, path.string());
  return profile->k_min;
}

BatchScheduler::BatchScheduler(const Policy& policy, int k_min, int batch, double host_share) : policy_(policy) {
  if (adaptive()) {
    params_ = feedback_params(policy, k_min, host_share);
  } else {
    params_.k_min = params_.k_max = policy.K;  // reported only
  }
  const FeedbackParams fb = adaptive() ? params_ : FeedbackParams{};
  seqs_.assign(static_cast<size_t>(batch), Seq{FeedbackScheduler(fb), {}});
}

StepPlan BatchScheduler::plan(int seq) const {
  StepPlan p = initial_plan(policy_);
  if (!adaptive()) return p;
  const SchedPlan s = seqs_.at(static_cast<size_t>(seq)).feedback.plan();
  p.K = s.K;
  p.select = s.select;
  p.measure_recall = s.measure_recall;
  return p;
}

void BatchScheduler::after_step(std::span<const int> seqs, const StepTiming& timing,
                                std::span<const int64_t> host_tokens, std::span<const double> recall) {
  const double t_dev = timing.t_dev(), t_host = timing.t_host(), t_tx = timing.t_tx();
  const double n = static_cast<double>(seqs.size());
  // Work of each sequence in this step: selected tokens, plus the key scan under Post-QKᵀ.
  std::vector<double> work(seqs.size());
  double total = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const StepPlan p = plan(seqs[i]);
    const double k = p.K < 0 ? static_cast<double>(host_tokens[i]) : std::min<double>(p.K, host_tokens[i]);
    work[i] = k + (p.select == Selection::Pre ? 0.0 : static_cast<double>(host_tokens[i]));
    total += work[i];
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const double share = total > 0 ? work[i] / total : 1.0 / n;
    const StepTimes t{t_dev / n, t_host * share, t_tx * share, host_tokens[i], i < recall.size() ? recall[i] : -1.0};
    Seq& s = seqs_.at(static_cast<size_t>(seqs[i]));
    if (adaptive()) {
      s.feedback.update(t);
    } else {
      const StepPlan p = plan(seqs[i]);
      s.fixed_trace.push_back(
          {static_cast<int64_t>(s.fixed_trace.size()), p.K, p.select, t.t_dev, t.t_host, t.t_tx, t.host_tokens});
    }
  }
}

void BatchScheduler::reset(int seq) {
  Seq& s = seqs_.at(static_cast<size_t>(seq));
  s.feedback.reset();
  s.fixed_trace.clear();
}

void BatchScheduler::follow_context(int seq, int64_t host_tokens) {
  if (adaptive()) seqs_.at(static_cast<size_t>(seq)).feedback.follow_context(host_tokens);
}

const std::vector<SchedTraceEntry>& BatchScheduler::trace(int seq) const {
  const Seq& s = seqs_.at(static_cast<size_t>(seq));
  return adaptive() ? s.feedback.trace() : s.fixed_trace;
}

int BatchScheduler::switches(int seq) const {
  return adaptive() ? seqs_.at(static_cast<size_t>(seq)).feedback.switches() : 0;
}

std::string BatchScheduler::summary(int seq) const {
  return describe_trace(trace(seq), switches(seq), params_.k_min, params_.k_max);
}

nlohmann::json BatchScheduler::seq_json(int seq) const {
  nlohmann::json trace = nlohmann::json::array();
  for (const auto& e : this->trace(seq)) {
    trace.push_back({{"step", e.step},
                     {"k", e.K},
                     {"select", selection_name(e.select)},
                     {"t_dev_ms", e.t_dev * 1e3},
                     {"t_host_ms", e.t_host * 1e3},
                     {"t_tx_ms", e.t_tx * 1e3},
                     {"host_tokens", e.host_tokens},
                     {"k_floor", e.k_floor},
                     {"rule", sched_rule_name(e.rule)}});
    if (e.probe) trace.back()["probe"] = true;  // a Post step taken in Pre to measure the key scan
    if (e.recall >= 0) trace.back()["recall"] = e.recall;
  }
  static const char* modes[] = {"fixed", "adaptive", "adaptive-k", "adaptive-select"};
  return {{"mode", modes[static_cast<int>(policy_.sched)]},
          {"k_min", params_.k_min},
          {"k_max", params_.k_max},
          {"k_min_share", params_.k_min_share},
          {"k_max_share", params_.k_max_share},
          {"min_recall", params_.min_recall},
          {"min_pre_saving", params_.min_pre_saving},
          {"switches", switches(seq)},
          {"probes", adaptive() ? seqs_.at(static_cast<size_t>(seq)).feedback.probes() : 0},
          {"summary", summary(seq)},
          {"trace", trace}};
}

nlohmann::json BatchScheduler::to_json() const {
  nlohmann::json j = seq_json(0);
  if (seqs_.size() > 1) {
    nlohmann::json all = nlohmann::json::array();
    for (size_t s = 0; s < seqs_.size(); ++s) all.push_back(seq_json(static_cast<int>(s)));
    j["seqs"] = all;
  }
  return j;
}

std::unique_ptr<BatchScheduler> make_batch_scheduler(const Policy& policy, const Model& model, int batch,
                                                     double host_share) {
  if (!policy.splits_kv()) return nullptr;
  int k_min = policy.sched == SchedMode::Fixed ? 0 : resolve_k_min(policy, model);
  if (policy.feedback.k_min < 0 && k_min > policy.feedback.k_max) {
    spdlog::info("--k-min auto: k_min {} capped at --k-max {}", k_min, policy.feedback.k_max);
    k_min = policy.feedback.k_max;
  }
  return std::make_unique<BatchScheduler>(policy, k_min, batch, host_share);
}

}  // namespace hg
