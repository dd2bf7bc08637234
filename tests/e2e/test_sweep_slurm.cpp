// hybridgen sweep --slurm on a real Slurm: a one-node cluster (Debian's slurm-wlm 22.05 and
// munge, started by scripts/slurm_local.sh on 127.0.0.1, stopped at the end whatever happens)
// runs a sweep as a job array of 4 tasks and a dependent merge job. One task is cancelled with
// scancel while it runs and requeued with scontrol requeue; it resumes its shard, and the merged
// results equal the same sweep run in one process (point keys, parameters and metrics).
// Skipped, with the reason, where no cluster can run (not root, packages missing: the script's
// exit status 77); a cluster that should come up and does not (a daemon that fails to start, a
// node that never becomes idle) fails the test with the daemons' last log lines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>

#include "sweep_test_util.h"
#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The cluster, stopped (every daemon, job step and job process) when this goes out of scope;
// should the test process die without unwinding, the script's watchdog stops it.
class LocalSlurm {
 public:
  explicit LocalSlurm(const fs::path& dir) : dir_(dir) {
    const RunResult r = run(script() + " start " + quoted(dir) + " " + std::to_string(::getpid()));
    status_ = r.exit_code;
    message_ = r.err.empty() ? r.out : r.err;
    while (!message_.empty() && message_.back() == '\n') message_.pop_back();
  }
  ~LocalSlurm() { run(script() + " stop " + quoted(dir_)); }
  LocalSlurm(const LocalSlurm&) = delete;
  LocalSlurm& operator=(const LocalSlurm&) = delete;

  // 0: up; 77: cannot run here (message: why); else it failed to come up (message: the logs).
  int status() const { return status_; }
  const std::string& message() const { return message_; }
  // A command run against this cluster (SLURM_CONF names it for this command only: the test
  // process itself must not carry it, as stopping the cluster ends every process that does).
  RunResult slurm(const std::string& command) const {
    return run("SLURM_CONF=" + quoted(dir_ / "slurm.conf") + " " + command);
  }
  // The value of FIELD=value in `scontrol show job ID`.
  std::string job_field(const std::string& id, const std::string& field) const {
    const RunResult r = slurm("scontrol show job " + id);
    std::smatch m;
    if (std::regex_search(r.out, m, std::regex("\\b" + field + "=(\\S+)"))) return m[1];
    return "";
  }

 private:
  static std::string script() { return quoted(source_dir() / "scripts/slurm_local.sh"); }
  fs::path dir_;
  int status_ = 0;
  std::string message_;
};

// Polls `done` every 200 ms until it holds or `seconds` pass; whether it held.
template <typename Fn>
bool wait_for(Fn done, int seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return true;
}

