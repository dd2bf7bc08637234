// Running a sweep on a Slurm cluster: a job array with one task per shard (sweep/shard.h), each
// running `hybridgen sweep FILE --shard $SLURM_ARRAY_TASK_ID/N --resume`, and a merge job that
// starts when every task has ended (--dependency=afterany). Slurm places, retries (--requeue)
// and accounts; a requeued or re-run task resumes its own results file where it stopped.
#pragma once
#include <cstddef>
#include <string>

namespace hg::sweep {

struct SlurmJob {
  std::string hybridgen;   // absolute path of the binary the tasks run
  std::string sweep_file;  // absolute path of the sweep file
  std::string name;        // the sweep's name (job names)
  std::string dir;         // absolute: the shards' results, logs/ and the two scripts
  std::string merged;      // absolute: the merged results file
  std::string plot_dir;    // absolute: where the merge job draws the figures ("": none)
  std::string workdir;     // absolute: where the jobs run (relative paths in the sweep file resolve there)
  size_t shards = 1;
  size_t array_parallel = 0;    // tasks running at once (0: as many as Slurm places)
  int cpus_per_task = 0;        // 0: Slurm's default (one CPU)
  std::string partition, time;  // "" : the cluster's defaults
};

// One word for a POSIX shell, single-quoted.
std::string quote(const std::string& s);

// Shards when --shards is not given: one per point (each task one point, the finest that Slurm
// retries and accounts), at most 1000 (Slurm's default MaxArraySize allows array indices 0..1000).
constexpr size_t kDefaultMaxShards = 1000;
size_t default_shard_count(size_t points);

// "shard-I-of-N.jsonl": a shard's results file in the job's directory.
std::string shard_file_name(size_t index, size_t count);

struct SlurmScripts {
  std::string array_path, array_text;  // DIR/array.sbatch
  std::string merge_path, merge_text;  // DIR/merge.sbatch
};
// The two batch scripts; hg::Error when a path cannot stand in an #SBATCH line (whitespace).
SlurmScripts slurm_scripts(const SlurmJob& job);

// Writes the scripts (and DIR/logs/, where Slurm writes the tasks' output).
void write_slurm_scripts(const SlurmScripts& s, const std::string& dir);

struct SlurmSubmission {
  std::string array_job, merge_job;  // job ids
};
// sbatch --parsable ARRAY, then sbatch --parsable --dependency=afterany:ID MERGE; `sbatch` is the
// command to run. hg::Error with sbatch's own message when it fails.
SlurmSubmission submit_slurm(const SlurmScripts& s, const std::string& sbatch = "sbatch");

}  // namespace hg::sweep
