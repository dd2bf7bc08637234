// hybridgen bench: llama-bench-style throughput tables. For every combination of threads (-t),
// batch (-b), prompt length (-p, prefill test "ppN") and generation length (-n, decode test
// "tgN"), run -r repetitions and report mean ± std tokens/s; decode rows also report the weight
// bytes streamed per second and, with --peak-gbps, its fraction of the machine's read bandwidth.
// The measurement is src/eval/bench; here are the options and the printing, and the `bench`
// sweep task.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/eval_tasks.h"
#include "eval/bench.h"
#include "hybridgen/error.h"
#include "device/cpu_info.h"
#include "util/thread_pool.h"

namespace hg::cli {

namespace {

constexpr int kMaxRepetitions = 10000;

struct BenchOptions {
  ModelOptions model;
  RuntimeOptions runtime;
  PolicyOptions policy;
  std::string prompts = "512", gens = "128", batches = "1", threads = "2", depths = "0";
  int reps = 3;
  std::string output = "md";
  std::string depth_fill = "prefill";
  double peak_gbps = 0.0;
};

// A comma list of integers in [lo, hi]; `why` says where the bounds come from.
std::vector<int> parse_bench_list(const std::string& s, const std::string& flag, int lo, int hi, const std::string& why) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(flag + ": '" + item + "' is not an integer");
    }
    check_range(flag, v, lo, hi, why);
    out.push_back(v);
  }
  if (out.empty()) throw Error(flag + ": empty list");
  return out;
}

struct Row {
  nlohmann::json j;
};

void print_rows(const std::vector<Row>& rows, const std::string& format) {
  std::vector<std::string> cols = {"model",   "size", "params", "backend", "policy", "threads",          "batch",
                                   "kv",      "test", "t/s",    "GB/s",    "peak%",  "T_dev/host/tx ms", "h2d B/tok",
                                   "peak RSS"};
  // A GPU's (or the emulated device's) counters of what one decode token asks of it.
  bool counted = false, emulated = false;
  for (const auto& r : rows) {
    counted |= r.j.contains("launches_per_token");
    emulated |= r.j["backend"].get<std::string>().rfind("cuda-emu", 0) == 0;
  }
  if (counted) cols.insert(cols.end(), {"launches/tok", "graphs/tok", "syncs/tok", "d2h B/tok"});
  auto cell = [](const nlohmann::json& j, const std::string& c) -> std::string {
    char buf[64];
    if (c == "size") return format_bytes(j["size_bytes"].get<double>());
    if (c == "params") {
      std::snprintf(buf, sizeof buf, "%.2f M", j["n_params"].get<double>() / 1e6);
      return buf;
    }
    if (c == "t/s") {
      std::snprintf(buf, sizeof buf, "%.2f ± %.2f", j["avg_ts"].get<double>(), j["stddev_ts"].get<double>());
      return buf;
    }
    if (c == "GB/s" || c == "peak%") {
      const char* key = c == "GB/s" ? "weight_gbps" : "peak_fraction";
      if (!j.contains(key)) return "";
      std::snprintf(buf, sizeof buf, c == "GB/s" ? "%.2f" : "%.0f%%", j[key].get<double>() * (c == "GB/s" ? 1.0 : 100.0));
      return buf;
    }
    if (c == "T_dev/host/tx ms") {
      if (!j.contains("t_dev_ms")) return "";
      std::snprintf(buf, sizeof buf, "%.2f / %.2f / %.2f", j["t_dev_ms"].get<double>(), j["t_host_ms"].get<double>(),
                    j["t_tx_ms"].get<double>());
      return buf;
    }
    if (c == "launches/tok" || c == "graphs/tok" || c == "syncs/tok") {
      const char* key = c == "launches/tok" ? "launches_per_token"
                        : c == "graphs/tok" ? "graph_launches_per_token"
                                            : "syncs_per_token";
      if (!j.contains(key)) return "";
      std::snprintf(buf, sizeof buf, "%.1f", j[key].get<double>());
      return buf;
    }
    if (c == "d2h B/tok")
      return j.contains("d2h_bytes_per_token") ? format_bytes(j["d2h_bytes_per_token"].get<double>()) : "";
    if (c == "h2d B/tok") return j.contains("h2d_bytes_per_token") ? format_bytes(j["h2d_bytes_per_token"].get<double>()) : "";
    if (c == "peak RSS") return j.contains("peak_rss_bytes") ? format_bytes(j["peak_rss_bytes"].get<double>()) : "";
    if (!j.contains(c)) return "";
    return j[c].is_string() ? j[c].get<std::string>() : j[c].dump();
  };
  if (format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : rows) arr.push_back(r.j);
    std::printf("%s\n", arr.dump(2).c_str());
  } else if (format == "jsonl") {
    for (const auto& r : rows) std::printf("%s\n", r.j.dump().c_str());
  } else if (format == "csv") {
    std::printf(
        "model,size_bytes,n_params,backend,threads,batch,kv,test,avg_ts,stddev_ts,weight_gbps,cpu_info,cpu_isa\n");
    for (const auto& r : rows) {
      const auto& j = r.j;
      std::printf("%s,%.0f,%.0f,%s,%d,%d,%s,%s,%.4f,%.4f,%s,\"%s\",%s\n", j["model"].get<std::string>().c_str(),
                  j["size_bytes"].get<double>(), j["n_params"].get<double>(), j["backend"].get<std::string>().c_str(),
                  j["threads"].get<int>(), j["batch"].get<int>(), j["kv"].get<std::string>().c_str(),
                  j["test"].get<std::string>().c_str(), j["avg_ts"].get<double>(), j["stddev_ts"].get<double>(),
                  j.contains("weight_gbps") ? std::to_string(j["weight_gbps"].get<double>()).c_str() : "",
                  j["cpu_info"].get<std::string>().c_str(), j["cpu_isa"].get<std::string>().c_str());
    }
  } else {
    std::string line = "|", sep = "|";
    for (const auto& c : cols) {
      line += " " + c + " |";
      sep += " --- |";
    }
    std::printf("cpu: %s\n", cpu_summary().c_str());
    if (emulated)
      std::printf(
          "cuda-emu: the CUDA code emulated on the CPU, a test instrument: its t/s are not GPU figures; its "
          "launches, syncs and bytes per token are what a GPU would be asked to do\n");
    std::printf("\n%s\n%s\n", line.c_str(), sep.c_str());
    for (const auto& r : rows) {
      line = "|";
      for (const auto& c : cols) line += " " + cell(r.j, c) + " |";
      std::printf("%s\n", line.c_str());
    }
    // What the device chose for each policy's knobs left to it, once per policy.
    std::vector<std::string> said;
    for (const auto& r : rows) {
      const std::string policy = r.j["policy"].get<std::string>();
      const std::string chosen = r.j.value("device_defaults", std::string());
      if (chosen.empty() || std::find(said.begin(), said.end(), policy) != said.end()) continue;
      said.push_back(policy);
      std::printf("%s%s: %s\n", said.size() == 1 ? "\n" : "", policy.c_str(), chosen.c_str());
    }
  }
  std::fflush(stdout);
}

