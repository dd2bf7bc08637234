// hybridgen bench: llama-bench-style throughput tables. For every combination of threads (-t),
// batch (-b), prompt length (-p, prefill test "ppN") and generation length (-n, decode test
// "tgN"), run -r repetitions and report mean ± std tokens/s; decode rows also report the weight
// bytes streamed per second and, with --peak-gbps, its fraction of the machine's read bandwidth.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "attention/layer_attention.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "util/cpu_info.h"
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
std::vector<int> parse_list(const std::string& s, const std::string& flag, int lo, int hi, const std::string& why) {
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

// Bytes of weights one decode step streams: every matrix a matmul reads in full (embedding
// tables are only read row by row, unless tied to the output head).
double streamed_weight_bytes(const Model& m) {
  double bytes = 0.0;
  const ModelWeights& w = m.weights;
  for (const auto& l : w.layers)
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) bytes += t->present() ? t->nbytes : 0;
  for (const TensorView* t : {&w.lm_head, &w.project_in, &w.project_out}) bytes += t->present() ? t->nbytes : 0;
  return bytes;
}

struct Row {
  nlohmann::json j;
};

void print_rows(const std::vector<Row>& rows, const std::string& format) {
  static const char* cols[] = {"model", "size", "params", "backend", "policy", "threads", "batch", "kv", "test", "t/s", "GB/s", "peak%", "T_dev/host/tx ms", "h2d B/tok", "peak RSS"};
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
    for (const char* c : cols) {
      line += " " + std::string(c) + " |";
      sep += " --- |";
    }
    std::printf("cpu: %s\n\n%s\n%s\n", cpu_summary().c_str(), line.c_str(), sep.c_str());
    for (const auto& r : rows) {
      line = "|";
      for (const char* c : cols) line += " " + cell(r.j, c) + " |";
      std::printf("%s\n", line.c_str());
    }
  }
  std::fflush(stdout);
}

// Peak resident set of this process so far (bytes): run one configuration per process to read it
// as that configuration's peak.
double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

// CPU time of this process so far (user + system, all threads, s). On a shared machine the CPU
// time of a run is much less disturbed than its wall time (it only counts what this process ran).
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

// Attention-stage statistics of the timed decode steps, summed over layers and repetitions.
struct DecodeStats {
  double dev = 0, host = 0, tx = 0, wait = 0, selected = 0, bytes_h2d = 0;
  int layers = 0;
  void add(const std::vector<LayerStats>& before, const std::vector<LayerStats>& after) {
    layers = static_cast<int>(after.size());
    for (size_t l = 0; l < after.size() && l < before.size(); ++l) {
      dev += after[l].t_dev() - before[l].t_dev();
      host += after[l].t_host - before[l].t_host;
      tx += after[l].t_tx - before[l].t_tx;
      wait += after[l].t_wait - before[l].t_wait;
      selected += static_cast<double>(after[l].selected - before[l].selected);
      bytes_h2d += static_cast<double>(after[l].bytes_h2d - before[l].bytes_h2d);
    }
  }
};

std::pair<double, double> mean_std(const std::vector<double>& v) {
  double mean = 0.0, var = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0.0};
}

std::string run_status(const std::string& policy, const std::string& test, int threads, int batch) {
  return policy + " " + test + " t" + std::to_string(threads) + " b" + std::to_string(batch);
}

