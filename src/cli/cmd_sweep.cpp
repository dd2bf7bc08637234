// hybridgen sweep FILE.yaml [-o OUT.jsonl] [--resume] [--plot DIR] [--dry-run] [--fail-fast]:
// runs an eval task over the points of a sweep file (src/sweep/), one JSONL line per point.
// Every point is parsed by the task's own CLI11 app (eval_tasks.h) and checked before the first
// one runs, so a typo in the last point does not surface after an hour of runs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/eval_tasks.h"
#include "hybridgen/error.h"
#include "sweep/points.h"
#include "sweep/runner.h"
#include "sweep/sweep_file.h"

namespace hg::cli {

namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  std::string file;
  std::string out;  // default results/<name>.jsonl
  std::string plot_dir;
  bool resume = false, dry_run = false, fail_fast = false, no_progress = false;
};

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& t : eval_tasks()) names.push_back(t.name);
  return names;
}

// Shell-quotes one word.
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// $HG_PLOT_SCRIPT, or tools/plot_sweep.py above the binary: in the checkout it was built in
// (build/bin/hybridgen -> tools/) or where it is installed (P/bin/hybridgen -> P/share/hybridgen/tools/).
std::string plot_script() {
  if (const char* env = std::getenv("HG_PLOT_SCRIPT")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !ec && !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
    for (const fs::path sub : {"tools", "share/hybridgen/tools"})
      if (fs::exists(dir / sub / "plot_sweep.py")) return (dir / sub / "plot_sweep.py").string();
  if (fs::exists("tools/plot_sweep.py")) return "tools/plot_sweep.py";
  throw Error("--plot: tools/plot_sweep.py not found (set HG_PLOT_SCRIPT)");
}

// The first Python that has matplotlib: $HG_PYTHON, python3 on PATH, Debian's /usr/bin/python3
// (scripts/setup.sh installs python3-matplotlib).
std::string plot_python() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("HG_PYTHON")) candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const auto& py : candidates)
    if (std::system((quote(py) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) return py;
  throw Error("--plot: no python3 with matplotlib (run scripts/setup.sh: it installs python3-matplotlib)");
}

void run_plot(const std::string& results, const std::string& dir) {
  const std::string cmd =
      quote(plot_python()) + " " + quote(plot_script()) + " " + quote(results) + " -o " + quote(dir);
  if (std::system(cmd.c_str()) != 0) throw Error("--plot: " + cmd + " failed");
}

void run_sweep(const SweepOptions& o) {
  setup_logging(0);
  const sweep::SweepFile f = sweep::load_sweep_file(o.file, task_names());
  const EvalTask& task = find_eval_task(f.task);
  {
    std::unique_ptr<CLI::App> probe;
    parse_task_args(task, probe, {});
    sweep::check_keys(
        f, [&](const std::string& key) { return key != "help" && probe->get_option_no_throw("--" + key) != nullptr; });
  }
  const std::vector<sweep::Point> points = sweep::expand_points(f);
  sweep::check_points(f, points, [&](const sweep::Point& p) {
    std::unique_ptr<CLI::App> app;
    parse_task_args(task, app, p.args())->check();
  });
  const std::string out = o.out.empty() ? "results/" + f.name + ".jsonl" : o.out;

  if (o.dry_run) {
    std::printf("sweep %s: task %s, %zu points -> %s\n", f.name.c_str(), f.task.c_str(), points.size(), out.c_str());
    for (const auto& p : points) {
      std::string args;
      for (const auto& a : p.args()) args += " " + a;
      std::printf("%4zu  %s  %s\n      hybridgen eval --task %s%s\n", p.index + 1, p.key.c_str(), p.describe().c_str(),
                  f.task.c_str(), args.c_str());
    }
    return;
  }

  sweep::ResultsFile results(out, o.resume);
  ModelCache models;
  TaskContext ctx{models, false};
  auto task_run = [&](const sweep::Point& p) {
    std::unique_ptr<CLI::App> app;
    return parse_task_args(task, app, p.args())->run(ctx);
  };
  sweep::RunnerOptions ro;
  ro.fail_fast = o.fail_fast;
  ro.commit = build_commit();

  // A bar with ETA on a terminal; elsewhere one plain line per point.
  ProgressOptions po;
  if (o.no_progress) po.mode = ProgressMode::Off;
  po.mode = resolve_progress_mode(po.mode, po.out);
  const bool lines = po.mode == ProgressMode::Lines;
  po.delay_s = 0.0;
  Progress bar("sweep " + f.name, static_cast<int64_t>(points.size()), "points",
               lines ? ProgressOptions{ProgressMode::Off} : po);
  sweep::RunnerHooks hooks;
  hooks.started = [&](const sweep::Point& p, size_t done, size_t total) {
    bar.update(static_cast<int64_t>(done), p.describe());
    if (lines)
      std::fprintf(stderr, "sweep %s: point %zu/%zu %s ...\n", f.name.c_str(), p.index + 1, total,
                   p.describe().c_str());
  };
  hooks.finished = [&](const sweep::Point& p, double seconds, const std::string& error) {
    if (lines)
      std::fprintf(stderr, "sweep %s: point %zu/%zu %s: %s (%.1f s)\n", f.name.c_str(), p.index + 1, points.size(),
                   p.describe().c_str(), error.empty() ? "ok" : ("error: " + error).c_str(), seconds);
    else if (!error.empty())
      std::fprintf(stderr, "\npoint %zu (%s): error: %s\n", p.index + 1, p.describe().c_str(), error.c_str());
  };
  const sweep::SweepSummary s = sweep::run_points(f, points, results, task_run, ro, hooks);
  bar.update(static_cast<int64_t>(s.skipped + s.ok + s.failed));
  bar.finish();
  std::fprintf(stderr, "sweep %s: %zu points: %zu ok, %zu failed, %zu already done -> %s\n", f.name.c_str(), s.total,
               s.ok, s.failed, s.skipped, out.c_str());
  if (!o.plot_dir.empty()) run_plot(out, o.plot_dir);
  if (s.stopped) throw Error("stopped at the first failed point (--fail-fast); " + out + " has its error line");
  if (s.failed > 0)
    throw Error(std::to_string(s.failed) + " of " + std::to_string(s.total) +
                " points failed: their error lines are in " + out);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto* cmd = app.add_subcommand("sweep", "run an eval task over the points of a YAML sweep file (configs/sweeps/)");
  cmd->add_option("file", o->file, "sweep file: name, task, fixed, grid, zip, repeat")->required();
  cmd->add_option("-o,--output", o->out, "results file, JSON Lines (default results/NAME.jsonl)");
  cmd->add_flag("--resume", o->resume, "skip the points the results file already holds, rerun failed ones");
  cmd->add_option("--plot", o->plot_dir, "afterwards, draw the figures into this directory (tools/plot_sweep.py)");
  cmd->add_flag("--dry-run", o->dry_run, "check every point and print them; run nothing");
  cmd->add_flag("--fail-fast", o->fail_fast, "stop at the first point that fails");
  cmd->add_flag("--no-progress", o->no_progress, "no progress bar or progress lines");
  cmd->callback([o] { run_sweep(*o); });
}

}  // namespace hg::cli
