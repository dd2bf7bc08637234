// Runs the points of a sweep that the results file does not hold yet, one result line each:
//   {"sweep", "task", "point", "repeat", "key", "params", "status": "ok"|"error",
//    "metrics" | "error", "seconds", "started_utc", "time_utc",
//    "hybridgen": {"commit"}, "machine": {"cpu", "cores", "device"}}
// A point that throws becomes an error line and the sweep goes on (fail_fast: it stops there).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sweep/points.h"
#include "sweep/results.h"

namespace hg::sweep {

struct MachineFacts {
  std::string cpu;  // /proc/cpuinfo "model name" ("unknown" where there is none)
  int cores = 0;    // logical CPUs this process may run on
};
MachineFacts machine_facts();
std::string utc_timestamp();  // "2026-12-01T09:10:11Z"

struct RunnerOptions {
  bool fail_fast = false;
  std::string commit = "unknown";  // git describe of the build
};

struct RunnerHooks {
  // Before a point runs: points finished so far (skipped ones included) and in all.
  std::function<void(const Point&, size_t done, size_t total)> started;
  // After its line is written; error is empty when it succeeded.
  std::function<void(const Point&, double seconds, const std::string& error)> finished;
};

struct SweepSummary {
  size_t total = 0, skipped = 0, ok = 0, failed = 0;
  bool stopped = false;  // fail_fast stopped the sweep
};

// run(point) returns the point's metrics (a JSON object; "device" names the device) or throws.
using RunPoint = std::function<nlohmann::json(const Point&)>;

SweepSummary run_points(const SweepFile& f, const std::vector<Point>& points, ResultsFile& out, const RunPoint& run,
                        const RunnerOptions& options, const RunnerHooks& hooks = {});

}  // namespace hg::sweep
