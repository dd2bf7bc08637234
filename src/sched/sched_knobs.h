// The feedback scheduler's knobs (--sched, --k-min, --k-max, --sched-*) in the knob registry
// (src/policy/knobs.h); src/sched/feedback.h says what each does.
#pragma once
#include "hybridgen/policy.h"
#include "policy/knobs.h"

namespace hg {

// The policies the scheduler tunes: those that keep evicted tokens on the host and select a
// Post-QKᵀ top-K of them (hybrid, hgca), whose K it adapts and whose mode it may switch to Pre-QKᵀ.
inline bool selects_top_k(const Policy& p) {
  return p.splits_kv() && p.keep_evicted && p.select == Selection::Post;
}

void register_sched_knobs(KnobRegistry& r);
// Checks between the scheduler's knobs (--k-min <= --k-max, ...); called by validate_policy.
void validate_sched_knobs(const Policy& p);

}  // namespace hg
