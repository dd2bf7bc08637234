// The feedback scheduler (docs/architecture.md, "The feedback scheduler"; the paper's Algorithm 1,
// extended): one object per sequence, fed every decode step's measured device stage T_dev, host stage
// T_host and transfer T_tx (summed over layers) and the number of host tokens, returning the next
// step's K (host tokens per kv-head that take part) and selection mode (Post- or Pre-QKᵀ).
//
// The rules (every constant is a FeedbackParams field):
//
//  * Smoothing. D = EWMA of T_dev; u = EWMA of the host cost per selected token,
//    (T_host + T_tx) / K_used, so the predicted host cost at K is H(K) = u · K. u is an average,
//    not a marginal cost: it also carries the part of the host work that does not shrink with K
//    (the Post-QKᵀ key scan over every host token). One noisy step moves D and u by alpha of its
//    error only. A mode switch re-seeds u from the next measurement (the other mode costs
//    differently per token).
//  * Post-QKᵀ, K. The target is T = (1 - margin) · D.
//      H(K) <= T  (device-bound): multiplicative increase, K <- min(grow · K, T / u), at least +1;
//      H(K) >  D  (host-bound):   decrease proportional to the overshoot, K <- K · T / H(K) = T / u
//                                 (u here: the larger of the EWMA and the newest step's cost);
//      T < H(K) <= D:             hold (the dead band keeps noise from moving K).
//    Both moves go to K' = T / u, the K whose predicted cost meets the target with the per-token
//    cost measured now. With H(K) = b + c·K (b: scan and overheads, c: per selected token) the
//    iteration K <- T·K / H(K) has its fixed point where H = T and slope b / T < 1 there, so it
//    converges monotonically from either side, without overshoot, geometrically; the growth cap
//    only bounds the first steps. K stays in [k_min, max(k_min, min(k_max, host tokens))].
//  * Post -> Pre. At K = k_min and still host-bound (H(k_min) > D) for pre_after consecutive steps,
//    switch to Pre-QKᵀ (predicted tokens only; the key scan is skipped). K stays k_min in Pre.
//  * Pre -> Post, with hysteresis. The per-host-token key-scan cost s is measured at the switch:
//    the Post cost at k_min just before it less the Pre cost at k_min just after it (after
//    settle_steps Pre steps), divided by the host tokens then; the two differ by exactly the scan.
//    In Pre, the predicted Post cost is P = H_pre + s · n_host (so a slow-down that hits both
//    modes, such as other load on the host, cancels out of s and shows in H_pre). Back to Post
//    when P <= (1 - post_margin) · D for `hysteresis` consecutive steps. A Post episode that
//    falls back to Pre within 2 · hysteresis steps doubles the required count (backoff, up to
//    64 × hysteresis), so switches stay bounded even when the estimate of s is off.
//  * Probes. s is measured once, at the switch; a switch made on inflated Post costs (a loaded
//    host, the first cold steps) would overstate it for good, and the run would never come back
//    to Post. So every probe_every Pre steps one step runs Post at k_min (a probe: the plan's
//    `probe`, not a mode switch): its host cost less Pre's smoothed cost at k_min, over the host
//    tokens, is s afresh. The interval doubles after each probe (up to 8 × probe_every) and
//    starts over at each switch to Pre, so a run that belongs in Pre pays one Post step in 32,
//    then in 64, … 256.
//  * Warm-up. The first warmup_steps decode steps after reset() (a pool waking, the first writes
//    into the KV pages) are measured but not smoothed: D and u start over at each of them, and
//    they count toward no switch.
//
//  * Shared cores (host_share > 0: the CPU device, whose pool lends host_share of its cores to the
//    host workers while they compute). The rules above assume the host's time is hidden behind
//    the device's; on shared cores it is not: every second of host work takes host_share of the
//    device's throughput for that second. There the host's budget is B = min(1, shared_loss /
//    host_share) · D instead of D (the host may cost the device at most shared_loss of its time):
//    T = (1 - margin) · B, host-bound is H(K) > B, and Pre -> Post needs P <= (1 - post_margin) · B.
//    On 2 cores with one host worker (host_share 0.5) B = 0.2 · D: Post's key scan at depth 4096
//    (~0.8 · D) is host-bound, so the scheduler goes to Pre; with a GPU, or with many cores per
//    host worker, B = D and nothing changes.
//
//  * The floor and the ceiling follow the context (k_min_share, k_max_share > 0). Selection keeps
//    accuracy only while enough of the context is attended: with device_tokens (window + sinks)
//    always attended, the floor at n host tokens is
//      K_min(n) = max(k_min, ⌈k_min_share · (n + device_tokens)⌉ − device_tokens)
//    (k_min_share 0.125: the share that held full's RULER score at 4K-32K on Qwen2.5-0.5B), and
//    the ceiling max(k_max, ⌈k_max_share · (n + device_tokens)⌉ − device_tokens). Every rule
//    above reads K_min(n) where it says k_min; a K below a floor that rose is raised to it.
//  * Recall (min_recall > 0). Pre-QKᵀ costs less but keeps accuracy only while its predictor
//    finds the tokens Post-QKᵀ would: before a switch to Pre, and at every probe in Pre, the step
//    also runs the predictor beside Post's top-K (the plan's measure_recall) and reports the share
//    of Post's tokens the predictor chose (StepTimes::recall). A switch needs recall >= min_recall;
//    a probe that measures less returns to Post. After a refusal the next measurement waits
//    probe_every steps, doubling up to 8 × probe_every (a step with the predictor beside Post
//    costs more than Post alone).
//  * Pre must be cheaper (min_pre_saving). Host-bound at the floor says Post costs too much, not
//    that Pre costs less: a predictor's own work (its scan, the chosen tokens' exact logits, a
//    split by kv-heads that leaves a core idle) can cost more than Post's scan split over every
//    core, and did on the CPU device (SmolLM2 at depth 8192: host stage 6.6 ms in Post, 8.5-9.8
//    ms in Pre). Where the two costs at the floor are measured (the switch, once Pre has settled;
//    every probe), Pre that saves less than min_pre_saving of Post's cost goes back to Post at
//    once. Post's scan grows with the host tokens and Pre's cost does not, so Pre is tried again
//    once they have grown by a quarter, or after 8 × probe_every steps: a few steps in 256.
//
// Every trace entry names the rule that acted on the step's measurements (SchedRule).
//
// Start at K = k_min, Post. reset() restores that state (one request per reset).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hybridgen/policy.h"