// The entry of a --policy list a bench row's label names.
const PolicyEntry& entry_of(const std::vector<PolicyEntry>& entries, const std::string& label) {
  for (const PolicyEntry& e : entries)
    if (e.label == label) return e;
  throw Error("--policy: no entry '" + label + "'");
}

void add_bench_options(CLI::App& cmd, BenchOptions& o) {
  add_model_options(cmd, o.model);
  add_runtime_options(cmd, o.runtime);
  add_policy_options(cmd, o.policy, /*preset_list=*/true);
  cmd.remove_option(cmd.get_option("--threads"));
  cmd.add_option("-t,--threads", o.threads, "comma list of thread counts")->capture_default_str();
  cmd.add_option("-p,--n-prompt", o.prompts, "comma list of prompt lengths (0: skip prefill tests)")->capture_default_str();
  cmd.add_option("-n,--n-gen", o.gens, "comma list of generation lengths (0: skip decode tests)")->capture_default_str();
  cmd.add_option("-d,--depth", o.depths, "comma list of context depths decode tests start at")->capture_default_str();
  cmd.add_option("-b,--batch", o.batches, "comma list of batch sizes (sequences decoded together)")->capture_default_str();
  cmd.add_option("-r,--repetitions", o.reps, "repetitions of each test")->capture_default_str();
  cmd.add_option("--peak-gbps", o.peak_gbps, "measured read bandwidth (build/bin/membw) to report decode's fraction of it");
  cmd.add_option("--depth-fill", o.depth_fill,
                 "how decode tests reach their depth: prefill (run a random prompt, once per depth for every policy "
                 "whose prefill is exact; the other runs load its state) or random (seeded random K/V, labelled in the "
                 "output)")
      ->capture_default_str();
}

