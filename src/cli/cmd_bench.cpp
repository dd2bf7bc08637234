// hybridgen bench: llama-bench-style throughput tables. For every combination of threads (-t),
// batch (-b), prompt length (-p, prefill test "ppN") and generation length (-n, decode test
// "tgN"), run -r repetitions and report mean ± std tokens/s; decode rows also report the weight
// bytes streamed per second and, with --peak-gbps, its fraction of the machine's read bandwidth.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "attention/layer_attention.h"
#include "device/device.h"
#include "hybridgen/error.h"

namespace hg::cli {

namespace {

struct BenchOptions {
  ModelOptions model;
  RuntimeOptions runtime;
  PolicyOptions policy;
  std::string prompts = "512", gens = "128", batches = "1", threads = "2", depths = "0";
  int reps = 3;
  std::string output = "md";
  double peak_gbps = 0.0;
};

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
  static const char* cols[] = {"model", "size", "params", "backend", "policy", "threads", "batch", "kv", "test", "t/s", "GB/s", "peak%", "T_dev/host/tx ms", "h2d B/tok"};
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
    if (c == "h2d B/tok") {
      if (!j.contains("h2d_bytes_per_token")) return "";
      std::snprintf(buf, sizeof buf, "%.0f", j["h2d_bytes_per_token"].get<double>());
      return buf;
    }
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
    std::printf("model,size_bytes,n_params,backend,threads,batch,kv,test,avg_ts,stddev_ts,weight_gbps\n");
    for (const auto& r : rows) {
      const auto& j = r.j;
      std::printf("%s,%.0f,%.0f,%s,%d,%d,%s,%s,%.4f,%.4f,%s\n", j["model"].get<std::string>().c_str(),
                  j["size_bytes"].get<double>(), j["n_params"].get<double>(), j["backend"].get<std::string>().c_str(),
                  j["threads"].get<int>(), j["batch"].get<int>(), j["kv"].get<std::string>().c_str(),
                  j["test"].get<std::string>().c_str(), j["avg_ts"].get<double>(), j["stddev_ts"].get<double>(),
                  j.contains("weight_gbps") ? std::to_string(j["weight_gbps"].get<double>()).c_str() : "");
    }
  } else {
    std::string line = "|", sep = "|";
    for (const char* c : cols) {
      line += " " + std::string(c) + " |";
      sep += " --- |";
    }
    std::printf("%s\n%s\n", line.c_str(), sep.c_str());
    for (const auto& r : rows) {
      line = "|";
      for (const char* c : cols) line += " " + cell(r.j, c) + " |";
      std::printf("%s\n", line.c_str());
    }
  }
  std::fflush(stdout);
}

std::pair<double, double> mean_std(const std::vector<double>& v) {
  double mean = 0.0, var = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0.0};
}

void run_bench(const BenchOptions& o) {
  setup_logging(o.runtime.verbose);
  if (o.output != "md" && o.output != "csv" && o.output != "json" && o.output != "jsonl")
    throw Error("-o: '" + o.output + "' is not one of md, csv, json, jsonl");
  if (o.reps < 1) throw Error("-r must be at least 1");
  const auto prompts = parse_list(o.prompts, "-p", 0);
  const auto gens = parse_list(o.gens, "-n", 0);
  const auto batches = parse_list(o.batches, "-b", 1);
  const auto threads = parse_list(o.threads, "-t", 1);
  auto model = load_model(o.model);
  const ModelSpec& spec = model->spec;
  int max_p = 0, max_n = 0;
  for (int p : prompts) max_p = std::max(max_p, p);
  for (int n : gens) max_n = std::max(max_n, n);
  const auto depths = parse_list(o.depths, "-d", 0);
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
        return nlohmann::json{{"model", model_name}, {"size_bytes", static_cast<double>(model->weight_bytes())},
                              {"n_params", static_cast<double>(model->n_params())}, {"backend", engine.device().name()},
                              {"threads", t}, {"batch", b}, {"kv", rt.kv_dtype}, {"policy", policy},
                              {"attention", engine.describe_attention()}, {"test", test}};
      };
      for (int p : prompts) {
        if (p == 0) continue;
        std::vector<int32_t> prompt(static_cast<size_t>(p));
        for (auto& id : prompt) id = token(rng);
        std::vector<double> tps;
        for (int r = 0; r < o.reps + 1; ++r) {  // first run warms caches and pages
          engine.reset_all();
          const auto t0 = std::chrono::steady_clock::now();
          engine.prefill(0, prompt, logits.data());
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) tps.push_back(p / s);
        }
        auto [mean, sd] = mean_std(tps);
        nlohmann::json j = base_row("pp" + std::to_string(p));
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
        std::vector<LayerStats> before;
        for (int r = 0; r < o.reps + 1; ++r) {
          engine.reset_all();
          // Decode at a context depth: the prompt is not timed (llama-bench's -d).
          for (int i = 0; i < b && depth > 0; ++i) engine.prefill(i, context, nullptr);
          if (r == 1) before = engine.layer_stats();
          const auto t0 = std::chrono::steady_clock::now();
          for (int step = 0; step < n; ++step) {
            for (auto& id : toks) id = token(rng);
            engine.decode(seqs, toks, logits.data());
          }
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) tps.push_back(static_cast<double>(n) * b / s);
        }
        auto [mean, sd] = mean_std(tps);
        nlohmann::json j = base_row("tg" + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : ""));
        j["depth"] = depth;
        j["avg_ts"] = mean;
        j["stddev_ts"] = sd;
        j["samples_ts"] = tps;
        // One step reads every weight once for the whole batch.
        j["weight_gbps"] = weight_bytes * (mean / b) / 1e9;
        if (o.peak_gbps > 0) j["peak_fraction"] = j["weight_gbps"].get<double>() / o.peak_gbps;
        const auto memory = engine.attention().memory_report();
        if (!memory.is_null()) {
          j["memory"] = memory;
          j["placement_matched"] = memory["matched"];
        }
        const auto after = engine.layer_stats();
        if (!after.empty() && !before.empty()) {
          // Per decode step, summed over layers, for the timed repetitions.
          double dev = 0, host = 0, tx = 0, wait = 0, sel = 0, bytes = 0, steps = static_cast<double>(o.reps) * n;
          for (size_t l = 0; l < after.size(); ++l) {
            bytes += static_cast<double>(after[l].bytes_h2d - before[l].bytes_h2d);
            dev += after[l].t_dev() - before[l].t_dev();
            host += after[l].t_host - before[l].t_host;
            tx += after[l].t_tx - before[l].t_tx;
            wait += after[l].t_wait - before[l].t_wait;
            sel += static_cast<double>(after[l].selected - before[l].selected);
          }
          j["t_dev_ms"] = dev / steps * 1e3;
          j["t_host_ms"] = host / steps * 1e3;
          j["t_tx_ms"] = tx / steps * 1e3;
          j["t_wait_ms"] = wait / steps * 1e3;
          j["selected_per_layer"] = sel / steps / static_cast<double>(after.size());
          j["h2d_bytes_per_token"] = bytes / (steps * b);
        }
        rows.push_back({j});
      }
    }
  }
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
  cmd->add_option("--peak-gbps", o->peak_gbps, "measured read bandwidth (build/bin/membw) to report decode's fraction of it");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace hg::cli
