#include "cli/common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attention/policy_knobs.h"
#include "hybridgen/error.h"
#include "mem/placement.h"
#include "util/strings.h"
#include "util/thread_pool.h"

namespace hg::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-m,--model", o.model, "model: HF directory, .gguf file, or an alias: 'smollm2' (the default model), 'qwen2.5-0.5b'");
  cmd.add_option("--synthetic", o.synthetic, "build a seeded random model from a shape config (configs/models/X.yaml)");
  cmd.add_option("--synthetic-dtype", o.synthetic_dtype, "weight dtype of a synthetic model: f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1")
      ->capture_default_str();
  cmd.add_option("--synthetic-seed", o.synthetic_seed, "seed of a synthetic model")->capture_default_str();
  cmd.add_option("--tokenizer", o.tokenizer, "tokenizer file (tokenizer.json, vocab.json or .gguf) instead of the model's");
}

void add_runtime_options(CLI::App& cmd, RuntimeOptions& o) {
  cmd.add_option("-t,--threads", o.threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd.add_option("-c,--ctx", o.ctx, "tokens per sequence the KV cache holds (0: as needed)")->capture_default_str();
  cmd.add_option("--ubatch", o.ubatch,
                 "prompt tokens per prefill chunk (0: " + std::to_string(kExactPrefillUbatch) +
                     " where the policy's prefill is exact, " + std::to_string(kPruningPrefillUbatch) +
                     " for streaming, h2o and keyformer, whose prefill evicts as it goes)")
      ->capture_default_str();
  cmd.add_option("--kv-dtype", o.kv_dtype, "KV cache dtype: bf16|f16|f32")->capture_default_str();
  cmd.add_option("--precision", o.precision,
                 "CPU device arithmetic: auto (follows the weights: f32 for f32/f16 checkpoints, bf16 for bf16 and "
                 "quantized ones), f32, or bf16 (bf16 GEMMs and attention where the CPU has AMX or AVX512_BF16)")
      ->capture_default_str();
  cmd.add_option("--device", o.device,
                 "auto|cpu|cuda|cuda-emu (cuda-emu: the CUDA code emulated on the CPU, for tests)")
      ->capture_default_str();
  cmd.add_option("--gpu", o.gpu, "CUDA device index")->capture_default_str();
  cmd.add_flag("-v,--verbose", o.verbose, "more log output");
  cmd.add_flag("--no-progress", o.no_progress, "no progress bar or progress lines on stderr");
}

std::string preset_help() {
  std::string s = "Policies (--policy):\n";
  const KnobRegistry& knobs = knob_registry();
  for (const auto& p : preset_table()) {
    std::string line = "  " + p.name;
    line.resize(std::max<size_t>(line.size() + 1, 14), ' ');
    s += line + p.system + ": " + p.summary + "\n";
    std::string names;
    for (const Knob* k : knobs.for_preset(p.name)) names += (names.empty() ? "" : " ") + k->flag();
    if (!names.empty()) s += std::string(14, ' ') + "knobs: " + names + "\n";
  }
  return s;
}

void add_policy_options(CLI::App& cmd, PolicyOptions& o, bool preset_list) {
  std::string names;
  for (const auto& n : policy_presets()) names += (names.empty() ? "" : ", ") + n;
  cmd.add_option("--policy", o.preset,
                 (preset_list ? "comma list of policies, each" : "attention policy,") +
                     std::string(" PRESET[:KNOB=VALUE...] (e.g. hybrid:host-threads=0:query=exact); presets: ") + names)
      ->capture_default_str();
  cmd.add_option("--policy-file", o.file, "YAML file of policy knobs (a `policy:` mapping or the whole file)");
  for (const Knob& k : knob_registry().knobs()) {
    const std::string applies = k.scope ? join(k.presets()) : "all but full";
    cmd.add_option_function<std::string>(
           k.flag(), [&o, name = k.name](const std::string& v) { o.knobs.emplace_back(name, v); },
           k.help + " (" + k.range + "; " + applies + ")")
        ->type_name(k.type)
        ->group("Policy knobs");
  }
  cmd.add_option("--kv-placement", o.kv_placement, "host KV placement: semantic|interleave|local")->capture_default_str();
  cmd.add_option("--k-node", o.k_node, "NUMA node of the host keys (auto: the workers' node)")->capture_default_str();
  cmd.add_option("--v-node", o.v_node, "NUMA node of the host values (auto: a CPU-less node if any)")->capture_default_str();
  cmd.add_option("--k-dram-budget", o.k_dram_budget, "bytes of keys allowed on the K node, e.g. 8G (0: no limit)")
      ->capture_default_str();
  cmd.add_flag("--no-kv-huge-pages", o.no_kv_huge_pages,
               "do not ask for transparent huge pages on the host KV arenas (madvise)");
  if (!cmd.get_option_no_throw("--seed"))
    cmd.add_option("--seed", o.seed, "seed of the policy's random noise (keyformer's Gumbel noise)")
        ->capture_default_str()
        ->group("Policy knobs");
  cmd.footer(preset_help());
}

std::vector<PolicyEntry> parse_policy_list(const std::string& s) {
  std::vector<PolicyEntry> out;
  std::stringstream list(s);
  std::string item;
  while (std::getline(list, item, ',')) {
    std::stringstream parts(item);
    std::string part;
    PolicyEntry e;
    e.label = item;
    std::getline(parts, e.preset, ':');
    if (e.preset.empty()) throw Error("--policy: an empty entry in '" + s + "'");
    while (std::getline(parts, part, ':')) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error("--policy " + item + ": '" + part + "' is not KNOB=VALUE (e.g. hybrid:k=64:window=512)");
      e.knobs.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) throw Error("--policy: empty list");
  return out;
}

std::vector<std::string> entry_presets(const std::vector<PolicyEntry>& entries) {
  std::vector<std::string> presets;
  for (const PolicyEntry& e : entries) presets.push_back(e.preset);
  return presets;
}

PolicyOptions entry_options(const PolicyOptions& o, const PolicyEntry& e) {
  PolicyOptions p = o;
  p.preset = e.preset;
  p.knobs.insert(p.knobs.end(), e.knobs.begin(), e.knobs.end());
  return p;
}

Policy make_policy(const PolicyOptions& o, const std::string& preset, const std::vector<std::string>& compared) {
  // One grammar for a policy everywhere: a command of one policy takes "hybrid:k=64" too.
  if (preset.find(':') != std::string::npos || preset.find(',') != std::string::npos) {
    const std::vector<PolicyEntry> entries = parse_policy_list(preset);
    if (entries.size() != 1) throw Error("--policy " + preset + ": this command runs one policy");
    return make_policy(entry_options(o, entries[0]), entries[0].preset, compared);
  }
  Policy p = policy_preset(preset);
  p.seed = o.seed;
  if (!o.file.empty()) apply_policy_yaml(p, o.file);
  const KnobRegistry& knobs = knob_registry();
  for (const auto& [name, value] : o.knobs) {
    const Knob* k = knobs.find(name);
    // bench --policy full,hybrid --window 512: the window is hybrid's; an error only when it
    // applies to none of the policies compared
    const bool elsewhere = k && !k->applies_to(p.name) &&
                           std::any_of(compared.begin(), compared.end(), [&](const auto& c) { return k->applies_to(c); });
    if (!elsewhere) knobs.set(p, name, value, "--" + name);
  }
  // A K or a selection asked for by hand, without --sched, means that K: the fixed schedule.
  const auto given = [&](const char* name) {
    return std::any_of(o.knobs.begin(), o.knobs.end(), [&](const auto& kv) { return kv.first == name; });
  };
  if (p.sched != SchedMode::Fixed && !given("sched") && (given("k") || given("select"))) {
    spdlog::info("--k/--select without --sched: fixed K and selection (--sched fixed)");
    p.sched = SchedMode::Fixed;
  }
  return p;
}

void apply_policy_options(const PolicyOptions& o, const std::string& preset, EngineOptions& e,
                          const std::vector<std::string>& compared) {
  e.policy = make_policy(o, preset, compared);
  validate_policy(e.policy, e.ctx);
  e.kv_placement = o.kv_placement;
  mem::parse_placement_policy(o.kv_placement);  // validates the name now, before any allocation
  e.k_node = mem::parse_node_option("--k-node", o.k_node);
  e.v_node = mem::parse_node_option("--v-node", o.v_node);
  e.k_dram_budget = mem::parse_byte_size("--k-dram-budget", o.k_dram_budget);
  e.kv_huge_pages = !o.no_kv_huge_pages;
}

void check_engine_options(const RuntimeOptions& r, const PolicyOptions& o, const std::string& preset,
                          const std::vector<std::string>& compared) {
  parse_kv_dtype(r.kv_dtype);
  parse_precision(r.precision);
  if (r.ctx < 0) throw Error("--ctx must be >= 0, got " + std::to_string(r.ctx));
  if (r.ubatch < 0) throw Error("--ubatch must be >= 0 (0: auto), got " + std::to_string(r.ubatch));
  EngineOptions e;
  e.ctx = r.ctx;
  apply_policy_options(o, preset, e, compared);
}


std::unique_ptr<Model> load_model(const ModelOptions& o) {
  if (!o.synthetic.empty() && !o.model.empty()) throw Error("give either -m or --synthetic, not both");
  if (!o.synthetic.empty()) return make_synthetic_model(o.synthetic, hg::parse_weight_dtype(o.synthetic_dtype), o.synthetic_seed);
  if (o.model.empty()) throw Error("no model: give -m MODEL (a directory, a .gguf file, 'smollm2' or 'qwen2.5-0.5b') or --synthetic");
  return hg::load_model(o.model);
}

std::unique_ptr<Tokenizer> load_tokenizer(const ModelOptions& o, const Model& model) {
  if (!o.tokenizer.empty()) return hg::load_tokenizer(o.tokenizer);
  if (model.format == "synthetic") return nullptr;
  return load_model_tokenizer(model.source);
}

EngineOptions engine_options(const RuntimeOptions& r, const ModelSpec& spec, int needed_ctx, int batch) {
  EngineOptions e;
  e.threads = r.threads;
  e.kv_dtype = parse_kv_dtype(r.kv_dtype);
  e.precision = parse_precision(r.precision);
  e.device = r.device;
  e.gpu = r.gpu;
  e.batch = batch;
  e.ubatch = r.ubatch;
  check_range("-t", r.threads, 0, hardware_threads(), "0: all; at most the CPUs of this machine");
  if (r.gpu < 0) throw Error("--gpu must be >= 0 (a CUDA device index), got " + std::to_string(r.gpu));
  if (r.ctx < 0) throw Error("--ctx must be >= 0, got " + std::to_string(r.ctx));
  e.ctx = r.ctx > 0 ? r.ctx : needed_ctx;
  // Past the trained context RoPE keeps working, the model just never saw such distances; allowed
  // with a warning, as llama.cpp does (OPT's learned positions end there: the engine refuses it).
  if (e.ctx > spec.max_ctx && !spec.is_opt())
    spdlog::warn("--ctx {} is longer than the model's trained context of {} tokens (max_position_embeddings): "
                 "quality will degrade past {} tokens",
                 e.ctx, spec.max_ctx, spec.max_ctx);
  return e;
}

std::vector<int> parse_list(const std::string& s, const std::string& flag, int min_value) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < min_value) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(flag + ": '" + item + "' is not an integer >= " + std::to_string(min_value));
    }
  }
  if (out.empty()) throw Error(flag + ": empty list");
  return out;
}

