// hybridgen sweep FILE.yaml [-o OUT.jsonl] [--resume] [--plot DIR] [--dry-run] [--fail-fast]:
// runs an eval task over the points of a sweep file (src/sweep/), one JSONL line per point.
// Every point is parsed by the task's own CLI11 app (eval_tasks.h) and checked before the first
// one runs, so a typo in the last point does not surface after an hour of runs.
// On a cluster (docs/cluster.md): `--shard I/N` runs one shard of the points, `--merge OUT
// SHARD.jsonl...` joins the shards' results, `--slurm` writes and submits a job array doing both.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/eval_tasks.h"
#include "hybridgen/error.h"
#include "sweep/merge.h"
#include "sweep/points.h"
#include "sweep/runner.h"
#include "sweep/shard.h"
#include "sweep/slurm.h"
#include "sweep/sweep_file.h"
#include "util/strings.h"

namespace hg::cli {

namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  std::string file;
  std::string out;  // default results/<name>.jsonl (with --shard: results/<name>.shards/shard-I-of-N.jsonl)
  std::string plot_dir;
  bool resume = false, dry_run = false, fail_fast = false, no_progress = false;
  int threads = -1;                      // -t: for points that do not set threads (-1: not given)
  std::string shard;                     // --shard I/N
  std::string merge;                     // --merge OUT
  std::vector<std::string> shard_files;  // the shards' results files after --merge OUT
  bool slurm = false;
  size_t shards = 0, array_parallel = 0;  // 0: not given
  int cpus_per_task = 0;
  std::string partition, time;
};

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& t : eval_tasks()) names.push_back(t.name);
  return names;
}

using sweep::quote;

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

// One error line for options that do not go together, before the sweep file is read.
void check_combinations(const SweepOptions& o) {
  const bool merging = !o.merge.empty();
  if (!o.shard_files.empty() && !merging)
    throw Error("unexpected argument '" + o.shard_files.front() + "': shard results files go after --merge OUT");
  auto refuse = [](bool given, const std::string& option, const std::string& with) {
    if (given) throw Error(option + " does not go with " + with);
  };
  if (merging) {
    for (const auto& [given, option] :
         {std::pair{!o.shard.empty(), "--shard"}, std::pair{o.slurm, "--slurm"}, std::pair{o.resume, "--resume"},
          std::pair{o.dry_run, "--dry-run"}, std::pair{!o.out.empty(), "-o"}})
      refuse(given, option, "--merge (it writes the file --merge names)");
  }
  refuse(o.slurm && !o.shard.empty(), "--shard", "--slurm (each array task runs one shard)");
  if (!o.slurm)
    for (const auto& [given, option] :
         {std::pair{o.shards > 0, "--shards"}, std::pair{o.array_parallel > 0, "--array-parallel"},
          std::pair{!o.partition.empty(), "--partition"}, std::pair{!o.time.empty(), "--time"},
          std::pair{o.cpus_per_task > 0, "--cpus-per-task"}})
      if (given) throw Error(std::string(option) + " goes with --slurm only");
  refuse(o.slurm && o.resume, "--resume", "--slurm (the array tasks always resume)");
  refuse(o.slurm && o.threads >= 0, "-t", "--slurm (each task runs with -t of its CPUs: give --cpus-per-task)");
  refuse(o.slurm && o.fail_fast, "--fail-fast", "--slurm (a failed point is an error line; the merge reports it)");
}

// The binary that is running: what the array tasks run.
std::string self_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("--slurm: cannot find the hybridgen binary (/proc/self/exe): " + ec.message());
  return exe.string();
}

void merge_results(const sweep::SweepFile& f, const std::vector<sweep::Point>& points, const SweepOptions& o) {
  const sweep::MergeSummary m = sweep::merge_shards(f, points, o.shard_files, o.merge);
  std::fprintf(stderr,
               "sweep %s: merged %zu files of %zu shards: %zu points: %zu ok, %zu failed, %zu missing, %zu "
               "duplicate lines dropped -> %s\n",
               f.name.c_str(), m.files, m.shards, points.size(), m.ok, m.failed, m.missing.size(), m.duplicates,
               o.merge.c_str());
  if (!o.plot_dir.empty()) run_plot(o.merge, o.plot_dir);
  std::string problems;
  if (!m.missing.empty()) {
    const std::vector<size_t> first(m.missing.begin(), m.missing.begin() + std::min<size_t>(m.missing.size(), 5));
    const std::string which =
        join(first, ", ", [&](size_t i) { return std::to_string(i + 1) + " (" + points[i].describe() + ")"; });
    problems = std::to_string(m.missing.size()) + " of " + std::to_string(points.size()) +
               " points missing from the shards: point " + which + (m.missing.size() > 5 ? ", ..." : "") +
               "; run their shards again with --resume";
  }
  if (m.failed > 0)
    problems += (problems.empty() ? "" : "; ") + std::to_string(m.failed) + " of " + std::to_string(points.size()) +
                " points failed: their error lines are in " + o.merge;
  if (!problems.empty()) throw Error(problems);
}

