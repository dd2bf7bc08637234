#include "sweep/points.h"

#include <algorithm>
#include <cctype>

#include "hybridgen/error.h"
#include "util/hash.h"
#include "util/strings.h"

namespace hg::sweep {

namespace {

// Where `message` first names option --key (not merely a longer option that starts with it);
// npos when it does not.
size_t option_mention(const std::string& message, const std::string& key) {
  const std::string flag = "--" + key;
  for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
    const size_t end = at + flag.size();
    if (end == message.size() || !(std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-'))
      return at;
  }
  return std::string::npos;
}

// An axis of the product: a grid axis alone, or a zip group as one axis of its length.
struct Dim {
  std::vector<const Axis*> axes;
  size_t size;
};

std::vector<Dim> product_dims(const SweepFile& f) {
  std::vector<Dim> dims;
  for (const auto& a : f.grid) dims.push_back({{&a}, a.values.size()});
  for (const auto& g : f.zip) {
    Dim d{{}, g.front().values.size()};
    for (const auto& a : g) d.axes.push_back(&a);
    dims.push_back(d);
  }
  return dims;
}

// The combinations of the product, counted before anything is built: a typo (`repeat:
// 1000000000`, a few long lists) must be an error line, not an allocation that takes the machine
// down. Every point's key hashes its parameters' text: bounded too, as a file of a few KB can hold
// long values (YAML aliases repeat one) that 10,000 points would hash for minutes.
size_t checked_combinations(const SweepFile& f, const std::vector<Dim>& dims) {
  size_t combos = 1;
  for (const auto& d : dims) {
    if (d.size > kMaxPoints / combos)
      combos = kMaxPoints + 1;
    else
      combos *= d.size;
  }
  if (combos > kMaxPoints / static_cast<size_t>(f.repeat))
    throw Error(f.where(f.grid_line) + "the sweep has more than " + std::to_string(kMaxPoints) +
                " points (grid x zip x repeat); split it into several files");
  size_t point_bytes = f.task.size();
  for (const auto& p : f.fixed) point_bytes += p.key.size() + p.value.size() + 2;
  for (const auto& d : dims)
    for (const Axis* a : d.axes) {
      size_t longest = 0;
      for (const auto& v : a->values) longest = std::max(longest, v.value.size());
      point_bytes += a->key.size() + longest + 2;
    }
  if (point_bytes > kMaxParameterBytes / combos)
    throw Error(f.where(f.grid_line) + "the sweep's " + std::to_string(combos) + " points hold up to " +
                std::to_string(point_bytes) + " bytes of parameters each, more than " +
                std::to_string(kMaxParameterBytes >> 20) +
                " MiB in all; shorten the values or split it into several files");
  return combos;
}

// A point's slots in file order: a fixed parameter, or an axis (with the dimension that indexes it).
struct Slot {
  const Param* fixed;
  const Axis* axis;
  size_t dim;
  const std::string& key() const { return fixed ? fixed->key : axis->key; }
};

std::vector<Slot> point_slots(const SweepFile& f, const std::vector<Dim>& dims) {
  std::vector<Slot> slots;
  for (const auto& p : f.fixed) slots.push_back({&p, nullptr, 0});
  for (size_t d = 0; d < dims.size(); ++d)
    for (const Axis* a : dims[d].axes) slots.push_back({nullptr, a, d});
  return slots;
}

// The order the key hashes the slots in: "task=T", then "key=value" of every given parameter in
// sorted order, then "repeat=R", joined by \x1f. Keys are distinct and hold no '=' (no option
// does), so sorting by "key=" sorts the "key=value" strings: the order is fixed once for the file.
std::vector<size_t> key_order(const std::vector<Slot>& slots) {
  std::vector<size_t> sorted(slots.size());
  for (size_t i = 0; i < sorted.size(); ++i) sorted[i] = i;
  std::sort(sorted.begin(), sorted.end(),
            [&](size_t a, size_t b) { return slots[a].key() + '=' < slots[b].key() + '='; });
  return sorted;
}

}  // namespace

nlohmann::json Point::params_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const Param* p : params) j[p->key] = p->json;
  return j;
}

