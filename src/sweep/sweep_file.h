// A sweep file (docs/architecture.md, "Evaluation and sweeps"): which task to run over which points.
//
//   name: k-sensitivity
//   task: fidelity                 # an eval task: bench, ppl, fidelity, passkey, kmin
//   repeat: 1                      # runs of every point (default 1)
//   fixed: {model: smollm2, file: moby.txt, ctx: 1024}
//   grid:                          # cartesian product, first key outermost
//     policy: [hybrid, hgca]
//     k: [16, 32, 64]
//   zip:                           # lists that vary together (one mapping, or a list of them)
//     window: [256, 512]
//     sinks: [4, 8]
//
// Keys are the task's CLI long option names without dashes. A value is a scalar or a list of
// scalars (passed as one comma-joined value: `depths: [0.1, 0.5]` → --depths=0.1,0.5). In a grid
// or zip list, `~` leaves the option out at that point (zip: {policy: [full, hybrid],
// window: [~, 256]}: full takes no window). Every key and value keeps its line, so later checks
// can say where a bad one is.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hg::sweep {

struct Param {
  std::string key;
  std::string value;     // as the CLI gets it
  nlohmann::json json;   // typed for results: YAML ints, floats and booleans as numbers/bools
  int line = 0;          // 1-based line of the key
  bool varying = false;  // from grid or zip (the point's description shows it)
  bool omitted = false;  // `~` (null) in a grid or zip list: the option is not given at that point
};

struct Axis {
  std::string key;
  int line = 0;
  std::vector<Param> values;  // at least one
};

struct SweepFile {
  std::string path;  // for messages
  std::string name, task;
  int task_line = 0;
  int repeat = 1;
  std::vector<Param> fixed;
  std::vector<Axis> grid;
  std::vector<std::vector<Axis>> zip;  // groups; the axes of a group have equal lengths
  int grid_line = 0;                   // of `grid:` (or `zip:` when there is no grid)

  // "FILE:LINE: " for messages.
  std::string where(int line) const;
};

// Parses the text of a sweep file; `path` names it in errors. Every error is one hg::Error line
// "PATH:LINE: what is wrong" (malformed YAML, unknown fields, empty grid, zip lists of unequal
// length, a key given twice, a task not in `tasks`).
SweepFile parse_sweep(const std::string& text, const std::string& path, const std::vector<std::string>& tasks);
SweepFile load_sweep_file(const std::string& path, const std::vector<std::string>& tasks);

}  // namespace hg::sweep
