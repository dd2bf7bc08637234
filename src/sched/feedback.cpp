// The feedback scheduler's rules; feedback.h says what they are and why they converge.
#include "sched/feedback.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>
#include <utility>

#include "hybridgen/error.h"

namespace hg {

namespace {
constexpr int kMaxBackoff = 64;  // hysteresis grows to at most this multiple of its base

double ewma(double state, double sample, double alpha) { return alpha * sample + (1.0 - alpha) * state; }

int clamp_k(double k, int lo, int hi) {
  if (!(k >= lo)) return lo;  // also NaN
  if (k >= hi) return hi;
  return static_cast<int>(k);
}
}  // namespace

void FeedbackParams::validate() const {
  auto fail = [](const std::string& m) { throw Error(m); };
  if (k_min < 0) fail("--k-min must be >= 0, got " + std::to_string(k_min));
  if (k_max < 1) fail("--k-max must be >= 1, got " + std::to_string(k_max));
  if (k_min > k_max) fail("--k-min " + std::to_string(k_min) + " is larger than --k-max " + std::to_string(k_max));
  if (!(alpha > 0 && alpha <= 1)) fail("--sched-alpha must be in (0, 1], got " + std::to_string(alpha));
  if (!(margin >= 0 && margin < 1)) fail("--sched-margin must be in [0, 1), got " + std::to_string(margin));
  if (!(grow > 1)) fail("--sched-grow must be > 0, got " + std::to_string(grow - 1));
  if (pre_after < 1) fail("--sched-pre-after must be >= 1, got " + std::to_string(pre_after));
  if (settle_steps < 1) fail("--sched-settle must be >= 1, got " + std::to_string(settle_steps));
  if (hysteresis < 1) fail("--sched-hysteresis must be >= 1, got " + std::to_string(hysteresis));
  if (!(post_margin >= 0 && post_margin < 1))
    fail("--sched-post-margin must be in [0, 1), got " + std::to_string(post_margin));
  if (!(host_share >= 0 && host_share <= 1)) fail("host share must be in [0, 1], got " + std::to_string(host_share));
  if (!(shared_loss > 0 && shared_loss <= 1)) fail("shared loss must be in (0, 1], got " + std::to_string(shared_loss));
  if (probe_every < 0) fail("--sched-probe must be >= 0, got " + std::to_string(probe_every));
  if (warmup_steps < 0) fail("scheduler warm-up steps must be >= 0, got " + std::to_string(warmup_steps));
  if (!(k_min_share >= 0 && k_min_share <= 1)) fail("--k-min-share must be in [0, 1], got " + std::to_string(k_min_share));
  if (!(k_max_share >= 0 && k_max_share <= 1)) fail("--k-max-share must be in [0, 1], got " + std::to_string(k_max_share));
  if (device_tokens < 0) fail("scheduler device tokens must be >= 0, got " + std::to_string(device_tokens));
  if (!(min_recall >= 0 && min_recall <= 1))
    fail("--sched-min-recall must be in [0, 1], got " + std::to_string(min_recall));
  if (!(min_pre_saving >= 0 && min_pre_saving < 1))
    fail("--sched-min-pre-saving must be in [0, 1), got " + std::to_string(min_pre_saving));
}

const char* sched_rule_name(SchedRule r) {
  switch (r) {
    case SchedRule::Fixed: return "fixed";
    case SchedRule::Warmup: return "warmup";
    case SchedRule::NoHost: return "no-host";
    case SchedRule::Grow: return "grow";
    case SchedRule::Shrink: return "shrink";
    case SchedRule::Hold: return "hold";
    case SchedRule::Floor: return "floor";
    case SchedRule::MeasureRecall: return "measure-recall";
    case SchedRule::ToPre: return "to-pre";
    case SchedRule::PreRefused: return "pre-refused";
    case SchedRule::Pre: return "pre";
    case SchedRule::ToPost: return "to-post";
    case SchedRule::Probe: return "probe";
    case SchedRule::RecallLow: return "recall-low";
    case SchedRule::PreCostly: return "pre-costly";
  }
  return "?";
}

namespace {
// max(base, ⌈share · (n + device)⌉ − device): K that brings the tokens attended to `share` of the context.
int share_k(int base, double share, int64_t n, int device) {
  if (share <= 0 || n <= 0) return base;
  const double attended = std::ceil(share * static_cast<double>(n + device)) - device;
  return attended > base ? static_cast<int>(std::min<double>(attended, INT_MAX / 2)) : base;
}
}  // namespace

int FeedbackScheduler::k_floor(int64_t n) const { return share_k(p_.k_min, p_.k_min_share, n, p_.device_tokens); }

int FeedbackScheduler::k_ceiling(int64_t n) const {
  return std::max(k_floor(n), share_k(p_.k_max, p_.k_max_share, n, p_.device_tokens));
}

FeedbackScheduler::FeedbackScheduler(const FeedbackParams& params) : p_(params) {
  p_.validate();
  reset();
}

void FeedbackScheduler::reset() {
  plan_ = {p_.k_min, Selection::Post};
  dev_ = per_token_ = 0;
  seeded_dev_ = seeded_host_ = false;
  streak_ = mode_steps_ = 0;
  hysteresis_now_ = p_.hysteresis;
  post_cost_at_switch_ = scan_per_token_ = last_pre_per_token_ = 0;
  tokens_at_switch_ = 0;
  scan_known_ = false;
  probe_interval_ = since_probe_ = 0;
  switches_ = probes_ = 0;
  floor_ = p_.k_min;
  raised_ = false;
  recall_wait_ = costly_wait_ = 0;
  costly_retry_tokens_ = 0;
  recall_retry_ = std::max(1, p_.probe_every);
  trace_.clear();
}

void FeedbackScheduler::refuse_pre() {
  streak_ = 0;
  recall_wait_ = recall_retry_;
  recall_retry_ = std::min(8 * std::max(1, p_.probe_every), 2 * recall_retry_);
}

void FeedbackScheduler::enter(Selection mode) {
  if (mode == Selection::Pre) {
    // A return to Post that did not hold: ask for a longer run of fitting steps next time.
    const bool short_return = switches_ > 0 && mode_steps_ < 2 * hysteresis_now_;
    hysteresis_now_ = short_return ? std::min(kMaxBackoff * p_.hysteresis, 2 * hysteresis_now_) : p_.hysteresis;
    scan_known_ = false;
    probe_interval_ = p_.probe_every;
    since_probe_ = 0;
  }
  plan_ = {floor_, mode};
  ++switches_;
  streak_ = 0;
  mode_steps_ = 0;
  seeded_host_ = false;  // the other mode costs differently per token
}

SchedPlan FeedbackScheduler::follow_context(int64_t host_tokens) {
  floor_ = k_floor(std::max<int64_t>(host_tokens, 0));
  if (plan_.K < floor_) {
    plan_.K = floor_;
    raised_ = true;
  }
  return plan_;
}

SchedPlan FeedbackScheduler::update(const StepTimes& t) {
  const int64_t n = std::max<int64_t>(t.host_tokens, 0);
  floor_ = k_floor(n);
  trace_.push_back({static_cast<int64_t>(trace_.size()), plan_.K, plan_.select, t.t_dev, t.t_host, t.t_tx,
                    t.host_tokens, plan_.probe, floor_, t.recall, SchedRule::Hold});
  SchedRule& rule = trace_.back().rule;
  const bool raised = std::exchange(raised_, false);
  // Warm-up steps count toward no switch, and the EWMAs start over at each of them and at the
  // first step after them (seeded by it, not by a cold one).
  const int64_t step = static_cast<int64_t>(trace_.size()) - 1;
  const bool warming = step < p_.warmup_steps;
  const bool smooth = step > p_.warmup_steps;
  const int k_used = static_cast<int>(std::min<int64_t>(plan_.K, n));
  const int hi = std::max(floor_, static_cast<int>(std::min<int64_t>(k_ceiling(n), n)));
  dev_ = seeded_dev_ && smooth ? ewma(dev_, t.t_dev, p_.alpha) : t.t_dev;
  seeded_dev_ = true;
  plan_.measure_recall = false;
  if (plan_.probe) {  // Post's cost, not Pre's: it stays out of the Pre EWMA
    rule = end_probe(t, k_used);
    return plan_;
  }
  ++mode_steps_;
  if (n == 0) {  // nothing on the host yet: nothing to measure
    plan_.K = std::clamp(plan_.K, floor_, hi);
    rule = SchedRule::NoHost;
    return plan_;
  }
  const double sample = (t.t_host + t.t_tx) / std::max(k_used, 1);
  per_token_ = seeded_host_ && smooth ? ewma(per_token_, sample, p_.alpha) : sample;
  seeded_host_ = true;
  if (plan_.select == Selection::Pre) last_pre_per_token_ = sample;
  rule = plan_.select == Selection::Post ? update_post(t, sample, k_used, hi, warming, raised) : update_pre(t, k_used);
  if (warming && rule != SchedRule::Floor) rule = SchedRule::Warmup;
  return plan_;
}

SchedRule FeedbackScheduler::end_probe(const StepTimes& t, int k_used) {
  ++probes_;
  plan_ = {floor_, Selection::Pre};
  probe_interval_ = std::min(8 * p_.probe_every, 2 * probe_interval_);
  since_probe_ = 0;
  if (t.host_tokens <= 0) return SchedRule::Probe;
  // The two modes at the same K differ by the key scan over every host token.
  const double post = t.t_host + t.t_tx, pre = per_token_ * std::max(k_used, 1);
  scan_per_token_ = std::max(0.0, post - pre) / static_cast<double>(t.host_tokens);
  // Whether Pre pays: against its newest step where that was cheaper than the EWMA (a host that
  // just got faster is still slow in the EWMA), so that Pre is not left on a stale cost.
  const double pre_now = std::min(per_token_, last_pre_per_token_) * std::max(k_used, 1);
  scan_known_ = true;
  if (p_.min_recall > 0 && t.recall >= 0 && t.recall < p_.min_recall) {
    // The predictor no longer finds what Post-QKᵀ would: accuracy before speed.
    enter(Selection::Post);
    refuse_pre();
    return SchedRule::RecallLow;
  }
  if (pre_costly(post, pre_now, t.host_tokens)) return SchedRule::PreCostly;
  return SchedRule::Probe;
}

bool FeedbackScheduler::pre_costly(double post, double pre, int64_t host_tokens) {
  if (p_.min_pre_saving <= 0 || (post > 0 && post - pre >= p_.min_pre_saving * post)) return false;  // 0: off
  enter(Selection::Post);
  // Post's scan grows with the host tokens and Pre's cost does not: try again once they have
  // grown by a quarter, or after 8 probe intervals (the costs may change otherwise too).
  costly_wait_ = 8 * std::max(1, p_.probe_every);
  costly_retry_tokens_ = host_tokens + host_tokens / 4;
  return true;
}

double FeedbackScheduler::host_budget() const {
  if (p_.host_share <= 0) return dev_;
  return std::min(1.0, p_.shared_loss / p_.host_share) * dev_;
}

SchedRule FeedbackScheduler::update_post(const StepTimes& t, double sample, int k_used, int hi, bool warming,
                                         bool raised_before) {
  const double budget = host_budget();
  const double target = (1.0 - p_.margin) * budget;
  const double host = per_token_ * std::max(k_used, 1);  // predicted host + transfer cost at this K
  // The floor rises with the context (a token a step at most): K below it is raised first, and
  // the rules act on the raised K (a K that only follows the floor is still "at the floor").
  const bool raised = raised_before || plan_.K < floor_;
  const int k = std::max(plan_.K, floor_);
  // The K whose predicted cost meets the target at the per-token cost measured now.
  const double balance = per_token_ > 0 ? target / per_token_ : static_cast<double>(hi);
  SchedRule rule = SchedRule::Hold;
  if (!p_.adapt_k) {
    plan_.K = floor_;
  } else if (host <= target) {
    const double up = std::min(p_.grow * std::max(k, 1), balance);
    plan_.K = clamp_k(std::max(up, static_cast<double>(k) + 1), floor_, hi);
    rule = plan_.K > k ? SchedRule::Grow : SchedRule::Hold;
  } else if (host > budget) {
    // The smoothed cost says host-bound; the newest per-token cost, when higher, is the cost at
    // this K (the EWMA still carries the cheaper per-token cost of the larger K before), so the
    // decrease uses it. A single noisy step cannot get here: the EWMA must agree.
    const double down = target / std::max(per_token_, sample);
    plan_.K = clamp_k(std::min(down, static_cast<double>(k) - 1), floor_, hi);
    rule = plan_.K < k ? SchedRule::Shrink : SchedRule::Hold;
  } else {
    plan_.K = std::clamp(k, floor_, hi);  // dead band: hold
  }
  if (raised && rule == SchedRule::Hold) rule = SchedRule::Floor;
  // At the floor and still host-bound: only a cheaper selection can help.
  bool host_bound_at_floor = host > budget && k == floor_ && t.host_tokens > floor_;
  if (recall_wait_ > 0) --recall_wait_;
  if (costly_wait_ > 0) --costly_wait_;
  // Pre measured no cheaper lately, and nothing has changed enough since: Post, without a streak.
  if (costly_wait_ > 0 && t.host_tokens < costly_retry_tokens_) host_bound_at_floor = false;
  streak_ = host_bound_at_floor && !warming ? streak_ + 1 : 0;  // a warm-up step counts toward no switch
  if (!p_.adapt_select || streak_ == 0) return rule;
  const bool check = p_.min_recall > 0;
  if (streak_ >= p_.pre_after) {
    if (check && recall_wait_ > 0) return rule;  // refused lately: Post until the wait is over
    if (check && t.recall < 0) {                 // not measured at this step: the next one does
      plan_.measure_recall = true;
      return SchedRule::MeasureRecall;
    }
    if (check && t.recall < p_.min_recall) {
      refuse_pre();
      return SchedRule::PreRefused;
    }
    post_cost_at_switch_ = host;
    tokens_at_switch_ = t.host_tokens;
    enter(Selection::Pre);
    return SchedRule::ToPre;
  }
  if (check && streak_ == p_.pre_after - 1 && recall_wait_ == 0) {
    plan_.measure_recall = true;  // the step that may complete the streak measures the recall
    return SchedRule::MeasureRecall;
  }
  return rule;
}

SchedRule FeedbackScheduler::update_pre(const StepTimes& t, int k_used) {
  plan_.K = floor_;  // the floor follows the context in Pre too
  const double host_pre = per_token_ * std::max(k_used, 1);
  if (!scan_known_) {
    if (mode_steps_ < p_.settle_steps) return SchedRule::Pre;
    // Post and Pre at k_min differ by the key scan over every host token.
    scan_per_token_ =
        std::max(0.0, post_cost_at_switch_ - host_pre) / static_cast<double>(std::max<int64_t>(tokens_at_switch_, 1));
    scan_known_ = true;
    if (pre_costly(post_cost_at_switch_, host_pre, t.host_tokens)) return SchedRule::PreCostly;
  }
  const double post_predicted = host_pre + scan_per_token_ * static_cast<double>(t.host_tokens);
  streak_ = post_predicted <= (1.0 - p_.post_margin) * host_budget() ? streak_ + 1 : 0;
  if (streak_ >= hysteresis_now_) {
    enter(Selection::Post);
    return SchedRule::ToPost;
  }
  if (p_.probe_every > 0 && ++since_probe_ >= probe_interval_) {
    plan_ = {floor_, Selection::Post, true, p_.min_recall > 0};
  }
  return SchedRule::Pre;
}

std::string describe_trace(const std::vector<SchedTraceEntry>& tr, int switches, int k_min, int k_max) {
  if (tr.empty()) return "no decode steps";
  int lo = tr.front().K, hi = lo;
  int64_t post = 0;
  for (const auto& e : tr) {
    lo = std::min(lo, e.K);
    hi = std::max(hi, e.K);
    post += e.select != Selection::Pre;
  }
  const int64_t pre = static_cast<int64_t>(tr.size()) - post;
  const auto probes = std::count_if(tr.begin(), tr.end(), [](const SchedTraceEntry& e) { return e.probe; });
  std::ostringstream o;
  o << "K " << lo << ".." << hi << " (final " << tr.back().K << ", k_min " << k_min << ", k_max " << k_max << "), "
    << "post " << post << " steps, pre " << pre << " steps, " << switches << " switches";
  if (probes > 0) o << ", " << probes << " probes";
  const auto count = [&](SchedRule r) {
    return std::count_if(tr.begin(), tr.end(), [r](const SchedTraceEntry& e) { return e.rule == r; });
  };
  if (const auto refused = count(SchedRule::PreRefused) + count(SchedRule::RecallLow); refused > 0)
    o << ", Pre refused " << refused << " times for low recall";
  if (const auto costly = count(SchedRule::PreCostly); costly > 0)
    o << ", Pre left " << costly << " times as no cheaper than Post";
  if (tr.back().k_floor > k_min) o << ", floor " << tr.back().k_floor << " at " << tr.back().host_tokens << " host tokens";
  return o.str();
}

}  // namespace hg