namespace {
template <typename T>
void check_range_impl(const std::string& flag, T value, T lo, T hi, const std::string& why) {
  if (value >= lo && value <= hi) return;  // false for NaN
  std::ostringstream m;
  m << flag << " must be between " << lo << " and " << hi << (why.empty() ? "" : " (" + why + ")") << ", got " << value;
  throw Error(m.str());
}
}  // namespace

void check_range(const std::string& flag, int64_t value, int64_t lo, int64_t hi, const std::string& why) {
  check_range_impl(flag, value, lo, hi, why);
}
void check_real_range(const std::string& flag, double value, double lo, double hi, const std::string& why) {
  check_range_impl(flag, value, lo, hi, why);
}

void add_sampler_options(CLI::App& cmd, SamplerOptions& s, const std::string& suffix) {
  cmd.add_option("--temp", s.temperature, "temperature (0: greedy)" + suffix)->capture_default_str();
  cmd.add_option("--top-k", s.top_k, "top-k (0: off)" + suffix)->capture_default_str();
  cmd.add_option("--top-p", s.top_p, "top-p (1: off)" + suffix)->capture_default_str();
  cmd.add_option("--min-p", s.min_p, "min-p (0: off)" + suffix)->capture_default_str();
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)" + suffix)->capture_default_str();
  cmd.add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back (-1: all)" + suffix)
      ->capture_default_str();
}

