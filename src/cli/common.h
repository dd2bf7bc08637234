// Options and helpers shared by the subcommands: which model, which device, how many threads,
// and how token input is read.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/interrupt.h"
#include "engine/sampler.h"
#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "hybridgen/policy.h"
#include "hybridgen/tokenizer.h"
#include "util/token_ids.h"  // parse_ids (--ids, --ids-file)
#include "util/progress.h"

namespace hg::cli {

inline constexpr int kMaxBatch = 256;  // sequences decoded together (llama.cpp's LLAMA_MAX_SEQ)

struct ModelOptions {
  std::string model;            // -m: directory, .gguf or alias
  std::string synthetic;        // --synthetic configs/models/X.yaml
  std::string synthetic_dtype = "bf16";
  uint64_t synthetic_seed = 1;
  std::string tokenizer;        // --tokenizer FILE overrides the model's own
};

// --policy and its knobs; a knob given on the command line overrides the preset and the YAML file.
struct PolicyOptions {
  std::string preset = "full";
  std::string file;  // --policy-file YAML
  // --NAME VALUE for each knob of the registry (src/policy/knobs.h), in command-line order
  std::vector<std::pair<std::string, std::string>> knobs;
  std::string kv_placement = "semantic", k_node = "auto", v_node = "auto", k_dram_budget = "0";
  bool no_kv_huge_pages = false;
  // --seed: the policy's random noise (keyformer's Gumbel noise). Commands with other randomness
  // (generate's sampler, passkey's keys) declare --seed before add_policy_options and copy it here:
  // one seed per run, as llama.cpp's --seed.
  uint64_t seed = 0;
};

struct RuntimeOptions {
  int threads = 0;
  int ctx = 0;
  int ubatch = 0;  // prompt tokens per prefill chunk (0: the engine's choice for the policy)
  std::string kv_dtype = "bf16";
  std::string precision = "auto";
  std::string device = "auto";
  int gpu = 0;
  int verbose = 0;
  bool no_progress = false;  // --no-progress
};

void add_model_options(CLI::App& cmd, ModelOptions& o);
void add_runtime_options(CLI::App& cmd, RuntimeOptions& o);
// --policy, --policy-file, one option per registered knob, and the host KV placement options.
// Adds --seed too, unless the command declared its own --seed before (which must then set o.seed).
void add_policy_options(CLI::App& cmd, PolicyOptions& o, bool preset_list = false);
// The presets, the system each stands for and the knobs each takes (for --help footers).
std::string preset_help();
// One entry of a --policy list: "hybrid", or "hybrid:k=64:window=512" (a preset with knobs of its
// own, set after the command line's). label: the entry as written.
struct PolicyEntry {
  std::string label, preset;
  std::vector<std::pair<std::string, std::string>> knobs;
};
// hg::Error naming --policy when an entry is empty or a knob is not NAME=VALUE.
std::vector<PolicyEntry> parse_policy_list(const std::string& s);
// The entries' presets, in order (the `compared` list of make_policy).
std::vector<std::string> entry_presets(const std::vector<PolicyEntry>& entries);
// `o` for one entry: its preset, and its knobs after the command line's.
PolicyOptions entry_options(const PolicyOptions& o, const PolicyEntry& e);
// The policy the options describe (preset, then YAML, then command-line knobs).
// `compared`: the other policies of a comparison (bench --policy a,b): a knob that applies to one
// of them but not to `preset` is skipped for `preset` instead of being an error.
Policy make_policy(const PolicyOptions& o, const std::string& preset, const std::vector<std::string>& compared = {});
// Copies the policy and placement knobs into engine options.
void apply_policy_options(const PolicyOptions& o, const std::string& preset, EngineOptions& e,
                          const std::vector<std::string>& compared = {});
// Checks the runtime and policy options that need no model (names, knobs that contradict each
// other): what a sweep checks at every point before the first one runs.
void check_engine_options(const RuntimeOptions& r, const PolicyOptions& o, const std::string& preset,
                          const std::vector<std::string>& compared = {});

std::unique_ptr<Model> load_model(const ModelOptions& o);
// The tokenizer from --tokenizer or the model's own; nullptr when neither exists.
std::unique_ptr<Tokenizer> load_tokenizer(const ModelOptions& o, const Model& model);
EngineOptions engine_options(const RuntimeOptions& r, const ModelSpec& spec, int needed_ctx, int batch);
// Progress on stderr (a bar on a terminal, periodic lines otherwise), or none with --no-progress.
ProgressOptions progress_options(const RuntimeOptions& r);
// engine.prefill of the whole prompt, reporting tokens done / total after each of its chunks. With
// `interrupt`, stops after the chunk running at a SIGINT and returns false. record: as
// Engine::prefill's.
bool prefill_with_progress(Engine& engine, int seq, std::span<const int32_t> tokens, float* logits_last,
                           const ProgressOptions& progress, const InterruptScope* interrupt = nullptr,
                           PrefillState* record = nullptr);

// Range checks of numeric options: hg::Error "-t must be between 0 and 16 (the CPUs of this
// machine), got 99999" (`why`, when given, says where the bounds come from).
void check_range(const std::string& flag, int64_t value, int64_t lo, int64_t hi, const std::string& why = "");
void check_real_range(const std::string& flag, double value, double lo, double hi, const std::string& why = "");

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n into `s`; `suffix` ends each
// help line ("; a request's default" for serve).
void add_sampler_options(CLI::App& cmd, SamplerOptions& s, const std::string& suffix = "");
// Their ranges: top-k at most the vocabulary, repeat-last-n at most max_ctx.
void check_sampler_options(const SamplerOptions& s, int vocab, int max_ctx);

// A comma list of integers >= min_value ("512,2048"); hg::Error naming `flag`.
std::vector<int> parse_list(const std::string& s, const std::string& flag, int min_value);
std::string read_text_file(const std::string& path);
std::string format_bytes(double bytes);
void setup_logging(int verbose);

}  // namespace hg::cli
