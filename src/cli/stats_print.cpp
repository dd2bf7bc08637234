#include "cli/stats_print.h"

#include <algorithm>
#include <fstream>

#include "attention/layer_attention.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "sched/batch_scheduler.h"

namespace hg::cli {

namespace {
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}
}  // namespace

nlohmann::json run_stats_json(Engine& engine) {
  const RunStats& s = engine.stats();
  double mean_ms = 0.0;
  for (double ms : s.step_ms) mean_ms += ms;
  if (!s.step_ms.empty()) mean_ms /= static_cast<double>(s.step_ms.size());
  nlohmann::json layers = nlohmann::json::array();
  int64_t bytes_h2d = 0;  // decode steps, all layers (prefill ships nothing per token)
  for (const LayerStats& l : engine.layer_stats()) {
    bytes_h2d += l.bytes_h2d;
    const double steps = l.steps > 0 ? static_cast<double>(l.steps) : 1.0;
    layers.push_back({{"t_dev_ms", l.t_dev() / steps * 1e3}, {"t_host_ms", l.t_host / steps * 1e3},
                      {"t_tx_ms", l.t_tx / steps * 1e3}, {"t_wait_ms", l.t_wait / steps * 1e3},
                      {"selected_per_step", static_cast<double>(l.selected) / steps},
                      {"host_tokens_per_step", static_cast<double>(l.host_tokens) / steps},
                      {"bytes_h2d_per_step", static_cast<double>(l.bytes_h2d) / steps}, {"steps", l.steps},
                      {"q_cosine", l.q_cos_n > 0 ? l.q_cos_sum / static_cast<double>(l.q_cos_n) : 0.0}});
  }
  nlohmann::json j = {{"device", engine.device().name()},
          {"attention", engine.describe_attention()},
          {"device_defaults", engine.device_defaults()},
          {"memory", engine.attention().memory_report()},
          {"layers", layers},
          {"threads", engine.device().threads()},
          {"precision", precision_name(engine.options().precision)},
          {"prefill_tokens", s.prefill_tokens},
          {"prefill_seconds", s.prefill_seconds},
          {"prefill_tokens_per_s", s.prefill_tps()},
          {"decode_tokens", s.decode_tokens},
          {"decode_seconds", s.decode_seconds},
          {"decode_tokens_per_s", s.decode_tps()},
          {"ms_per_token_mean", mean_ms},
          {"ms_per_token_p50", percentile(s.step_ms, 0.5)},
          {"ms_per_token_p95", percentile(s.step_ms, 0.95)},
          {"h2d_bytes_per_token", s.decode_tokens > 0 ? static_cast<double>(bytes_h2d) / s.decode_tokens : 0.0}};
  if (engine.scheduler()) j["sched"] = engine.scheduler()->to_json();
  return j;
}

void print_run_stats(std::FILE* out, Engine& engine) {
  const nlohmann::json j = run_stats_json(engine);
  std::fprintf(out, "\n--- stats (%s, %d threads, precision %s)\n", j["device"].get<std::string>().c_str(),
               j["threads"].get<int>(), j["precision"].get<std::string>().c_str());
  std::fprintf(out, "prefill: %6lld tokens in %8.3f s = %8.2f tokens/s\n", j["prefill_tokens"].get<long long>(),
               j["prefill_seconds"].get<double>(), j["prefill_tokens_per_s"].get<double>());
  std::fprintf(out, "decode:  %6lld tokens in %8.3f s = %8.2f tokens/s (ms/token mean %.2f, p50 %.2f, p95 %.2f)\n",
               j["decode_tokens"].get<long long>(), j["decode_seconds"].get<double>(),
               j["decode_tokens_per_s"].get<double>(), j["ms_per_token_mean"].get<double>(),
               j["ms_per_token_p50"].get<double>(), j["ms_per_token_p95"].get<double>());
  std::fprintf(out, "attention: %s\n", j["attention"].get<std::string>().c_str());
  if (!engine.device_defaults().empty()) std::fprintf(out, "%s\n", engine.device_defaults().c_str());
  if (!j["memory"].is_null())
    std::fprintf(out, "host KV placement: %s (pages sampled per arena; matched plan: %s; K blocks spilled: %llu)\n",
                 j["memory"]["placement"].dump().c_str(), j["memory"]["matched"].get<bool>() ? "yes" : "NO",
                 static_cast<unsigned long long>(j["memory"]["spilled_k_blocks"].get<uint64_t>()));
  if (j.contains("sched"))
    std::fprintf(out, "scheduler (%s): %s\n", j["sched"]["mode"].get<std::string>().c_str(),
                 j["sched"]["summary"].get<std::string>().c_str());
  const auto& layers = j["layers"];
  if (layers.empty()) return;
  // Per layer and decode step (means): the device stage, the host stage of the same layer,
  // the host->device transfer, and how long the device waited for the host.
  std::fprintf(out, "%5s %9s %9s %9s %9s %10s %10s %12s %9s\n", "layer", "T_dev ms", "T_host ms", "T_tx ms", "wait ms",
               "selected", "host tok", "bytes h2d", "cos(q~,q)");
  double sum[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const double v[4] = {l["t_dev_ms"].get<double>(), l["t_host_ms"].get<double>(), l["t_tx_ms"].get<double>(),
                         l["t_wait_ms"].get<double>()};
    for (int k = 0; k < 4; ++k) sum[k] += v[k];
    std::fprintf(out, "%5zu %9.3f %9.3f %9.3f %9.3f %10.1f %10.1f %12.0f %9.4f\n", i, v[0], v[1], v[2], v[3],
                 l["selected_per_step"].get<double>(), l["host_tokens_per_step"].get<double>(),
                 l["bytes_h2d_per_step"].get<double>(), l["q_cosine"].get<double>());
  }
  std::fprintf(out, "%5s %9.3f %9.3f %9.3f %9.3f\n", "sum", sum[0], sum[1], sum[2], sum[3]);
  std::fprintf(out, "host -> device: %.0f bytes per decoded token\n", j["h2d_bytes_per_token"].get<double>());
}

void write_stats_json(const std::string& path, Engine& engine) {
  std::ofstream f(path);
  if (!f) throw Error(path + ": cannot open for writing (--stats-json)");
  f << run_stats_json(engine).dump(2) << "\n";
}

}  // namespace hg::cli
