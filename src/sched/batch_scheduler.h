// The engine's side of the feedback scheduler: one FeedbackScheduler per sequence of a static
// batch, turning each decode step's measured timings into the next step's plans, and the trace
// every step leaves (also under `--sched fixed`, where the plan never changes).
//
// A batch step has one device stage and one host job per layer for all its rows, so the timings
// are attributed: each sequence's budget is T_dev / B (the device stage is shared equally), and
// it is charged the share of T_host and T_tx that its work takes, the work of a sequence being
// its selected tokens plus, under Post-QKᵀ, the host tokens its key scan reads. Each sequence
// balancing its share against its budget keeps the sum of host work within T_dev.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "hybridgen/stats.h"
#include "sched/feedback.h"

namespace hg {

// The scheduler parameters a policy asks for; k_min must already be resolved (not auto).
// host_share: FeedbackParams::host_share (the CPU device: host workers / its cores; else 0).
FeedbackParams feedback_params(const Policy& p, int k_min, double host_share = 0);
// A policy's k_min: its --k-min, or under `auto` the model's K_min profile (logged with the file),
// else kDefaultKMin (logged). hg::Error naming the file when the profile is corrupt.
int resolve_k_min(const Policy& p, const Model& model);

constexpr int kDefaultKMin = 64;

const char* selection_name(Selection s);  // "all" | "post" | "pre"

class BatchScheduler {
 public:
  BatchScheduler(const Policy& policy, int k_min, int batch, double host_share = 0);

  // Under --k -1 or --select all every host token takes part: nothing to tune, the plan is fixed.
  bool adaptive() const { return policy_.sched != SchedMode::Fixed && !policy_.takes_every_host_token(); }
  StepPlan plan(int seq) const;
  // After a decode step of the sequences `seqs` measured as `timing`; host_tokens[i] is what
  // seqs[i] had on the host during the step; recall[i] the predictor's recall of Post's top-K
  // that seqs[i]'s step measured (-1 where it measured none; an empty span: none measured).
  void after_step(std::span<const int> seqs, const StepTiming& timing, std::span<const int64_t> host_tokens,
                  std::span<const double> recall = {});
  void reset(int seq);
  // seq holds host_tokens before its next step (a prefill, a loaded state): its plan's K rises to
  // their floor (FeedbackScheduler::follow_context).
  void follow_context(int seq, int64_t host_tokens);

  const std::vector<SchedTraceEntry>& trace(int seq) const;
  int switches(int seq) const;
  // One line: K range, final K, steps in each mode, switches (generate --stats).
  std::string summary(int seq) const;
  // {"mode", "k_min", "k_max", "switches", "trace": [...]} of sequence 0, and the same per
  // sequence under "seqs" when the batch has more than one.
  nlohmann::json to_json() const;

 private:
  struct Seq {
    FeedbackScheduler feedback;
    std::vector<SchedTraceEntry> fixed_trace;  // --sched fixed: the trace without a feedback loop
  };
  nlohmann::json seq_json(int seq) const;

  Policy policy_;
  FeedbackParams params_;
  std::vector<Seq> seqs_;
};

// The scheduler of a policy that splits the KV cache (k_min resolved, capped at --k-max with a
// note); null for the others, whose every step attends the same tokens.
std::unique_ptr<BatchScheduler> make_batch_scheduler(const Policy& policy, const Model& model, int batch,
                                                     double host_share = 0);

}  // namespace hg
