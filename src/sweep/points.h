// The points of a sweep: the cartesian product of the grid's lists (first key outermost), times
// each zip group (its lists advance together), each run `repeat` times in a row, with the fixed
// parameters added. A point's key is a stable hash of its task, every parameter and its repeat
// index, independent of the order of keys in the file: --resume finds done points by it.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sweep/sweep_file.h"

namespace hg::sweep {

struct Point {
  size_t index = 0;           // 0-based, in run order
  int repeat = 0;             // 0 .. repeat-1
  // Fixed first, then grid, then zip, in file order; they point into the SweepFile the point was
  // expanded from, which must outlive it (10,000 points share the fixed parameters, not copies).
  std::vector<const Param*> params;
  std::string key;            // 16 hex digits

  nlohmann::json params_json() const;  // {"key": typed value, ...}
  // "policy=hybrid k=64 (repeat 2)": the varying parameters.
  std::string describe() const;
  // "--key=value" words for the task's CLI parser.
  std::vector<std::string> args() const;
};

// The points of the file, grid x zip x repeat; more than kMaxPoints is one hg::Error line. Each
// point is a model run of seconds to minutes, so 10,000 is already days of work; the cap keeps a
// typo from building millions of points (1,000,000 took 18 s and 1 GB under ASan).
constexpr size_t kMaxPoints = 10000;
// And the points' parameters (keys and values, as the point keys hash them) are at most this many
// bytes in all: 10,000 points of 47 options with 100-character paths are a quarter of it.
constexpr size_t kMaxParameterBytes = size_t{64} << 20;
std::vector<Point> expand_points(const SweepFile& f);
std::vector<Point> expand_points(const SweepFile&& f) = delete;  // the points would dangle

// Every key of the file must be an option of the task: hg::Error "FILE:LINE: unknown key ..."
// for the first that is not.
void check_keys(const SweepFile& f, const std::function<bool(const std::string& key)>& is_option);

// Runs `check` on every point before any runs; the first hg::Error becomes
// "FILE:LINE: point I/N (description): message", LINE being the line of the parameter whose
// option (--key) the message names, else of the point's first varying parameter.
void check_points(const SweepFile& f, const std::vector<Point>& points, const std::function<void(const Point&)>& check);

}  // namespace hg::sweep
