#include "sweep/slurm.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hybridgen/error.h"

namespace hg::sweep {

namespace {

namespace fs = std::filesystem;

// #SBATCH lines are not parsed by a shell: a value there cannot be quoted.
std::string sbatch_value(const std::string& what, const std::string& value) {
  if (value.find_first_of(" \t\n\"'") != std::string::npos)
    throw Error("--slurm: " + what + " '" + value + "' holds a space or a quote, which an #SBATCH line cannot carry");
  return value;
}

// The #SBATCH lines both jobs share.
std::string common_lines(const SlurmJob& job) {
  std::string s;
  if (!job.workdir.empty()) s += "#SBATCH --chdir=" + sbatch_value("the working directory", job.workdir) + "\n";
  if (!job.partition.empty()) s += "#SBATCH --partition=" + sbatch_value("--partition", job.partition) + "\n";
  if (!job.time.empty()) s += "#SBATCH --time=" + sbatch_value("--time", job.time) + "\n";
  return s;
}

// Runs `command`; its stdout and stderr, and its exit status.
std::string run_capture(const std::string& command, int& status) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) throw Error("--slurm: cannot run " + command);
  std::string out;
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int raw = ::pclose(p);
  status = raw == -1 ? -1 : WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string submit(const std::string& command) {
  int status = 0;
  const std::string out = run_capture(command, status);
  std::string id = out.substr(0, out.find(';'));  // --parsable: "ID" or "ID;CLUSTER"
  if (status != 0 || id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit)) {
    std::string one_line = out;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    throw Error("--slurm: `" + command + "` failed" + (status != 0 ? " (exit " + std::to_string(status) + ")" : "") +
                ": " + (one_line.empty() ? "no job id printed" : one_line));
  }
  return id;
}

}  // namespace

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

size_t default_shard_count(size_t points) { return std::clamp<size_t>(points, 1, kDefaultMaxShards); }

std::string shard_file_name(size_t index, size_t count) {
  return "shard-" + std::to_string(index) + "-of-" + std::to_string(count) + ".jsonl";
}

SlurmScripts slurm_scripts(const SlurmJob& job) {
  const std::string n = std::to_string(job.shards);
  const std::string logs = sbatch_value("the output directory", job.dir) + "/logs";
  const std::string run = quote(job.hybridgen) + " sweep " + quote(job.sweep_file);
  SlurmScripts s;
  s.array_path = job.dir + "/array.sbatch";
  std::string& a = s.array_text;
  a += "#!/bin/bash\n";
  a += "# Written by `hybridgen sweep --slurm` for " + job.sweep_file + ":\n";
  a += "# array task I runs shard I of " + n + ". A requeued or re-run task resumes its shard's\n";
  a += "# results file (--resume) where it stopped.\n";
  a += "#SBATCH --job-name=hg-" + sbatch_value("the sweep name", job.name) + "\n";
  a += "#SBATCH --array=0-" + std::to_string(job.shards - 1);
  if (job.array_parallel > 0) a += "%" + std::to_string(job.array_parallel);
  a += "\n";
  if (job.cpus_per_task > 0) a += "#SBATCH --cpus-per-task=" + std::to_string(job.cpus_per_task) + "\n";
  a += common_lines(job);
  a += "#SBATCH --output=" + logs + "/shard-%a-of-" + n + ".log\n";
  a += "#SBATCH --open-mode=append\n";
  a += "#SBATCH --requeue\n";
  a += "set -eu\n";
  a += "dir=" + quote(job.dir) + "\n";
  a += "exec " + run + " --shard \"$SLURM_ARRAY_TASK_ID/" + n + "\" --resume \\\n";
  a += "  -o \"$dir/shard-$SLURM_ARRAY_TASK_ID-of-" + n + ".jsonl\" -t \"${SLURM_CPUS_PER_TASK:-1}\" --no-progress\n";

  s.merge_path = job.dir + "/merge.sbatch";
  std::string& m = s.merge_text;
  m += "#!/bin/bash\n";
  m += "# Merges the " + n + " shards once every array task has ended (sbatch --dependency=afterany:ARRAY_JOB).\n";
  m += "#SBATCH --job-name=hg-" + job.name + "-merge\n";
  m += common_lines(job);
  m += "#SBATCH --output=" + logs + "/merge.log\n";
  m += "#SBATCH --open-mode=append\n";
  m += "set -eu\n";
  m += "dir=" + quote(job.dir) + "\n";
  m += "exec " + run + " --merge " + quote(job.merged) + " \"$dir\"/shard-*-of-" + n + ".jsonl";
  if (!job.plot_dir.empty()) m += " --plot " + quote(job.plot_dir);
  m += "\n";
  return s;
}

void write_slurm_scripts(const SlurmScripts& s, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "logs", ec);
  if (ec) throw Error(dir + "/logs: cannot create: " + ec.message());
  for (const auto& [path, text] : {std::pair{s.array_path, s.array_text}, std::pair{s.merge_path, s.merge_text}}) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw Error(path + ": cannot write the batch script");
  }
}

SlurmSubmission submit_slurm(const SlurmScripts& s, const std::string& sbatch) {
  SlurmSubmission sub;
  sub.array_job = submit(quote(sbatch) + " --parsable " + quote(s.array_path));
  sub.merge_job =
      submit(quote(sbatch) + " --parsable --dependency=afterany:" + sub.array_job + " " + quote(s.merge_path));
  return sub;
}

}  // namespace hg::sweep