void check_sampler_options(const SamplerOptions& s, int vocab, int max_ctx) {
  check_real_range("--temp", s.temperature, 0.0, 100.0, "0: greedy");
  check_range("--top-k", s.top_k, 0, vocab, "0: off; at most the vocabulary");
  check_real_range("--top-p", s.top_p, 0.0, 1.0, "1: off");
  check_real_range("--min-p", s.min_p, 0.0, 1.0, "0: off");
  check_real_range("--repeat-penalty", s.repeat_penalty, 0.01, 100.0, "1: off");
  check_range("--repeat-last-n", s.repeat_last_n, -1, max_ctx, "-1: all");
}

ProgressOptions progress_options(const RuntimeOptions& r) {
  ProgressOptions p;
  if (r.no_progress) p.mode = ProgressMode::Off;
  return p;
}

bool prefill_with_progress(Engine& engine, int seq, std::span<const int32_t> tokens, float* logits_last,
                           const ProgressOptions& progress, const InterruptScope* interrupt, PrefillState* record) {
  Progress bar("prefill", static_cast<int64_t>(tokens.size()), "tokens", progress);
  if (interrupt && interrupt->interrupted()) return false;
  // One call (a dropping policy places its prompt when the prefill ends); the bar moves and Ctrl-C
  // is seen after every chunk.
  return engine.prefill(seq, tokens, logits_last, nullptr, record, [&](int64_t done) {
    bar.update(done);
    return !(interrupt && interrupt->interrupted());
  });
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

void setup_logging(int verbose) {
  // Logs go to stderr: stdout carries generated text and machine-readable output.
  if (!spdlog::get("hybridgen")) spdlog::set_default_logger(spdlog::stderr_color_mt("hybridgen"));
  spdlog::set_level(verbose >= 2 ? spdlog::level::debug : verbose == 1 ? spdlog::level::info : spdlog::level::warn);
  spdlog::set_pattern("[%^%l%$] %v");
}

}  // namespace hg::cli
