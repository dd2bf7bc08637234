#include "eval/kmin.h"

#include <algorithm>

#include "device/device.h"
#include "hybridgen/error.h"

namespace hg::eval {

void KminConfig::validate() const {
  if (ks.empty()) throw Error("--ks: give at least one K");
  for (int k : ks)
    if (k < 1) throw Error("--ks: every K must be >= 1, got " + std::to_string(k));
  if (!(tolerance >= 0 && tolerance < 1))
    throw Error("--tolerance must be in [0, 1), got " + std::to_string(tolerance));
}

nlohmann::json KminResult::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (size_t i = 0; i < points.size(); ++i)
    pts.push_back({{"k", points[i].K}, {"top1_agreement", points[i].top1}, {"kl_mean", points[i].kl}, {"ppl", ppl[i]}});
  return {{"k_min", knee}, {"points", pts}, {"ref_ppl", ref_ppl}, {"n_tokens", scored}};
}

KminResult measure_kmin(const Model& model, const EngineOptions& policy_options, std::span<const int32_t> ids,
                        const std::vector<TokenWindow>& windows, const KminConfig& config,
                        const std::function<void(const KminPoint&)>& on_point) {
  config.validate();
  if (!policy_options.policy.splits_kv())
    throw Error("eval --task kmin: --policy " + policy_options.policy.name +
                " keeps no tokens on the host; profile a hybrid policy (--policy hybrid)");
  KminResult r;
  ReferenceLogits ref;
  {
    EngineOptions ro = policy_options;
    ro.policy = policy_preset("full");
    Engine reference(model, ro);
    ref = reference_logits(reference, ids, windows);
    r.device = reference.device().name();
  }
  std::vector<int> ks = config.ks;
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  for (int k : ks) {
    EngineOptions eo = policy_options;
    eo.policy.K = k;
    eo.policy.select = Selection::Post;
    eo.policy.sched = SchedMode::Fixed;
    Engine engine(model, eo);
    const PerplexityResult p = score_decode(engine, ref, ids, windows);
    const nlohmann::json j = p.to_json();
    const KminPoint point{k, j["top1_agreement"].get<double>(), j["kl_mean"].get<double>()};
    r.points.push_back(point);
    r.ppl.push_back(p.ppl());
    r.ref_ppl = j["ref_ppl"].get<double>();
    r.scored = p.scored;
    if (on_point) on_point(point);
  }
  r.knee = pick_knee(r.points, config.tolerance);
  return r;
}

}  // namespace hg::eval