void run_bench(const BenchOptions& o) {
  setup_logging(o.runtime.verbose);
  if (o.output != "md" && o.output != "csv" && o.output != "json" && o.output != "jsonl")
    throw Error("-o: '" + o.output + "' is not one of md, csv, json, jsonl");
  check_range("-r", o.reps, 1, kMaxRepetitions);
  check_real_range("--peak-gbps", o.peak_gbps, 0.0, 1e6, "GB/s");
  const auto batches = parse_list(o.batches, "-b", 1, kMaxBatch, "sequences decoded together");
  const auto threads = parse_list(o.threads, "-t", 1, hardware_threads(), "the CPUs of this machine");
  if (o.depth_fill != "prefill" && o.depth_fill != "random")
    throw Error("--depth-fill: '" + o.depth_fill + "' is not one of prefill, random");
  const bool random_fill = o.depth_fill == "random";
  auto model = load_model(o.model);
  const ModelSpec& spec = model->spec;
  const int max_ctx = std::max(spec.max_ctx, o.runtime.ctx);
  const std::string ctx_why = "the model's context";
  const auto prompts = parse_list(o.prompts, "-p", 0, max_ctx, ctx_why);
  const auto gens = parse_list(o.gens, "-n", 0, max_ctx, ctx_why);
  const auto depths = parse_list(o.depths, "-d", 0, max_ctx, ctx_why);
  int max_p = 0, max_n = 0;
  for (int p : prompts) max_p = std::max(max_p, p);
  for (int n : gens) max_n = std::max(max_n, n);
  int max_d = 0;
  for (int d : depths) max_d = std::max(max_d, d);
  const std::string model_name = spec.name.empty() ? model->source.filename().string() : spec.name;
  const double weight_bytes = streamed_weight_bytes(*model);

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, spec.vocab_size - 1);
  std::vector<Row> rows;
  std::vector<std::string> policies;
  {
    std::stringstream ss(o.policy.preset);
    std::string item;
    while (std::getline(ss, item, ',')) policies.push_back(item);
  }
  // One progress report over every timed and warm-up run of the grid.
  int64_t tests_per_engine = 0;
  for (int p : prompts) tests_per_engine += p > 0;
  for (int n : gens) tests_per_engine += static_cast<int64_t>(depths.size()) * (n > 0);
  Progress progress(
      "bench",
      static_cast<int64_t>(policies.size() * threads.size() * batches.size()) * tests_per_engine * (o.reps + 1), "runs",
      progress_options(o.runtime));
  for (const std::string& policy : policies)
  for (int t : threads) {
    for (int b : batches) {
      RuntimeOptions rt = o.runtime;
      rt.threads = t;
      const int ctx = o.runtime.ctx > 0 ? o.runtime.ctx : std::max(max_p, max_d) + max_n + 1;
      EngineOptions eo = engine_options(rt, spec, ctx, b);
      apply_policy_options(o.policy, policy, eo, policies);
      Engine engine(*model, eo);
      std::vector<float> logits(static_cast<size_t>(b) * spec.vocab_size);
      auto base_row = [&](const std::string& test) {
        return nlohmann::json{{"model", model_name},
                              {"size_bytes", static_cast<double>(model->weight_bytes())},
                              {"n_params", static_cast<double>(model->n_params())},
                              {"backend", engine.device().name()},
                              {"threads", t},
                              {"batch", b},
                              {"kv", rt.kv_dtype},
                              {"policy", policy},
                              {"attention", engine.describe_attention()},
                              {"test", test},
                              {"cpu_info", cpu_summary()},
                              {"cpu_isa", cpu_info().isa}};
      };
      for (int p : prompts) {
        if (p == 0) continue;
        std::vector<int32_t> prompt(static_cast<size_t>(p));
        for (auto& id : prompt) id = token(rng);
        std::vector<double> tps;
        double cpu = 0;
        for (int r = 0; r < o.reps + 1; ++r) {  // first run warms caches and pages
          engine.reset_all();
          const double c0 = process_cpu_seconds();
          const auto t0 = std::chrono::steady_clock::now();
          engine.prefill(0, prompt, logits.data());
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) {
            tps.push_back(p / s);
            cpu += process_cpu_seconds() - c0;
          progress.advance(1, run_status(policy, "pp" + std::to_string(p), t, b));
          }
        }
        auto [mean, sd] = mean_std(tps);
        nlohmann::json j = base_row("pp" + std::to_string(p));
        j["cpu_seconds_per_run"] = cpu / o.reps;
        j["avg_ts"] = mean;
        j["stddev_ts"] = sd;
        j["samples_ts"] = tps;
        rows.push_back({j});
      }
      for (int depth : depths)
      for (int n : gens) {
        if (n == 0) continue;
        std::vector<int> seqs(static_cast<size_t>(b));
        std::vector<int32_t> toks(static_cast<size_t>(b));
        for (int i = 0; i < b; ++i) seqs[static_cast<size_t>(i)] = i;
        std::vector<int32_t> context(static_cast<size_t>(depth));
        for (auto& id : context) id = token(rng);
        std::vector<double> tps;
        double cpu = 0;
        DecodeStats stats;
        for (int r = 0; r < o.reps + 1; ++r) {
          engine.reset_all();
          // Decode at a context depth: filling the context is not timed (llama-bench's -d). A
          // random fill writes seeded random K/V instead of running the prompt (seconds, not a
          // quadratic prefill): the speed of decode at that depth, not its quality.
          for (int i = 0; i < b && depth > 0; ++i) {
            if (random_fill)
              engine.fill_random(i, depth, 1234 + static_cast<uint64_t>(i));
            else
              engine.prefill(i, context, nullptr);
          }
          const auto before = engine.layer_stats();
          const double c0 = process_cpu_seconds();
          const auto t0 = std::chrono::steady_clock::now();
          for (int step = 0; step < n; ++step) {
            for (auto& id : toks) id = token(rng);
            engine.decode(seqs, toks, logits.data());
          }
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) {
            tps.push_back(static_cast<double>(n) * b / s);
            cpu += process_cpu_seconds() - c0;
            stats.add(before, engine.layer_stats());
          progress.advance(
              1, run_status(policy, "tg" + std::to_string(n) + (depth > 0 ? "@d" + std::to_string(depth) : ""), t, b));
          }
        }
        auto [mean, sd] = mean_std(tps);
        const std::string fill_label = depth > 0 && random_fill ? " (random KV)" : "";
        nlohmann::json j = base_row("tg" + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : "") + fill_label);
        j["depth"] = depth;
        j["depth_fill"] = depth > 0 ? o.depth_fill : "none";
        j["avg_ts"] = mean;
        j["stddev_ts"] = sd;
        j["samples_ts"] = tps;
        j["ms_per_token"] = 1e3 / mean;
        j["cpu_ms_per_token"] = cpu * 1e3 / (static_cast<double>(o.reps) * n * b);
        // One step reads every weight once for the whole batch.
        j["weight_gbps"] = weight_bytes * (mean / b) / 1e9;
        if (o.peak_gbps > 0) j["peak_fraction"] = j["weight_gbps"].get<double>() / o.peak_gbps;
        const auto memory = engine.attention().memory_report();
        if (!memory.is_null()) {
          j["memory"] = memory;
          j["placement_matched"] = memory["matched"];
        }
        const double steps = static_cast<double>(o.reps) * n;
        j["h2d_bytes_per_token"] = stats.bytes_h2d / (steps * b);
        j["peak_rss_bytes"] = peak_rss_bytes();
        if (stats.layers > 0) {
          // Per decode step, summed over layers, for the timed repetitions.
          j["t_dev_ms"] = stats.dev / steps * 1e3;
          j["t_host_ms"] = stats.host / steps * 1e3;
          j["t_tx_ms"] = stats.tx / steps * 1e3;
          j["t_wait_ms"] = stats.wait / steps * 1e3;
          j["selected_per_layer"] = stats.selected / steps / stats.layers;
        }
        rows.push_back({j});
      }
    }
  }
  progress.finish();
  print_rows(rows, o.output);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "llama-bench-style prefill (ppN) and decode (tgN) throughput");
  add_model_options(*cmd, o->model);
  add_runtime_options(*cmd, o->runtime);
  add_policy_options(*cmd, o->policy, /*preset_list=*/true);
  cmd->remove_option(cmd->get_option("--threads"));
  cmd->add_option("-t,--threads", o->threads, "comma list of thread counts")->capture_default_str();
  cmd->add_option("-p,--n-prompt", o->prompts, "comma list of prompt lengths (0: skip prefill tests)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->gens, "comma list of generation lengths (0: skip decode tests)")->capture_default_str();
  cmd->add_option("-d,--depth", o->depths, "comma list of context depths decode tests start at")->capture_default_str();
  cmd->add_option("-b,--batch", o->batches, "comma list of batch sizes (sequences decoded together)")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->reps, "repetitions of each test")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "md|csv|json|jsonl")->capture_default_str();
  cmd->add_option("--depth-fill", o->depth_fill,
                  "how decode tests reach their depth: prefill (run a random prompt) or random (seeded random K/V, "
                  "seconds; measures speed, not quality)")
      ->capture_default_str();
  cmd->add_option("--peak-gbps", o->peak_gbps, "measured read bandwidth (build/bin/membw) to report decode's fraction of it");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace hg::cli