void submit_to_slurm(const sweep::SweepFile& f, const std::vector<sweep::Point>& points, const SweepOptions& o,
                     const std::string& out) {
  sweep::SlurmJob job;
  job.hybridgen = self_path();
  job.sweep_file = fs::absolute(o.file).lexically_normal().string();
  job.name = f.name;
  job.merged = fs::absolute(out).lexically_normal().string();
  job.dir = fs::path(job.merged).replace_extension(".shards").string();
  job.workdir = fs::current_path().string();
  if (!o.plot_dir.empty()) job.plot_dir = fs::absolute(o.plot_dir).lexically_normal().string();
  job.shards = o.shards > 0 ? o.shards : sweep::default_shard_count(points.size());
  if (job.shards > sweep::kMaxShards)
    throw Error("--shards " + std::to_string(job.shards) + ": at most " + std::to_string(sweep::kMaxShards));
  job.array_parallel = o.array_parallel;
  job.cpus_per_task = o.cpus_per_task;
  job.partition = o.partition;
  job.time = o.time;
  const sweep::SlurmScripts scripts = sweep::slurm_scripts(job);
  sweep::write_slurm_scripts(scripts, job.dir);
  std::printf("sweep %s: %zu points in %zu shards -> %s (merged: %s)\n", f.name.c_str(), points.size(), job.shards,
              job.dir.c_str(), job.merged.c_str());
  // -t "$SLURM_CPUS_PER_TASK" gives the points their threads, unless the file fixes them.
  for (const auto& p : f.fixed)
    if (p.key == "threads")
      std::printf("note: %s:%d fixes threads: %s for every point; the tasks' CPUs (-t) do not change it\n",
                  f.path.c_str(), p.line, p.value.c_str());
  if (o.dry_run) {
    std::printf(
        "# %s\n%s\n# %s\n%s\n# submit with:\n#   jobid=$(sbatch --parsable %s)\n"
        "#   sbatch --dependency=afterany:$jobid %s\n",
        scripts.array_path.c_str(), scripts.array_text.c_str(), scripts.merge_path.c_str(), scripts.merge_text.c_str(),
        scripts.array_path.c_str(), scripts.merge_path.c_str());
    return;
  }
  const sweep::SlurmSubmission sub = sweep::submit_slurm(scripts);
  std::printf("submitted array job %s (%zu tasks) and merge job %s (after every task has ended)\n",
              sub.array_job.c_str(), job.shards, sub.merge_job.c_str());
}

// Whether the sweep file gives the point option --key (fixed or varying).
bool sets_key(const sweep::Point& p, const std::string& key) {
  return std::any_of(p.params.begin(), p.params.end(), [&](const sweep::Param* q) { return q->key == key; });
}

// The point's options for the task's parser. -t gives the points that do not set threads
// themselves theirs (the file's value is part of the point's key, -t is not: a shard on a bigger
// node finds the same keys).
std::vector<std::string> point_args(const sweep::Point& p, int threads) {
  std::vector<std::string> args = p.args();
  if (threads >= 0 && !sets_key(p, "threads")) args.push_back("--threads=" + std::to_string(threads));
  return args;
}

// Every key of the file must be an option of the task. Returns whether the task keeps its
// finished work in a --checkpoint file (ruler).
bool check_task_keys(const sweep::SweepFile& f, const EvalTask& task) {
  std::unique_ptr<CLI::App> probe;
  parse_task_args(task, probe, {});
  sweep::check_keys(
      f, [&](const std::string& key) { return key != "help" && probe->get_option_no_throw("--" + key) != nullptr; });
  return probe->get_option_no_throw("--checkpoint") != nullptr;
}

// The points this process runs: one shard of them, or all, and where their results go.
struct LocalRun {
  std::optional<sweep::Shard> shard;
  std::vector<sweep::Point> points;
  std::string results_path;
  std::string label;  // "NAME" or "NAME shard I/N"
};

