// The feedback scheduler's knobs in the knob registry (src/policy/knobs.h): --sched, --k-min,
// --k-max and the rules' constants (src/sched/feedback.h says what each does).
#include <climits>

#include "hybridgen/error.h"
#include "sched/batch_scheduler.h"
#include "sched/sched_knobs.h"

namespace hg {


void register_sched_knobs(KnobRegistry& r) {
  const KnobScope ps = selects_top_k;
  r.add(enum_knob<SchedMode>("sched",
                             "feedback scheduler: fixed (--k and --select as given), adaptive (K in [k-min, k-max] "
                             "and Post/Pre selection tuned every step), adaptive-k (K only, Post), adaptive-select "
                             "(Post/Pre only, at --k)",
                             &Policy::sched, ps));
  r.add(auto_int_knob("k-min",
                      "accuracy floor of the adaptive K (auto: the model's K_min profile from `eval --task kmin`, "
                      "else " + std::to_string(kDefaultKMin) + "); it rises with the context (--k-min-share)",
                      {&Policy::feedback, &Policy::Feedback::k_min}, 0, INT_MAX, ps));
  r.add(int_knob("k-max", "largest K of the adaptive scheduler", {&Policy::feedback, &Policy::Feedback::k_max}, 1, INT_MAX, ps));
  r.add(float_knob("sched-alpha", "scheduler: EWMA weight of the newest step's timings", {&Policy::feedback, &Policy::Feedback::alpha}, 0.01f,
                   1.0f, ps));
  r.add(float_knob("sched-margin", "scheduler: K grows while T_host + T_tx <= (1 - margin) T_dev",
                   {&Policy::feedback, &Policy::Feedback::margin}, 0.0f, 0.9f, ps));
  r.add(float_knob("sched-grow", "scheduler: the most K grows in one step (0.5: by half)", {&Policy::feedback, &Policy::Feedback::grow}, 0.01f,
                   15.0f, ps));
  r.add(int_knob("sched-pre-after", "scheduler: host-bound steps at k-min before switching to Pre-QK selection",
                 {&Policy::feedback, &Policy::Feedback::pre_after}, 1, INT_MAX, ps));
  r.add(int_knob("sched-hysteresis", "scheduler: steps the predicted Post-QK cost must fit before switching back",
                 {&Policy::feedback, &Policy::Feedback::hysteresis}, 1, INT_MAX, ps));
  r.add(int_knob("sched-probe",
                 "scheduler: Pre-QK steps before one Post-QK step measures the key scan afresh (doubling after each, "
                 "up to 8x; 0: never)",
                 {&Policy::feedback, &Policy::Feedback::probe}, 0, INT_MAX, ps));
  r.add(float_knob("sched-shared-loss",
                   "scheduler, CPU device: the most of the device's time the host workers may take from it on shared "
                   "cores (the host's budget is min(1, loss / host share) T_dev)",
                   {&Policy::feedback, &Policy::Feedback::shared_loss}, 0.01f, 1.0f, ps));
  r.add(float_knob("k-min-share",
                   "scheduler: the floor of K follows the context: window + sinks + K >= this share of it (0: the "
                   "floor is --k-min)",
                   {&Policy::feedback, &Policy::Feedback::k_min_share}, 0.0f, 1.0f, ps));
  r.add(float_knob("k-max-share", "scheduler: --k-max rises with the context the same way (0: fixed)",
                   {&Policy::feedback, &Policy::Feedback::k_max_share}, 0.0f, 1.0f, ps));
  r.add(float_knob("sched-min-recall",
                   "scheduler: Pre-QK selection only while its predictor's tokens get this share of the attention "
                   "Post-QK's top K gets, measured before a switch and at every probe (0: no check)",
                   {&Policy::feedback, &Policy::Feedback::min_recall}, 0.0f, 1.0f, ps));
  r.add(float_knob("sched-min-pre-saving",
                   "scheduler: Pre-QK selection only while it costs at least this share less than Post-QK at the "
                   "floor, measured at the switch and at every probe (0: no check)",
                   {&Policy::feedback, &Policy::Feedback::min_pre_saving}, 0.0f, 0.9f, ps));
  r.add(float_knob("sched-post-margin", "scheduler: ... fit within (1 - post-margin) T_dev",
                   {&Policy::feedback, &Policy::Feedback::post_margin}, 0.0f, 0.9f, ps));
}

void validate_sched_knobs(const Policy& p) {
  if (p.sched == SchedMode::Fixed) return;
  if (p.feedback.k_min > p.feedback.k_max)
    throw Error("--k-min " + std::to_string(p.feedback.k_min) + " is larger than --k-max " + std::to_string(p.feedback.k_max));
  feedback_params(p, p.feedback.k_min < 0 ? std::min(kDefaultKMin, p.feedback.k_max) : p.feedback.k_min);  // the rules' own checks
}

}  // namespace hg
