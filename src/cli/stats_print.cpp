#include "cli/stats_print.h"

#include <algorithm>
#include <fstream>

#include "device/device.h"
#include "hybridgen/error.h"

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
  return {{"device", engine.device().name()},
          {"threads", engine.device().threads()},
          {"prefill_tokens", s.prefill_tokens},
          {"prefill_seconds", s.prefill_seconds},
          {"prefill_tokens_per_s", s.prefill_tps()},
          {"decode_tokens", s.decode_tokens},
          {"decode_seconds", s.decode_seconds},
          {"decode_tokens_per_s", s.decode_tps()},
          {"ms_per_token_mean", mean_ms},
          {"ms_per_token_p50", percentile(s.step_ms, 0.5)},
          {"ms_per_token_p95", percentile(s.step_ms, 0.95)}};
}

void print_run_stats(std::FILE* out, Engine& engine) {
  const nlohmann::json j = run_stats_json(engine);
  std::fprintf(out, "\n--- stats (%s, %d threads)\n", j["device"].get<std::string>().c_str(), j["threads"].get<int>());
  std::fprintf(out, "prefill: %6lld tokens in %8.3f s = %8.2f tokens/s\n", j["prefill_tokens"].get<long long>(),
               j["prefill_seconds"].get<double>(), j["prefill_tokens_per_s"].get<double>());
  std::fprintf(out, "decode:  %6lld tokens in %8.3f s = %8.2f tokens/s (ms/token mean %.2f, p50 %.2f, p95 %.2f)\n",
               j["decode_tokens"].get<long long>(), j["decode_seconds"].get<double>(),
               j["decode_tokens_per_s"].get<double>(), j["ms_per_token_mean"].get<double>(),
               j["ms_per_token_p50"].get<double>(), j["ms_per_token_p95"].get<double>());
}

void write_stats_json(const std::string& path, Engine& engine) {
  std::ofstream f(path);
  if (!f) throw Error(path + ": cannot open for writing (--stats-json)");
  f << run_stats_json(engine).dump(2) << "\n";
}

}  // namespace hg::cli
