#include "sweep/runner.h"

#include <sched.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

#include "hybridgen/error.h"

namespace hg::sweep {

MachineFacts machine_facts() {
  MachineFacts m;
  m.cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      m.cpu = line.substr(line.find(':') + 1);
      m.cpu.erase(0, m.cpu.find_first_not_of(" \t"));
      break;
    }
  cpu_set_t set;
  m.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                        : static_cast<int>(std::thread::hardware_concurrency());
  return m;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

SweepSummary run_points(const SweepFile& f, const std::vector<Point>& points, ResultsFile& out, const RunPoint& run,
                        const RunnerOptions& options, const RunnerHooks& hooks) {
  const MachineFacts machine = machine_facts();
  SweepSummary s;
  s.total = points.size();
  for (const auto& p : points) s.skipped += out.done().count(p.key);
  size_t finished = s.skipped;
  for (const auto& p : points) {
    if (out.done().count(p.key)) continue;
    if (hooks.started) hooks.started(p, finished, s.total);
    nlohmann::json line = {{"sweep", f.name},
                           {"task", f.task},
                           {"point", p.index},
                           {"repeat", p.repeat},
                           {"key", p.key},
                           {"params", p.params_json()},
                           {"started_utc", utc_timestamp()}};
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      nlohmann::json metrics = run(p);
      line["status"] = "ok";
      line["metrics"] = std::move(metrics);
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "unknown error";
      line["status"] = "error";
      line["error"] = error;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string device = "unknown";
    if (line.contains("metrics") && line["metrics"].is_object() && line["metrics"].contains("device") &&
        line["metrics"]["device"].is_string())
      device = line["metrics"]["device"].get<std::string>();
    line["seconds"] = seconds;
    line["time_utc"] = utc_timestamp();
    line["hybridgen"] = {{"commit", options.commit}};
    line["machine"] = {{"cpu", machine.cpu}, {"cores", machine.cores}, {"device", device}};
    out.append(line);
    ++finished;
    (error.empty() ? s.ok : s.failed) += 1;
    if (hooks.finished) hooks.finished(p, seconds, error);
    if (!error.empty() && options.fail_fast) {
      s.stopped = true;
      break;
    }
  }
  return s;
}

}  // namespace hg::sweep