namespace hg {

struct FeedbackParams {
  int k_min = 64;  // accuracy floor (profiled by `eval --task kmin`)
  int k_max = 1024;
  double alpha = 0.25;       // EWMA weight of the newest step
  double margin = 0.1;       // raise K only while the host cost is below (1 - margin) · T_dev
  double grow = 1.5;         // the most K grows in one step (factor)
  int pre_after = 3;         // consecutive host-bound steps at k_min before switching to Pre
  int settle_steps = 2;      // Pre steps measured before the key-scan cost s is taken
  int hysteresis = 8;        // consecutive steps the predicted Post cost must fit to switch back
  double post_margin = 0.2;  // ... fit within (1 - post_margin) · T_dev
  int probe_every = 32;      // Pre steps between probes (0: no probes)
  int warmup_steps = 4;      // first decode steps: measured, not smoothed, no switch counted
  // Shared cores: the share of the device's throughput the host workers take while they compute
  // (0: a device of its own), and the most of the device's time the host may cost it.
  double host_share = 0;
  double shared_loss = 0.1;
  // The paper's partial configurations: K pinned at k_min (only the mode adapts), or the mode
  // pinned at Post (only K adapts).
  bool adapt_k = true;
  bool adapt_select = true;
  // The floor and ceiling that follow the context (0: fixed k_min, k_max), and the tokens the
  // device always attends (window + sinks) that count toward the share.
  double k_min_share = 0;
  double k_max_share = 0;
  int device_tokens = 0;
  // Pre-QKᵀ only while its predictor's recall of Post-QKᵀ's top-K is at least this (0: no check).
  double min_recall = 0;
  // Pre-QKᵀ only while it costs at least this share less than Post-QKᵀ at the floor (0: no check).
  double min_pre_saving = 0.1;

  void validate() const;  // hg::Error naming the knob
};

// One decode step as measured (seconds, summed over layers) for one sequence.
struct StepTimes {
  double t_dev = 0;
  double t_host = 0;
  double t_tx = 0;
  int64_t host_tokens = 0;  // host tokens of the sequence (per kv-head) in that step
  double recall = -1;       // the predictor's recall of Post's top-K, when the plan measured it; else -1
};

struct SchedPlan {
  int K = 0;
  Selection select = Selection::Post;  // Post or Pre
  bool probe = false;                  // a Post step at k_min in Pre, to measure the key scan afresh
  bool measure_recall = false;         // a Post step that also runs the predictor (StepTimes::recall)
};

// The rule that acted on a step's measurements (feedback.h's rules, in the trace).
enum class SchedRule {
  Fixed,          // --sched fixed: nothing adapts
  Warmup,         // a warm-up step: measured, not acted on
  NoHost,         // nothing on the host yet
  Grow,           // Post, device-bound: K up
  Shrink,         // Post, host-bound: K down
  Hold,           // Post, within the dead band (or K pinned)
  Floor,          // the context grew: K raised to the floor K_min(n)
  MeasureRecall,  // Post at the floor and host-bound: the next step measures the predictor's recall
  ToPre,          // Post -> Pre: host-bound at the floor, recall high enough
  PreRefused,     // host-bound at the floor, but the predictor's recall is below min_recall: stay Post
  Pre,            // Pre: stays
  ToPost,         // Pre -> Post: the predicted Post cost fits the budget
  Probe,          // a Post probe in Pre measured the key scan (and recall); back to Pre
  RecallLow,      // a probe measured recall below min_recall: back to Post
  PreCostly,      // Pre saved less than min_pre_saving of Post's host cost at the floor: back to Post
};
const char* sched_rule_name(SchedRule r);

// One entry of the trace: the plan a step ran with and what it measured.
struct SchedTraceEntry {
  int64_t step = 0;
  int K = 0;
  Selection select = Selection::Post;
  double t_dev = 0, t_host = 0, t_tx = 0;  // seconds
  int64_t host_tokens = 0;
  bool probe = false;
  int k_floor = 0;           // K_min(n) at this step
  double recall = -1;        // measured recall, or -1
  SchedRule rule = SchedRule::Fixed;  // what acted on this step's measurements
};

class FeedbackScheduler {
 public:
  explicit FeedbackScheduler(const FeedbackParams& params = {});

