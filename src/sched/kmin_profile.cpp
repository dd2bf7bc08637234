#include "sched/kmin_profile.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "hybridgen/error.h"

namespace hg {

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* name, const std::string& where) {
  if (!j.contains(name)) throw Error(where + ": not a K_min profile (no field '" + name + "')");
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(where + ": field '" + std::string(name) + "' has the wrong type (" + j.at(name).dump() + ")");
  }
}

}  // namespace

std::filesystem::path profile_dir() { return cache_dir() / "profiles"; }

std::filesystem::path profile_path(const Model& model) { return profile_dir() / (model_fingerprint(model) + ".json"); }

int pick_knee(const std::vector<KminPoint>& points, double tolerance) {
  if (points.empty()) throw Error("K_min profile: no K was measured");
  const auto largest =
      std::max_element(points.begin(), points.end(), [](const KminPoint& a, const KminPoint& b) { return a.K < b.K; });
  int knee = largest->K;
  for (const auto& p : points)
    if (p.top1 >= largest->top1 - tolerance) knee = std::min(knee, p.K);
  return knee;
}

nlohmann::json KminProfile::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : points) pts.push_back({{"k", p.K}, {"top1_agreement", p.top1}, {"kl_mean", p.kl}});
  return {{"fingerprint", fingerprint}, {"model", model}, {"k_min", k_min},
          {"tolerance", tolerance},     {"ctx", ctx},     {"text", text},
          {"policy", policy},           {"points", pts}};
}

KminProfile KminProfile::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not a K_min profile (expected a JSON object)");
  KminProfile p;
  p.fingerprint = field<std::string>(j, "fingerprint", where);
  p.model = j.value("model", "");
  p.k_min = field<int>(j, "k_min", where);
  if (p.k_min < 0) throw Error(where + ": field 'k_min' must be >= 0, got " + std::to_string(p.k_min));
  p.tolerance = j.value("tolerance", 0.0);
  p.ctx = j.value("ctx", 0);
  p.text = j.value("text", "");
  p.policy = j.value("policy", "");
  if (j.contains("points")) {
    if (!j["points"].is_array()) throw Error(where + ": field 'points' must be an array");
    for (const auto& e : j["points"])
      p.points.push_back(
          {field<int>(e, "k", where), field<double>(e, "top1_agreement", where), field<double>(e, "kl_mean", where)});
  }
  return p;
}

void write_profile(const KminProfile& p, const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) throw Error(path.parent_path().string() + ": cannot create the profile directory (" + ec.message() + ")");
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw Error(tmp.string() + ": cannot open for writing");
    f << p.to_json().dump(2) << "\n";
    if (!f) throw Error(tmp.string() + ": write failed");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": cannot replace the profile (" + ec.message() + ")");
}

std::optional<KminProfile> read_profile(const std::filesystem::path& path, const std::string& expected_fingerprint) {
  std::ifstream f(path);
  if (!f) {
    if (!std::filesystem::exists(path)) return std::nullopt;
    throw Error(path.string() + ": cannot read the K_min profile");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": corrupt K_min profile, not JSON (" + std::string(e.what()) +
                "); rerun `hybridgen eval --task kmin` or delete the file");
  }
  KminProfile p = KminProfile::from_json(j, path.string());
  if (p.fingerprint != expected_fingerprint)
    throw Error(path.string() + ": K_min profile of model " + p.fingerprint + ", expected " + expected_fingerprint);
  return p;
}

}  // namespace hg
