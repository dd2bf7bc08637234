// Merging the results files of a sweep's shards (sweep/shard.h) into one results file, as if the
// sweep had run in one process: one line per point, in run order, that `--plot` takes.
#pragma once
#include <string>
#include <vector>

#include "sweep/points.h"

namespace hg::sweep {

struct MergeSummary {
  size_t shards = 0;            // shard count N of the partition
  size_t files = 0;             // shard files read
  size_t ok = 0;                // points with an "ok" line
  size_t failed = 0;            // points with error lines only (the last one is kept)
  size_t duplicates = 0;        // point lines dropped as a second line of the same point (retried tasks)
  std::vector<size_t> missing;  // indices of the points no shard holds a line for
};

// Reads every shard file and writes `out` (through a temporary file and rename(2)). One
// hg::Error line, before anything is written, naming the shard file (and line) that:
// cannot be read; does not start with a shard line; is of another sweep, task or version of the
// file (its points differ) or of another partition (N); holds a malformed line, a point that is
// not the file's, or a point of another shard. And naming the shards of the partition that no
// file holds. Points that failed or are missing are reported in the summary, not thrown.
MergeSummary merge_shards(const SweepFile& f, const std::vector<Point>& points, const std::vector<std::string>& shards,
                          const std::string& out);

}  // namespace hg::sweep
