// K_min profiling (`hybridgen eval --task kmin`): the fidelity of a hybrid policy against full
// attention for a list of K (Post-QKᵀ top-K at a fixed K, the policy's own query mode), and the
// knee of that curve: the smallest K whose top-1 agreement is within `tolerance` of the largest
// K's. The feedback scheduler never goes below it (`--k-min auto` reads the profile it makes).
// The reference logits are computed once (prefill of full attention) and every K is scored
// against them token by token through the decode path (src/eval/perplexity.h).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "eval/perplexity.h"
#include "hybridgen/engine.h"
#include "sched/kmin_profile.h"

namespace hg::eval {

struct KminConfig {
  std::vector<int> ks = {16, 32, 64, 128, 256, 512};
  double tolerance = 0.01;  // top-1 agreement (absolute) the knee may lose against the largest K
  void validate() const;    // hg::Error naming --ks / --tolerance
};

struct KminResult {
  std::vector<KminPoint> points;  // in increasing K
  std::vector<double> ppl;        // perplexity of each K, same order
  int knee = 0;
  double ref_ppl = 0;
  int64_t scored = 0;  // positions scored per K
  std::string device;  // the device it ran on
  nlohmann::json to_json() const;
};

// `policy_options` is the engine configuration of the policy (its K and selection are set per
// point: Post-QKᵀ, fixed K); the reference runs `full` with the same runtime options.
// on_point(K, point) after each K.
KminResult measure_kmin(const Model& model, const EngineOptions& policy_options, std::span<const int32_t> ids,
                        const std::vector<TokenWindow>& windows, const KminConfig& config,
                        const std::function<void(const KminPoint&)>& on_point = {});

}  // namespace hg::eval