// max_ctx: the model's context (lengths are checked against it), 0 before the model is loaded.
eval::BenchConfig bench_config(const BenchOptions& o, int max_ctx) {
  check_range("-r", o.reps, 1, kMaxRepetitions);
  check_real_range("--peak-gbps", o.peak_gbps, 0.0, 1e6, "GB/s");
  eval::BenchConfig c;
  // The list grammar of every command (eval --task ruler's too): preset[:knob=value...], each
  // entry a row label of its own, so variants of one preset run side by side.
  c.policies.clear();
  for (const PolicyEntry& e : parse_policy_list(o.policy.preset)) {
    if (std::find(c.policies.begin(), c.policies.end(), e.label) != c.policies.end())
      throw Error("--policy: '" + e.label + "' is listed twice");
    c.policies.push_back(e.label);
  }
  c.batches = parse_bench_list(o.batches, "-b", 1, kMaxBatch, "sequences decoded together");
  c.threads = parse_bench_list(o.threads, "-t", 1, hardware_threads(), "the CPUs of this machine");
  const int ctx_hi = max_ctx > 0 ? std::max(max_ctx, o.runtime.ctx) : std::numeric_limits<int>::max();
  const std::string ctx_why = max_ctx > 0 ? "the model's context" : "";
  c.prompts = parse_bench_list(o.prompts, "-p", 0, ctx_hi, ctx_why);
  c.gens = parse_bench_list(o.gens, "-n", 0, ctx_hi, ctx_why);
  c.depths = parse_bench_list(o.depths, "-d", 0, ctx_hi, ctx_why);
  c.reps = o.reps;
  c.ctx = o.runtime.ctx;
  c.peak_gbps = o.peak_gbps;
  if (o.depth_fill != "prefill" && o.depth_fill != "random")
    throw Error("--depth-fill: '" + o.depth_fill + "' is not one of prefill, random");
  c.random_fill = o.depth_fill == "random";
  return c;
}

void check_bench_options(const BenchOptions& o) {
  bench_config(o, 0);
  const std::vector<PolicyEntry> entries = parse_policy_list(o.policy.preset);
  for (const PolicyEntry& e : entries)
    check_engine_options(o.runtime, entry_options(o.policy, e), e.preset, entry_presets(entries));
}

std::vector<nlohmann::json> measure_bench(const BenchOptions& o, const Model& model, const ProgressOptions& progress) {
  const eval::BenchConfig c = bench_config(o, model.spec.max_ctx);
  const std::vector<PolicyEntry> entries = parse_policy_list(o.policy.preset);
  auto options = [&](const std::string& label, int threads, int batch, int ctx) {
    RuntimeOptions rt = o.runtime;
    rt.threads = threads;
    EngineOptions eo = engine_options(rt, model.spec, ctx, batch);
    const PolicyEntry& e = entry_of(entries, label);
    apply_policy_options(entry_options(o.policy, e), e.preset, eo, entry_presets(entries));
    return eo;
  };
  // One progress report over every timed and warm-up run of the grid.
  Progress bar("bench", c.runs(), "runs", progress);
  eval::BenchHooks hooks;
  hooks.on_run = [&](const std::string& status) { bar.advance(1, status); };
  auto rows = eval::run_bench(model, c, options, hooks);
  bar.finish();
  return rows;
}

void run_bench(const BenchOptions& o) {
  setup_logging(o.runtime.verbose);
  if (o.output != "md" && o.output != "csv" && o.output != "json" && o.output != "jsonl")
    throw Error("-o: '" + o.output + "' is not one of md, csv, json, jsonl");
  check_bench_options(o);
  auto model = load_model(o.model);
  std::vector<Row> rows;
  for (auto& j : measure_bench(o, *model, progress_options(o.runtime))) rows.push_back({std::move(j)});
  print_rows(rows, o.output);
}

// As a sweep task: one point's rows, with the decode row's numbers (when the point has exactly
// one decode test) lifted to the top level for plots.
class BenchTask : public TaskRun {
 public:
  explicit BenchTask(CLI::App& app) { add_bench_options(app, o_); }
  void check() const override { check_bench_options(o_); }
  nlohmann::json run(TaskContext& ctx) override {
    setup_logging(o_.runtime.verbose);
    const std::vector<nlohmann::json> rows =
        measure_bench(o_, ctx.models.model(o_.model), task_progress(ctx, o_.runtime));
    nlohmann::json j = {{"rows", rows}};
    int pp = 0, tg = 0;
    for (const auto& r : rows) (r.contains("n_gen") ? tg : pp) += 1;
    for (const auto& r : rows) {
      j["device"] = r["backend"];
      if (r.contains("n_gen") && tg == 1) {
        j["decode_tps"] = r["avg_ts"];
        j["decode_tps_std"] = r["stddev_ts"];
        j["decode_ms_per_token"] = 1e3 / r["avg_ts"].get<double>() * r["batch"].get<double>();
        for (const char* k : {"t_dev_ms", "t_host_ms", "t_tx_ms", "t_wait_ms", "selected_per_layer", "weight_gbps"})
          if (r.contains(k)) j[k] = r[k];
      }
      if (!r.contains("n_gen") && pp == 1) {
        j["prefill_tps"] = r["avg_ts"];
        j["prefill_tps_std"] = r["stddev_ts"];
      }
    }
    return j;
  }

 private:
  BenchOptions o_;
};

}  // namespace

std::unique_ptr<TaskRun> bind_bench_task(CLI::App& app) { return std::make_unique<BenchTask>(app); }

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "llama-bench-style prefill (ppN) and decode (tgN) throughput");
  add_bench_options(*cmd, *o);
  cmd->add_option("-o,--output", o->output, "md|csv|json|jsonl")->capture_default_str();
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace hg::cli