LocalRun local_run(const sweep::SweepFile& f, const std::vector<sweep::Point>& all, const SweepOptions& o,
                   const std::string& out) {
  LocalRun r;
  if (!o.shard.empty()) r.shard = sweep::parse_shard(o.shard);
  r.points = r.shard ? sweep::shard_points(all, *r.shard) : all;
  r.results_path = !r.shard || !o.out.empty()
                       ? out
                       : "results/" + f.name + ".shards/" + sweep::shard_file_name(r.shard->index, r.shard->count);
  r.label = f.name + (r.shard ? " shard " + r.shard->name() : "");
  return r;
}

void print_points(const sweep::SweepFile& f, const LocalRun& r, int threads) {
  std::printf("sweep %s: task %s, %zu points -> %s\n", r.label.c_str(), f.task.c_str(), r.points.size(),
              r.results_path.c_str());
  for (const auto& p : r.points) {
    std::string args;
    for (const auto& a : point_args(p, threads)) args += " " + a;
    std::printf("%4zu  %s  %s\n      hybridgen eval --task %s%s\n", p.index + 1, p.key.c_str(), p.describe().c_str(),
                f.task.c_str(), args.c_str());
  }
}

// A point of a task that checkpoints gets a file of its own, RESULTS.partial/KEY.jsonl, so that
// a point stopped part way (a 32K RULER point is an hour) resumes with --resume from its last
// finished sample; the file goes once the point's line is written. Without --resume a stale one
// is removed first. None where the file names the point's checkpoint itself.
fs::path point_checkpoint(const sweep::Point& p, const LocalRun& r, bool task_checkpoints) {
  return task_checkpoints && !sets_key(p, "checkpoint")
             ? fs::path(r.results_path).replace_extension(".partial") / (p.key + ".jsonl")
             : fs::path();
}

// A bar with ETA on a terminal; elsewhere one plain line per point (numbered in the whole file).
// A point's checkpoint file goes when it succeeds.
sweep::RunnerHooks report_points(Progress& bar, bool lines, const LocalRun& r, size_t n_all,
                                 const std::function<fs::path(const sweep::Point&)>& checkpoint_of) {
  sweep::RunnerHooks hooks;
  hooks.started = [&bar, lines, &r, n_all](const sweep::Point& p, size_t done, size_t) {
    bar.update(static_cast<int64_t>(done), p.describe());
    if (lines)
      std::fprintf(stderr, "sweep %s: point %zu/%zu %s ...\n", r.label.c_str(), p.index + 1, n_all,
                   p.describe().c_str());
  };
  hooks.finished = [lines, &r, n_all, checkpoint_of](const sweep::Point& p, double seconds, const std::string& error) {
    if (const fs::path checkpoint = checkpoint_of(p); error.empty() && !checkpoint.empty()) {
      std::error_code ec;
      fs::remove(checkpoint, ec);
      fs::remove(checkpoint.parent_path(), ec);  // only when empty
    }
    if (lines)
      std::fprintf(stderr, "sweep %s: point %zu/%zu %s: %s (%.1f s)\n", r.label.c_str(), p.index + 1, n_all,
                   p.describe().c_str(), error.empty() ? "ok" : ("error: " + error).c_str(), seconds);
    else if (!error.empty())
      std::fprintf(stderr, "\npoint %zu (%s): error: %s\n", p.index + 1, p.describe().c_str(), error.c_str());
  };
  return hooks;
}

// Runs the points here, one after the other, each parsed by the task's own options.
void run_local(const sweep::SweepFile& f, const EvalTask& task, const std::vector<sweep::Point>& all, const LocalRun& r,
               const SweepOptions& o, bool task_checkpoints) {
  sweep::ResultsFile results(r.results_path, o.resume,
                             r.shard ? sweep::shard_line(f, all, *r.shard) : nlohmann::json());
  ModelCache models;
  TaskContext ctx{models, false};
  auto checkpoint_of = [&](const sweep::Point& p) { return point_checkpoint(p, r, task_checkpoints); };
  auto task_run = [&](const sweep::Point& p) {
    std::vector<std::string> args = point_args(p, o.threads);
    if (const fs::path checkpoint = checkpoint_of(p); !checkpoint.empty()) {
      if (!o.resume) fs::remove(checkpoint);
      args.push_back("--checkpoint=" + checkpoint.string());
    }
    std::unique_ptr<CLI::App> app;
    return parse_task_args(task, app, args)->run(ctx);
  };
  sweep::RunnerOptions ro;
  ro.fail_fast = o.fail_fast;
  ro.commit = build_commit();

  ProgressOptions po;
  if (o.no_progress) po.mode = ProgressMode::Off;
  po.mode = resolve_progress_mode(po.mode, po.out);
  const bool lines = po.mode == ProgressMode::Lines;
  po.delay_s = 0.0;
  Progress bar("sweep " + r.label, static_cast<int64_t>(r.points.size()), "points",
               lines ? ProgressOptions{ProgressMode::Off} : po);
  const sweep::RunnerHooks hooks = report_points(bar, lines, r, all.size(), checkpoint_of);
  const sweep::SweepSummary s = sweep::run_points(f, r.points, results, task_run, ro, hooks);
  bar.update(static_cast<int64_t>(s.skipped + s.ok + s.failed));
  bar.finish();
  std::fprintf(stderr, "sweep %s: %zu points: %zu ok, %zu failed, %zu already done -> %s\n", r.label.c_str(), s.total,
               s.ok, s.failed, s.skipped, r.results_path.c_str());
  if (!o.plot_dir.empty()) run_plot(r.results_path, o.plot_dir);
  if (s.stopped)
    throw Error("stopped at the first failed point (--fail-fast); " + r.results_path + " has its error line");
  if (s.failed > 0)
    throw Error(std::to_string(s.failed) + " of " + std::to_string(s.total) +
                " points failed: their error lines are in " + r.results_path);
}

