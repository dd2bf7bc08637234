// K_min profiles: the knee, the file round trip, corrupt files, and the model fingerprint.
#include <gtest/gtest.h>

#include <fstream>

#include "hybridgen/model.h"
#include "sched/kmin_profile.h"
#include "test_expect.h"
#include "test_util.h"

namespace hg {
namespace {

std::vector<KminPoint> curve() {
  return {{16, 0.80, 0.20}, {32, 0.90, 0.08}, {64, 0.945, 0.03}, {128, 0.95, 0.02}, {256, 0.952, 0.01}};
}

TEST(KminProfile, KneeIsTheSmallestKWithinTheTolerance) {
  EXPECT_EQ(pick_knee(curve(), 0.01), 64);    // 0.945 >= 0.952 - 0.01
  EXPECT_EQ(pick_knee(curve(), 0.005), 128);  // 0.95 >= 0.947; 0.945 is not
  EXPECT_EQ(pick_knee(curve(), 0.0), 256);
  EXPECT_EQ(pick_knee(curve(), 1.0), 16);
  // Unordered input, and a non-monotone curve: the smallest K that qualifies.
  std::vector<KminPoint> bumpy{{128, 0.95, 0}, {16, 0.951, 0}, {64, 0.90, 0}, {256, 0.952, 0}};
  EXPECT_EQ(pick_knee(bumpy, 0.01), 16);
  test::expect_error([] { pick_knee({}, 0.01); }, {"no K was measured"});
}

TEST(KminProfile, RoundTrip) {
  const auto dir = test::temp_dir("kmin_profile");
  KminProfile p;
  p.fingerprint = "0123456789abcdef";
  p.model = "tiny";
  p.k_min = 64;
  p.tolerance = 0.01;
  p.ctx = 256;
  p.text = "moby.txt";
  p.points = curve();
  const auto path = dir / "nested" / "p.json";
  write_profile(p, path);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  const auto q = read_profile(path, p.fingerprint);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->k_min, 64);
  EXPECT_EQ(q->points.size(), 5u);
  EXPECT_DOUBLE_EQ(q->points[2].top1, 0.945);
  EXPECT_FALSE(read_profile(dir / "missing.json", p.fingerprint).has_value());
  test::expect_error([&] { read_profile(path, "ffffffffffffffff"); }, {path.string(), "expected ffffffffffffffff"});
}

TEST(KminProfile, CorruptFilesNameTheFile) {
  const auto dir = test::temp_dir("kmin_corrupt");
  auto write = [&](const std::string& name, const std::string& text) {
    const auto p = dir / name;
    std::ofstream(p) << text;
    return p;
  };
  const auto truncated = write("a.json", R"({"fingerprint": "00", "k_m)");
  test::expect_error([&] { read_profile(truncated, "00"); }, {truncated.string(), "corrupt K_min profile"});
  const auto no_k = write("b.json", R"({"fingerprint": "00"})");
  test::expect_error([&] { read_profile(no_k, "00"); }, {no_k.string(), "'k_min'"});
  const auto wrong_type = write("c.json", R"({"fingerprint": "00", "k_min": "many"})");
  test::expect_error([&] { read_profile(wrong_type, "00"); }, {wrong_type.string(), "'k_min'", "wrong type"});
  const auto negative = write("d.json", R"({"fingerprint": "00", "k_min": -3})");
  test::expect_error([&] { read_profile(negative, "00"); }, {negative.string(), "must be >= 0"});
  const auto array = write("e.json", "[1, 2]");
  test::expect_error([&] { read_profile(array, "00"); }, {array.string(), "expected a JSON object"});
}

TEST(KminProfile, FingerprintFollowsTheContentNotThePath) {
  const auto a = load_model(test::tiny_model("llama-gqa").string());
  const auto b = load_model(test::tiny_model("llama-gqa").string());
  const auto c = load_model(test::tiny_model("qwen2").string());
  const std::string fa = model_fingerprint(*a);
  EXPECT_EQ(fa.size(), 16u);
  EXPECT_EQ(fa, model_fingerprint(*b));
  EXPECT_NE(fa, model_fingerprint(*c));
  // A copy of the checkpoint elsewhere has the same fingerprint.
  const auto copy = test::temp_dir("kmin_copy") / "m";
  std::filesystem::copy(test::tiny_model("llama-gqa"), copy, std::filesystem::copy_options::recursive);
  EXPECT_EQ(fa, model_fingerprint(*load_model(copy.string())));
  EXPECT_EQ(profile_path(*a).filename().string(), fa + ".json");
}

}  // namespace
}  // namespace hg
