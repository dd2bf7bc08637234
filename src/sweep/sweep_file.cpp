#include "sweep/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "hybridgen/error.h"
#include "util/strings.h"

namespace hg::sweep {

namespace {

int line_of(const YAML::Node& n) { return n.Mark().line + 1; }

// A plain (unquoted) YAML scalar as a JSON number or boolean where it reads as one.
nlohmann::json typed(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: a string whatever it looks like
  long long i = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && end == s.data() + s.size()) return i;
  if (!s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos) {
    try {
      size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size()) return d;
    } catch (const std::exception&) {
    }
  }
  if (s == "true") return true;
  if (s == "false") return false;
  return s;
}

class Parser {
 public:
  Parser(const std::string& path, const std::vector<std::string>& tasks) : tasks_(tasks) { f_.path = path; }

  SweepFile parse(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail(e.mark.line + 1, "malformed YAML: " + e.msg);
    }
    if (!root.IsMap())
      fail(root.IsDefined() ? line_of(root) : 1, "a sweep file is a mapping with name, task, fixed, grid, zip, repeat");
    for (const auto& kv : root) {
      const std::string field = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      const int line = line_of(kv.first);
      if (field == "name") {
        f_.name = scalar(v, line, "name");
      } else if (field == "task") {
        f_.task = scalar(v, line, "task");
        f_.task_line = line;
        if (std::find(tasks_.begin(), tasks_.end(), f_.task) == tasks_.end()) {
          fail(line, "task '" + f_.task + "' is not one of " + join(tasks_));
        }
      } else if (field == "repeat") {
        const std::string s = scalar(v, line, "repeat");
        int r = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), r);
        if (ec != std::errc() || end != s.data() + s.size() || r < 1)
          fail(line, "repeat: expected an integer >= 1, got '" + s + "'");
        f_.repeat = r;
      } else if (field == "fixed") {
        if (!v.IsMap()) fail(line, "fixed: expected a mapping of option: value");
        for (const auto& p : v) f_.fixed.push_back(param(p.first.Scalar(), p.second, line_of(p.first), false));
      } else if (field == "grid") {
        f_.grid_line = line;
        if (!v.IsMap() || v.size() == 0) fail(line, "grid: expected a mapping of option: [values], got an empty one");
        for (const auto& p : v) f_.grid.push_back(axis(p.first.Scalar(), p.second, line_of(p.first), "grid"));
      } else if (field == "zip") {
        if (f_.grid_line == 0) f_.grid_line = line;
        if (v.IsMap()) {
          f_.zip.push_back(zip_group(v, line));
        } else if (v.IsSequence() && v.size() > 0) {
          for (const auto& g : v) f_.zip.push_back(zip_group(g, line_of(g)));
        } else {
          fail(line, "zip: expected a mapping of option: [values] (or a list of such mappings)");
        }
      } else {
        fail(line, "unknown field '" + field + "' (a sweep file has name, task, fixed, grid, zip, repeat)");
      }
    }
    if (f_.task.empty()) fail(1, "no task: (one of the eval tasks)");
    if (f_.name.empty()) fail(1, "no name: (it names the results file and the plots)");
    if (f_.grid.empty() && f_.zip.empty()) fail(1, "no grid: or zip: (nothing to sweep)");
    check_unique_keys();
    return f_;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const { throw Error(f_.where(line) + what); }

  std::string scalar(const YAML::Node& v, int line, const std::string& what) const {
    if (!v.IsScalar() || v.Scalar().empty()) fail(line, what + ": expected a value");
    return v.Scalar();
  }

  Param param(const std::string& key, const YAML::Node& v, int line, bool varying) const {
    Param p;
    p.key = key;
    p.line = line;
    p.varying = varying;
    if (key.empty()) fail(line, "an empty key");
    if (key.rfind("-", 0) == 0) fail(line, "key '" + key + "': write option names without dashes");
    if (v.IsNull() && varying) {
      p.omitted = true;
      p.json = nullptr;
    } else if (v.IsScalar()) {
      p.value = v.Scalar();
      p.json = typed(v);
    } else if (v.IsSequence() && v.size() > 0) {  // one value made of several: comma-joined
      p.json = nlohmann::json::array();
      for (const auto& e : v) {
        if (!e.IsScalar()) fail(line_of(e), key + ": a list value holds scalars only");
        p.value += (p.value.empty() ? "" : ",") + e.Scalar();
        p.json.push_back(typed(e));
      }
    } else {
      fail(line, key + ": expected a value (a scalar or a list of scalars)");
    }
    return p;
  }

  Axis axis(const std::string& key, const YAML::Node& v, int line, const std::string& section) const {
    Axis a;
    a.key = key;
    a.line = line;
    if (!v.IsSequence()) fail(line, section + "." + key + ": expected a list of values");
    if (v.size() == 0) fail(line, section + "." + key + ": an empty list (no points)");
    for (const auto& e : v) a.values.push_back(param(key, e, line_of(e), true));
    return a;
  }

  std::vector<Axis> zip_group(const YAML::Node& g, int line) const {
    if (!g.IsMap() || g.size() == 0) fail(line, "zip: expected a mapping of option: [values]");
    std::vector<Axis> group;
    for (const auto& p : g) {
      group.push_back(axis(p.first.Scalar(), p.second, line_of(p.first), "zip"));
      if (group.back().values.size() != group.front().values.size())
        fail(group.back().line, "zip." + group.back().key + " has " + std::to_string(group.back().values.size()) +
                                    " values, zip." + group.front().key + " has " +
                                    std::to_string(group.front().values.size()) + " (zipped lists vary together)");
    }
    return group;
  }

  void check_unique_keys() const {
    std::set<std::string> seen;
    auto add = [&](const std::string& key, int line) {
      if (!seen.insert(key).second) fail(line, "key '" + key + "' is given twice (in fixed, grid or zip)");
    };
    for (const auto& p : f_.fixed) add(p.key, p.line);
    for (const auto& a : f_.grid) add(a.key, a.line);
    for (const auto& g : f_.zip)
      for (const auto& a : g) add(a.key, a.line);
  }

  SweepFile f_;
  const std::vector<std::string>& tasks_;
};

}  // namespace

std::string SweepFile::where(int line) const { return path + ":" + std::to_string(line) + ": "; }

SweepFile parse_sweep(const std::string& text, const std::string& path, const std::vector<std::string>& tasks) {
  return Parser(path, tasks).parse(text);
}

SweepFile load_sweep_file(const std::string& path, const std::vector<std::string>& tasks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the sweep file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_sweep(ss.str(), path, tasks);
}

}  // namespace hg::sweep