std::string Point::describe() const {
  std::vector<std::string> parts;
  for (const Param* p : params)
    if (p->varying) parts.push_back(p->key + "=" + p->value);
  if (repeat > 0) parts.push_back("(repeat " + std::to_string(repeat + 1) + ")");
  return parts.empty() ? "(fixed parameters only)" : join(parts, " ");
}

std::vector<std::string> Point::args() const {
  std::vector<std::string> a;
  for (const Param* p : params) a.push_back("--" + p->key + "=" + p->value);
  return a;
}

std::vector<Point> expand_points(const SweepFile& f) {
  const std::vector<Dim> dims = product_dims(f);
  const size_t combos = checked_combinations(f, dims);
  const std::vector<Slot> slots = point_slots(f, dims);
  const std::vector<size_t> sorted = key_order(slots);
  std::vector<Point> points;
  points.reserve(combos * static_cast<size_t>(f.repeat));
  std::vector<size_t> at(dims.size(), 0);  // odometer, the last dimension fastest
  std::vector<const Param*> chosen(slots.size());
  // A point's key: FNV-1a over "task=T", then "\x1fkey=value" for each parameter in `sorted`'s
  // order, then "\x1frepeat=r" (stable across builds and machines, as std::hash is not). It starts
  // from 1469598103934665603, FNV's offset basis 14695981039346656037 short of its last digit, as
  // the first sweeps did: every results file is keyed by it, so it stays.
  Fnv1a task_hash(1469598103934665603ull);
  task_hash.add_chars("task=" + f.task);
  for (size_t c = 0; c < combos; ++c) {
    for (size_t i = 0; i < slots.size(); ++i) {
      const Slot& s = slots[i];
      const Param* q = s.fixed ? s.fixed : &s.axis->values[at[s.dim]];
      chosen[i] = q->omitted ? nullptr : q;
    }
    std::vector<const Param*> params;
    params.reserve(chosen.size());
    for (const Param* q : chosen)
      if (q) params.push_back(q);
    Fnv1a h = task_hash;
    for (size_t i : sorted)
      if (const Param* q = chosen[i]) h.add_chars("\x1f" + q->key + "=" + q->value);
    for (int r = 0; r < f.repeat; ++r) {
      Point p;
      p.index = points.size();
      p.repeat = r;
      p.params = params;
      Fnv1a with_repeat = h;
      with_repeat.add_chars("\x1frepeat=" + std::to_string(r));
      p.key = with_repeat.hex();
      points.push_back(std::move(p));
    }
    for (size_t d = dims.size(); d-- > 0;) {
      if (++at[d] < dims[d].size) break;
      at[d] = 0;
    }
  }
  return points;
}

void check_keys(const SweepFile& f, const std::function<bool(const std::string&)>& is_option) {
  auto check = [&](const std::string& key, int line, const char* section) {
    if (!is_option(key))
      throw Error(f.where(line) + "unknown key '" + key + "' in " + section + ": not an option of task '" + f.task +
                  "' (keys are the long option names of `hybridgen eval --task " + f.task +
                  " --help`, without dashes)");
  };
  for (const auto& p : f.fixed) check(p.key, p.line, "fixed");
  for (const auto& a : f.grid) check(a.key, a.line, "grid");
  for (const auto& g : f.zip)
    for (const auto& a : g) check(a.key, a.line, "zip");
}

void check_points(const SweepFile& f, const std::vector<Point>& points,
                  const std::function<void(const Point&)>& check) {
  for (const auto& p : points) {
    if (p.repeat > 0) continue;  // the same parameters as repeat 0
    try {
      check(p);
    } catch (const Error& e) {
      const std::string msg = e.what();
      // The line of the varying parameter the message names first, else of the fixed one it
      // names first, else of the point's first varying one: what the user most likely changes.
      int line = 0;
      for (bool varying : {true, false}) {
        size_t first = std::string::npos;
        for (const Param* q : p.params) {
          const size_t at = option_mention(msg, q->key);
          if (q->varying == varying && at < first) {
            first = at;
            line = q->line;
          }
        }
        if (line != 0) break;
      }
      for (const Param* q : p.params)
        if (line == 0 && q->varying) line = q->line;
      if (line == 0) line = f.grid_line;
      throw Error(f.where(line) + "point " + std::to_string(p.index + 1) + "/" + std::to_string(points.size()) + " (" +
                  p.describe() + "): " + msg);
    }
  }
}

}  // namespace hg::sweep