  void reset();
  // The plan for the coming step.
  SchedPlan plan() const { return plan_; }
  // Feeds the step that ran with plan(); returns the plan for the next one.
  SchedPlan update(const StepTimes& t);
  // The sequence holds `host_tokens` before its next step (after a prefill, a loaded state): the
  // plan's K rises to their floor now. Otherwise the floor is learnt from a step's measurements,
  // and a request's first step after its prefill would run at k_min (the answer's first tokens
  // of a 32K RULER needle read from 64 host tokens a kv-head, not 3068).
  SchedPlan follow_context(int64_t host_tokens);

  const FeedbackParams& params() const { return p_; }
  int switches() const { return switches_; }  // mode switches; probes are not switches
  int probes() const { return probes_; }
  const std::vector<SchedTraceEntry>& trace() const { return trace_; }
  // Smoothed state, for tests and logs: D (s), u (s per selected token), s (s per host token).
  double device_time() const { return dev_; }
  double host_cost_per_token() const { return per_token_; }
  double scan_cost_per_token() const { return scan_per_token_; }
  // The floor and the ceiling of K at n host tokens (they follow the context, k_min_share).
  int k_floor(int64_t n) const;
  int k_ceiling(int64_t n) const;

 private:
  // raised_before: follow_context raised this step's K to the floor.
  SchedRule update_post(const StepTimes& t, double sample, int k_used, int hi, bool warming, bool raised_before);
  SchedRule update_pre(const StepTimes& t, int k_used);
  SchedRule end_probe(const StepTimes& t, int k_used);
  void enter(Selection mode);
  void refuse_pre();  // recall too low: Post, and the next measurement waits
  // Pre at the floor saved less than min_pre_saving of Post's cost there: to Post, Pre waits; true.
  bool pre_costly(double post_cost, double pre_cost, int64_t host_tokens);
  double host_budget() const;  // B: D, or less on shared cores

  FeedbackParams p_;
  SchedPlan plan_;
  double dev_ = 0;        // EWMA of T_dev
  double per_token_ = 0;  // EWMA of (T_host + T_tx) / K_used in the current mode
  double last_pre_per_token_ = 0;  // the newest Pre step's (T_host + T_tx) / K_used
  bool seeded_dev_ = false, seeded_host_ = false;
  int streak_ = 0;                  // consecutive steps the switch condition of the current mode held
  int mode_steps_ = 0;              // steps in the current mode
  int hysteresis_now_ = 0;          // current Pre -> Post requirement (grows with backoff)
  bool raised_ = false;             // follow_context raised the coming step's K to the floor
  double post_cost_at_switch_ = 0;  // smoothed Post host cost at k_min before the switch (s)
  int64_t tokens_at_switch_ = 0;
  double scan_per_token_ = 0;  // s: key-scan cost per host token (s)
  bool scan_known_ = false;
  int probe_interval_ = 0;  // Pre steps from the last probe (or the switch) to the next
  int since_probe_ = 0;
  int switches_ = 0, probes_ = 0;
  int floor_ = 0;         // K_min(n) of the latest step
  int recall_wait_ = 0;   // Post steps before the next recall measurement may be asked for
  int recall_retry_ = 0;  // ... the wait after the next refusal (doubles)
  int costly_wait_ = 0;   // Post steps before Pre, measured no cheaper, is tried again ...
  int64_t costly_retry_tokens_ = 0;  // ... unless the host tokens reach this first
  std::vector<SchedTraceEntry> trace_;
};

// Summary of a trace for `--stats`: K range, final K, steps in each mode, switches, probes.
std::string describe_trace(const std::vector<SchedTraceEntry>& trace, int switches, int k_min, int k_max);

}  // namespace hg