void run_sweep(const SweepOptions& o) {
  setup_logging(0);
  check_combinations(o);
  const sweep::SweepFile f = sweep::load_sweep_file(o.file, task_names());
  const EvalTask& task = find_eval_task(f.task);
  const bool task_checkpoints = check_task_keys(f, task);
  const std::vector<sweep::Point> all = sweep::expand_points(f);
  sweep::check_points(f, all, [&](const sweep::Point& p) {
    std::unique_ptr<CLI::App> app;
    parse_task_args(task, app, point_args(p, o.threads))->check();
  });
  if (!o.merge.empty()) return merge_results(f, all, o);
  const std::string out = o.out.empty() ? "results/" + f.name + ".jsonl" : o.out;
  if (o.slurm) return submit_to_slurm(f, all, o, out);
  const LocalRun r = local_run(f, all, o, out);
  if (o.dry_run) return print_points(f, r, o.threads);
  run_local(f, task, all, r, o, task_checkpoints);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto* cmd = app.add_subcommand("sweep", "run an eval task over the points of a YAML sweep file (configs/sweeps/)");
  cmd->add_option("file", o->file, "sweep file: name, task, fixed, grid, zip, repeat")->required();
  cmd->add_option("shard-results", o->shard_files, "with --merge: the shards' results files");
  cmd->add_option("-o,--output", o->out, "results file, JSON Lines (default results/NAME.jsonl)");
  cmd->add_flag("--resume", o->resume, "skip the points the results file already holds, rerun failed ones");
  cmd->add_option(
      "--plot", o->plot_dir,
      "afterwards, draw the figures into this directory (tools/plot_sweep.py; with --slurm: the merge job)");
  cmd->add_flag("--dry-run", o->dry_run,
                "check every point and print them (with --slurm: write the scripts); run nothing");
  cmd->add_flag("--fail-fast", o->fail_fast, "stop at the first point that fails");
  cmd->add_flag("--no-progress", o->no_progress, "no progress bar or progress lines");
  cmd->add_option("-t,--threads", o->threads, "CPU threads of the points that do not set threads (0: all cores)")
      ->check(CLI::NonNegativeNumber);
  auto* cluster = "Cluster (docs/cluster.md)";
  cmd->add_option("--shard", o->shard, "run shard I (from 0) of N only, into results/NAME.shards/shard-I-of-N.jsonl")
      ->group(cluster);
  cmd->add_option("--merge", o->merge, "merge the shards' results files given after OUT into OUT")->group(cluster);
  cmd->add_flag("--slurm", o->slurm, "write a Slurm job array (a task per shard) and a merge job, and submit them")
      ->group(cluster);
  cmd->add_option("--shards", o->shards, "with --slurm: N (default: one per point, at most 1000)")
      ->check(CLI::PositiveNumber)
      ->group(cluster);
  cmd->add_option("--array-parallel", o->array_parallel,
                  "with --slurm: array tasks running at once (default: no limit)")
      ->check(CLI::PositiveNumber)
      ->group(cluster);
  cmd->add_option("--cpus-per-task", o->cpus_per_task, "with --slurm: CPUs of each task, its -t (default: Slurm's, 1)")
      ->check(CLI::PositiveNumber)
      ->group(cluster);
  cmd->add_option("--partition", o->partition, "with --slurm: the partition (default: the cluster's)")->group(cluster);
  cmd->add_option("--time", o->time, "with --slurm: each task's time limit, as sbatch --time takes it")->group(cluster);
  cmd->callback([o] { run_sweep(*o); });
}

}  // namespace hg::cli
