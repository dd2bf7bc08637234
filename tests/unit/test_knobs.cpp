// The knob registry: every knob parses the same value from the command line and from YAML,
// round-trips through describe, rejects values out of its range and presets it does not apply
// to with one clear message, and drives describe_policy.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>

#include "attention/policy_knobs.h"
#include "attention/selectors/infinigen.h"
#include "attention/selectors/predictors.h"
#include "attention/selectors/pruners.h"
#include "cli/common.h"
#include "hybridgen/error.h"
#include "util/thread_pool.h"
#include "test_util.h"

namespace hg::test {
namespace {

// A value of each knob other than the preset's default, in the knob's own syntax.
std::string other_value(const Knob& k, const Policy& p) {
  const std::string cur = k.describe(p);
  if (k.type == "INT") return std::to_string(std::stoi(cur) == 1 ? 2 : 1);
  if (k.type == "INT|auto") return cur == "auto" ? "1" : "auto";  // --k-min, --host-threads
  if (k.type == "FLOAT") return cur == "0.5" ? "0.25" : "0.5";
  if (k.type == "BOOL") return cur == "true" ? "false" : "true";
  // NAME: the first name in the range that differs
  std::string range = k.range;
  size_t at = 0;
  while (at <= range.size()) {
    const size_t bar = std::min(range.find('|', at), range.size());
    const std::string name = range.substr(at, bar - at);
    if (name != cur) return name;
    at = bar + 1;
  }
  return cur;
}

Policy from_cli(const std::string& preset, const std::vector<std::string>& args) {
  CLI::App app;
  cli::PolicyOptions o;
  cli::add_policy_options(app, o);
  std::vector<std::string> argv = {"--policy", preset};
  argv.insert(argv.end(), args.begin(), args.end());
  std::reverse(argv.begin(), argv.end());  // CLI11 parses a reversed vector
  app.parse(argv);
  return cli::make_policy(o, o.preset);
}

Policy from_yaml(const std::string& preset, const std::string& body) {
  const auto path = temp_dir("knobs") / "policy.yaml";
  std::ofstream(path) << "policy:\n  preset: " << preset << "\n" << body;
  Policy p = policy_preset("full");
  apply_policy_yaml(p, path.string());
  return p;
}

TEST(Knobs, EveryKnobParsesFromCliAndYamlAlikeAndRoundTrips) {
  const KnobRegistry& r = knob_registry();
  ASSERT_FALSE(r.knobs().empty());
  int checked = 0;
  for (const auto& preset : policy_presets()) {
    for (const Knob* k : r.for_preset(preset)) {
      const Policy base = policy_preset(preset);
      const std::string v = other_value(*k, base);
      const Policy cli = from_cli(preset, {k->flag(), v});
      EXPECT_EQ(k->describe(cli), v) << k->name << " with " << preset;
      std::string key = k->name;
      const Policy yaml = from_yaml(preset, "  " + key + ": " + v + "\n");
      EXPECT_EQ(k->describe(yaml), v) << k->name << " from YAML with " << preset;
      std::replace(key.begin(), key.end(), '-', '_');
      EXPECT_EQ(k->describe(from_yaml(preset, "  " + key + ": " + v + "\n")), v) << key;
      // describe -> parse leaves the policy as it was
      Policy again = base;
      k->parse(again, k->describe(cli));
      EXPECT_EQ(k->describe(again), k->describe(cli));
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// Each knob says which policies it applies to by what they do; these are the presets that gives,
// which the preset-name lists of earlier versions named (a change here changes the CLI).
TEST(Knobs, ScopesByWhatAPolicyDoesGiveThePresetsOfBefore) {
  const KnobRegistry& r = knob_registry();
  const auto presets = [&](const std::string& name) { return r.find(name)->presets(); };
  const PresetList split = {"cpu-attn", "hybrid", "hgca", "streaming", "h2o", "keyformer", "infinigen", "quest"};
  EXPECT_EQ(presets("window"), split);
  EXPECT_EQ(presets("predictor"), split);
  EXPECT_EQ(presets("exact-prefill"), (PresetList{"streaming", "h2o", "keyformer"}));
  EXPECT_EQ(presets("prune"), (PresetList{"h2o", "keyformer"}));
  EXPECT_EQ(presets("heavy"), (PresetList{"h2o", "keyformer"}));
  EXPECT_EQ(presets("tau-init"), (PresetList{"keyformer"}));
  EXPECT_EQ(presets("alpha"), (PresetList{"infinigen"}));
  EXPECT_EQ(presets("max-kv"), (PresetList{"infinigen"}));
  EXPECT_EQ(presets("sched"), (PresetList{"hybrid", "hgca"}));
  EXPECT_EQ(presets("k-min"), (PresetList{"hybrid", "hgca"}));
  EXPECT_FALSE(r.find("window")->applies_to("not-a-preset"));
  // The infinigen preset's exact layers are the layers its selector fetches every host token for.
  EXPECT_EQ(policy_preset("infinigen").exact_layers, InfinigenSelector::kExactLayers);
  // Every pruner a preset names is a row of the pruner table.
  for (const auto& preset : policy_presets()) EXPECT_NO_THROW(find_pruner(policy_preset(preset).prune)) << preset;
}

TEST(Knobs, DescribePolicyListsEveryApplicableKnobWithItsValue) {
  Policy p = policy_preset("hybrid");
  knob_registry().set(p, "k", "64", "--k");
  const std::string d = describe_policy(p);
  EXPECT_NE(d.find("hybrid (HybridGen)"), std::string::npos) << d;
  for (const Knob* k : knob_registry().for_preset("hybrid"))
    EXPECT_NE(d.find(k->name + " " + k->describe(p)), std::string::npos) << k->name << " in " << d;
  EXPECT_NE(d.find("k 64"), std::string::npos);
  EXPECT_EQ(describe_policy(policy_preset("full")).find("window"), std::string::npos);
}

TEST(Knobs, OutOfRangeAndBadTypeAreOneLineErrorsNamingTheFlag) {
  const auto message = [](const std::vector<std::string>& args, const std::string& preset = "hybrid") {
    try {
      from_cli(preset, args);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({"--k", "-3"}), "--k must be >= 0 (or -1 for all host tokens), got -3");
  EXPECT_EQ(message({"--k", "-1"}), "");
  EXPECT_EQ(message({"--window", "-1"}), "--window must be >= 0, got -1");
  EXPECT_EQ(message({"--window", "12x"}), "--window: '12x' is not an integer >= 0");
  EXPECT_EQ(message({"--host-threads", "-1"}),
            "--host-threads must be in [1, " + std::to_string(hardware_threads()) +
                "] (or 0 for the host stage inline on every core of the run, cpu-attn's default) (or auto), got -1");
  EXPECT_EQ(message({"--host-threads", "auto"}), "");
  EXPECT_EQ(message({"--host-threads", "two"}),
            "--host-threads: 'two' is not auto or an integer in [1, " + std::to_string(hardware_threads()) +
                "] (or 0 for the host stage inline on every core of the run, cpu-attn's default)");
  EXPECT_EQ(message({"--host-threads", "0"}), "");
  EXPECT_EQ(message({"--evict-block", "0"}), "--evict-block must be >= 1, got 0");
  EXPECT_EQ(message({"--select", "some"}), "--select: 'some' is not all|post|pre");
  EXPECT_EQ(message({"--keep-evicted", "maybe"}), "--keep-evicted: 'maybe' is not true|false");
  const std::string full = message({"--window", "16"}, "full");
  EXPECT_NE(full.find("--window does not apply to --policy full"), std::string::npos) << full;
  EXPECT_EQ(full.find('\n'), std::string::npos);
}

TEST(Knobs, YamlErrorsNameTheFileAndLine) {
  try {
    from_yaml("hybrid", "  window: 16\n  k: -7\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("policy.yaml:4: --k must be >= 0"), std::string::npos) << m;
  }
  try {
    from_yaml("hybrid", "  windows: 16\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy knob 'windows'"), std::string::npos) << e.what();
  }
  try {
    from_yaml("full", "  sinks: 2\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--sinks does not apply to --policy full"), std::string::npos) << e.what();
  }
}

TEST(Knobs, ModulesCanRegisterKnobsForWhatAPolicyDoes) {
  KnobRegistry r;
  register_policy_knobs(r, predictor_names);
  // A knob of the policies that merge a Post-QKᵀ top-K's partial result by LSE: hgca alone
  const KnobScope lse_top_k = [](const Policy& p) { return p.merge == MergeMode::Lse && p.select == Selection::Post; };
  r.add(int_knob("exact-layers-copy", "a knob of another module", &Policy::exact_layers, 0, 9, lse_top_k));
  EXPECT_THROW(r.add(int_knob("window", "twice", &Policy::window, 0, 1)), Error);
  Policy p = policy_preset("hgca");
  r.set(p, "exact_layers_copy", "7", "--exact-layers-copy");
  EXPECT_EQ(p.exact_layers, 7);
  Policy h = policy_preset("hybrid");
  try {
    r.set(h, "exact-layers-copy", "7", "--exact-layers-copy");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--exact-layers-copy does not apply to --policy hybrid (it applies to hgca)");
  }
  EXPECT_EQ(r.for_preset("hgca").size(), r.for_preset("hybrid").size() + 1);
}

TEST(Knobs, ValidatePolicyChecksKnobRangesOfPoliciesBuiltInCode) {
  Policy p = policy_preset("hybrid");
  p.window = 64;
  p.K = -5;
  EXPECT_THROW(validate_policy(p, 256), Error);
  p.K = -1;
  EXPECT_NO_THROW(validate_policy(p, 256));
}

// hybrid selects with q̃ and scores the chosen tokens with the true q (refine); the paper's
// speculative logits stay one knob away. The query-aware baselines rank with their own sources.
TEST(Knobs, EachPresetsQuerySource) {
  EXPECT_EQ(policy_preset("hybrid").query, QuerySource::Auto);  // the device chooses (test_cores.cpp)
  EXPECT_EQ(from_cli("hybrid", {"--query", "refine"}).query, QuerySource::Refine);
  EXPECT_EQ(from_cli("hybrid", {"--query", "speculative"}).query, QuerySource::Speculative);
  EXPECT_EQ(policy_preset("hgca").query, QuerySource::Exact);
  EXPECT_EQ(policy_preset("quest").query, QuerySource::Exact);
  EXPECT_EQ(policy_preset("infinigen").query, QuerySource::Speculative);
}

// The Pre-QKᵀ predictor of the presets that select ahead of the query: hybrid's scheduler switches
// to a query-aware one (partial), the baselines keep their papers' own.
TEST(Knobs, EachPresetsPredictor) {
  EXPECT_EQ(policy_preset("hybrid").predictor, "partial");
  EXPECT_EQ(initial_plan(policy_preset("hybrid")).predictor, "partial");
  EXPECT_EQ(from_cli("hybrid", {"--predictor", "recent"}).predictor, "recent");
  EXPECT_EQ(policy_preset("quest").predictor, "quest");
  EXPECT_EQ(policy_preset("infinigen").predictor, "infinigen");
}

}  // namespace
}  // namespace hg::test
