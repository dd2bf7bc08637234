// The knob registry of every part (src/policy/knobs.h's type): the policy's own knobs, the
// selectors' (pruners, InfiniGen) and the feedback scheduler's, assembled here, in the layer that
// sees them all. include/hybridgen/policy.h's apply_policy_yaml, validate_policy and
// describe_policy read it (policy_knobs.cpp).
#pragma once
#include "hybridgen/policy.h"
#include "policy/knobs.h"

namespace hg {

// The registry of every part's knobs (built once, immutable afterwards).
const KnobRegistry& knob_registry();

}  // namespace hg