TEST(SlurmCluster, AJobArrayWithACancelledAndRequeuedTaskMergesToTheOneProcessResult) {
  const fs::path dir = temp_dir("slurm");
  const LocalSlurm cluster(dir / "cluster");
  if (cluster.status() == 77) GTEST_SKIP() << cluster.message();
  ASSERT_EQ(cluster.status(), 0) << "scripts/slurm_local.sh start failed:\n" << cluster.message();

  // 12 points of one to two seconds each (4000 ids token by token, in windows of 1000), in one
  // process.
  const fs::path sweep = write_ppl_sweep(dir, "sl", 4000, "[16, 32, 64]", "[4, 8, 16, -1]", 1000);
  const fs::path whole = dir / "whole.jsonl";
  RunResult r = run_hybridgen("sweep " + quoted(sweep) + " -o " + quoted(whole));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(point_values(whole).size(), 12u);

  // The task to cancel: the largest shard, so that it is cancelled between its first point and its last.
  size_t victim = 0, victim_points = 0;
  for (size_t i = 0; i < 4; ++i) {
    r = run_hybridgen("sweep " + quoted(sweep) + " --shard " + std::to_string(i) + "/4 --dry-run");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t points = static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n') / 2);
    if (points > victim_points) {
      victim = i;
      victim_points = points;
    }
  }
  ASSERT_GE(victim_points, 2u);

  const fs::path merged = dir / "jobs/sl.jsonl";
  r = cluster.slurm("'" + (bin_dir() / "hybridgen").string() + "' sweep " + quoted(sweep) + " -o " + quoted(merged) +
                    " --slurm --shards 4");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("array job (\\d+) \\(4 tasks\\) and merge job (\\d+)"))) << r.out;
  const std::string array_job = m[1], merge_job = m[2];
  const std::string task = array_job + "_" + std::to_string(victim);
  const fs::path shard = dir / ("jobs/sl.shards/shard-" + std::to_string(victim) + "-of-4.jsonl");

  // Cancel the task once it has written a point (the shard line and one point line) ...
  ASSERT_TRUE(wait_for([&] { return read_lines(shard).size() >= 2; }, 120)) << "the task never wrote a point; squeue:\n"
                                                                            << cluster.slurm("squeue").out;
  // A cancelled task has ended, which satisfies the merge job's afterany until the requeue: hold
  // the merge over the cancel and the requeue, as docs/cluster.md tells users to (without the
  // hold the merge ran early, with the task's points missing, whenever the requeue came late).
  ASSERT_EQ(cluster.slurm("scontrol hold " + merge_job).exit_code, 0);
  ASSERT_EQ(cluster.slurm("scancel " + task).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return cluster.job_field(task, "JobState") == "CANCELLED"; }, 30))
      << cluster.job_field(task, "JobState");
  const size_t lines_when_cancelled = read_lines(shard).size();
  ASSERT_LT(lines_when_cancelled, victim_points + 1) << "the task finished before it was cancelled: nothing is proven";
  // ... requeue it (without the requeue's begin delay of two minutes) and let it resume.
  r = cluster.slurm("scontrol requeue " + task);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The command may return before the task reads as queued again; a dependency given meanwhile is
  // met at once by the task's ended state (the merge then ran early, the task's points missing:
  // 6 of 12 in one run under load). Wait for the task to be pending (or further).
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string state = cluster.job_field(task, "JobState");
        return state == "PENDING" || state == "RUNNING" || state == "COMPLETED";
      },
      30))
      << cluster.slurm("scontrol show job " + task).out;
  EXPECT_EQ(cluster.slurm("scontrol update JobId=" + task + " StartTime=now").exit_code, 0);
  // Slurm drops a dependency once it is satisfied: give the merge its afterany on the array again.
  ASSERT_EQ(cluster.slurm("scontrol update JobId=" + merge_job + " Dependency=afterany:" + array_job).exit_code, 0);
  ASSERT_EQ(cluster.slurm("scontrol release " + merge_job).exit_code, 0);

  // The merge job runs after every task has ended, the requeued one included.
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string state = cluster.job_field(merge_job, "JobState");
        return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT";
      },
      150))
      << cluster.slurm("squeue").out;
  // (a merge that ran early says so here: its log names the missing points, the jobs' records
  // when each ended and started)
  EXPECT_EQ(cluster.job_field(merge_job, "JobState"), "COMPLETED")
      << read_file(dir / "jobs/sl.shards/logs/merge.log") << cluster.slurm("scontrol show job " + array_job).out
      << cluster.slurm("scontrol show job " + merge_job).out;
  EXPECT_EQ(cluster.job_field(task, "Restarts"), "1");
  const std::string log = read_file(dir / ("jobs/sl.shards/logs/shard-" + std::to_string(victim) + "-of-4.log"));
  std::smatch done;
  ASSERT_TRUE(std::regex_search(log, done, std::regex("(\\d+) ok, 0 failed, (\\d+) already done"))) << log;
  EXPECT_EQ(std::stoul(done[2]), lines_when_cancelled - 1) << log;  // resumed, nothing run twice
  EXPECT_EQ(std::stoul(done[1]) + std::stoul(done[2]), victim_points) << log;

  EXPECT_EQ(point_values(merged), point_values(whole));
}

}  // namespace
}  // namespace hg::test
