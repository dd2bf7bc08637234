// The `kmin` eval task: options, the profile file and the printing; the measurement is
// src/eval/kmin, the profile format src/sched/kmin_profile.
#include <cstdio>

#include "cli/eval_tasks.h"
#include "eval/kmin.h"
#include "hybridgen/error.h"
#include "sched/kmin_profile.h"

namespace hg::cli {

namespace {

class KminTask : public TaskRun {
 public:
  explicit KminTask(CLI::App& app) {
    add_model_options(app, model_);
    add_runtime_options(app, runtime_);
    add_policy_options(app, policy_);
    policy_.preset = "hybrid";
    app.get_option("--policy")->description("the hybrid policy to profile (its query mode and window)");
    app.get_option("--policy")->capture_default_str();
    runtime_.ctx = 1024;
    app.get_option("--ctx")->description("tokens per window measured (the policy's window must leave host tokens)");
    app.get_option("--ctx")->capture_default_str();
    app.add_option("-f,--file", file_, "text to measure on (e.g. Moby-Dick)");
    app.add_option("--ids-file", ids_file_, "token ids to measure on (a JSON array), instead of -f");
    app.add_option("--ks", ks_, "comma list of K to measure")->capture_default_str();
    app.add_option("--tolerance", config_.tolerance,
                   "the knee: the smallest K whose top-1 agreement is at most this far below the largest K's")
        ->capture_default_str();
    app.add_option("--max-windows", max_windows_, "windows of --ctx tokens measured (0: all)")->capture_default_str();
    app.add_option("--profile", profile_, "write the profile here instead of ${HG_CACHE}/profiles/<fingerprint>.json");
  }

  eval::KminConfig config() const {
    eval::KminConfig c = config_;
    c.ks = parse_list(ks_, "--ks", 1);
    return c;
  }

  void check() const override {
    config().validate();
    if (file_.empty() == ids_file_.empty()) throw Error("kmin: give exactly one of -f FILE and --ids-file FILE");
    if (max_windows_ < 0) throw Error("--max-windows must be >= 0, got " + std::to_string(max_windows_));
    if (runtime_.ctx < 2) throw Error("--ctx must be >= 2 for kmin, got " + std::to_string(runtime_.ctx));
    check_engine_options(runtime_, policy_, policy_.preset);
  }

  nlohmann::json run(TaskContext& ctx) override {
    setup_logging(runtime_.verbose);
    check();
    const eval::KminConfig c = config();
    const Model& model = ctx.models.model(model_);
    const std::string source = file_.empty() ? ids_file_ : file_;
    const std::vector<int32_t> ids = !ids_file_.empty()
                                         ? parse_ids(read_text_file(ids_file_), ids_file_)
                                         : ctx.models.tokenizer(model_, "kmin").encode(read_text_file(file_), false);
    const auto windows = eval::split_windows(ids.size(), runtime_.ctx, max_windows_);
    if (windows.empty()) throw Error(source + ": too short for one window of --ctx " + std::to_string(runtime_.ctx));
    EngineOptions eo = engine_options(runtime_, model.spec, runtime_.ctx, 1);
    apply_policy_options(policy_, policy_.preset, eo);
    auto on_point = [&](const KminPoint& p) {
      if (ctx.progress) std::fprintf(stderr, "kmin: K %d: top-1 agreement %.4f, KL %.5f\n", p.K, p.top1, p.kl);
    };
    const eval::KminResult r = eval::measure_kmin(model, eo, ids, windows, c, on_point);

    KminProfile profile;
    profile.fingerprint = model_fingerprint(model);
    profile.model = model.source.string();
    profile.k_min = r.knee;
    profile.tolerance = c.tolerance;
    profile.ctx = runtime_.ctx;
    profile.text = source;
    Policy measured = eo.policy;  // what measure_kmin ran: fixed K, Post-QKᵀ
    measured.sched = SchedMode::Fixed;
    measured.select = Selection::Post;
    profile.policy = describe_policy(measured) + " (k: each of --ks)";
    profile.points = r.points;
    const std::string path = profile_.empty() ? profile_path(model).string() : profile_;
    write_profile(profile, path);

    nlohmann::json j = r.to_json();
    j["tolerance"] = c.tolerance;
    j["ctx"] = runtime_.ctx;
    j["windows"] = windows.size();
    j["fingerprint"] = profile.fingerprint;
    j["profile"] = path;
    j["policy"] = profile.policy;
    j["device"] = r.device;
    return j;
  }

  std::string summary(const nlohmann::json& j) const override {
    std::string s = "K_min " + std::to_string(j["k_min"].get<int>()) + " (top-1 agreement within " +
                    std::to_string(j["tolerance"].get<double>()) + " of the largest K), written to " +
                    j["profile"].get<std::string>() + "\n";
    char line[160];
    std::snprintf(line, sizeof line, "%8s %14s %12s %10s\n", "K", "top-1 agree", "KL mean", "ppl");
    s += line;
    for (const auto& p : j["points"]) {
      std::snprintf(line, sizeof line, "%8d %14.4f %12.6f %10.4f\n", p["k"].get<int>(),
                    p["top1_agreement"].get<double>(), p["kl_mean"].get<double>(), p["ppl"].get<double>());
      s += line;
    }
    s += "reference (full) ppl " + std::to_string(j["ref_ppl"].get<double>());
    return s;
  }

 private:
  ModelOptions model_;
  RuntimeOptions runtime_;
  PolicyOptions policy_;
  eval::KminConfig config_;
  std::string file_, ids_file_;
  std::string ks_ = "16,32,64,128,256,512";
  int max_windows_ = 1;
  std::string profile_;
};

}  // namespace

std::unique_ptr<TaskRun> bind_kmin_task(CLI::App& app) { return std::make_unique<KminTask>(app); }

}  // namespace hg::cli
