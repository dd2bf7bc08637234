// K_min profiles: the accuracy floor of the feedback scheduler, found offline by
// `hybridgen eval --task kmin` (top-1 agreement and KL against `full` for a list of K) and stored
// per model in ${HG_CACHE:-~/.cache/hybridgen}/profiles/<fingerprint>.json, where `--k-min auto`
// finds it.
//
// The key is a fingerprint of the model's content, not of its path: FNV-1a (64 bit) over every
// tensor's name, dtype and shape and over three 4 KiB samples of its bytes (start, middle, end).
// Two files holding the same weights share a profile; a fine-tune, a requantization or another
// shape gets its own. Sampling keeps it to microseconds on a 16 GB model, where hashing every
// byte would cost seconds on each run.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hybridgen/model.h"

namespace hg {

struct KminPoint {
  int K = 0;
  double top1 = 0;  // top-1 agreement with `full` (fraction of scored positions)
  double kl = 0;    // mean KL(full || policy), nats
};

struct KminProfile {
  std::string fingerprint;        // model_fingerprint()
  std::string model;              // where the model came from (informational)
  int k_min = 0;                  // the knee
  double tolerance = 0;           // top-1 agreement tolerance the knee was picked with
  int ctx = 0;                    // tokens per window of the measurement
  std::string text;               // the text measured on
  std::string policy;             // describe_policy of the measured policy
  std::vector<KminPoint> points;  // in increasing K

  nlohmann::json to_json() const;
  // hg::Error naming `where` and the field when j is not a profile.
  static KminProfile from_json(const nlohmann::json& j, const std::string& where);
};

std::filesystem::path profile_dir();  // cache_dir() / "profiles"
std::filesystem::path profile_path(const Model& model);

// The knee: the smallest K whose top-1 agreement is within `tolerance` of the largest K's.
// hg::Error when `points` is empty.
int pick_knee(const std::vector<KminPoint>& points, double tolerance);

// Writes the profile (to a temporary file, then renamed over `path`, so a reader never sees half).
void write_profile(const KminProfile& p, const std::filesystem::path& path);
// std::nullopt when the file does not exist; hg::Error naming the file when it is not a profile
// or belongs to another model.
std::optional<KminProfile> read_profile(const std::filesystem::path& path, const std::string& expected_fingerprint);

}  // namespace hg
