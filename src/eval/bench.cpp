#include "eval/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "attention/layer_attention.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "sched/batch_scheduler.h"

namespace hg::eval {

namespace {

std::pair<double, double> mean_std(const std::vector<double>& v) {
  double mean = 0.0, var = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0.0};
}

int max_of(const std::vector<int>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// Per decode step, summed over layers, between two snapshots of the layer statistics.
void add_stage_times(nlohmann::json& j, const std::vector<LayerStats>& before, const std::vector<LayerStats>& after,
                     double steps) {
  if (after.empty() || before.empty()) return;
  double dev = 0, host = 0, tx = 0, wait = 0, sel = 0;
  for (size_t l = 0; l < after.size(); ++l) {
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
}

}  // namespace

double streamed_weight_bytes(const Model& m) {
  double bytes = 0.0;
  const ModelWeights& w = m.weights;
  for (const auto& l : w.layers)
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      bytes += t->present() ? t->nbytes : 0;
  for (const TensorView* t : {&w.lm_head, &w.project_in, &w.project_out}) bytes += t->present() ? t->nbytes : 0;
  return bytes;
}

std::vector<nlohmann::json> run_bench(const Model& model, const BenchConfig& c, const BenchEngineOptions& options,
                                      const std::function<void(const nlohmann::json&)>& on_row) {
  if (c.reps < 1) throw Error("-r must be at least 1");
  const ModelSpec& spec = model.spec;
  const std::string model_name = spec.name.empty() ? model.source.filename().string() : spec.name;
  const double weight_bytes = streamed_weight_bytes(model);
  const int ctx = c.ctx > 0 ? c.ctx : std::max(max_of(c.prompts), max_of(c.depths)) + max_of(c.gens) + 1;

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, spec.vocab_size - 1);
  std::vector<nlohmann::json> rows;
  auto emit = [&](nlohmann::json j) {
    rows.push_back(std::move(j));
    if (on_row) on_row(rows.back());
  };
  for (const std::string& policy : c.policies)
    for (int t : c.threads)
      for (int b : c.batches) {
        const EngineOptions eo = options(policy, t, b, ctx);
        Engine engine(model, eo);
        std::vector<float> logits(static_cast<size_t>(b) * spec.vocab_size);  // [b, vocab]
        auto base_row = [&](const std::string& test) {
          return nlohmann::json{{"model", model_name},
                                {"size_bytes", static_cast<double>(model.weight_bytes())},
                                {"n_params", static_cast<double>(model.n_params())},
                                {"backend", engine.device().name()},
                                {"threads", t},
                                {"batch", b},
                                {"kv", std::string(dtype_name(eo.kv_dtype))},
                                {"policy", policy},
                                {"attention", engine.describe_attention()},
                                {"test", test}};
        };
        for (int p : c.prompts) {
          if (p == 0) continue;
          std::vector<int32_t> prompt(static_cast<size_t>(p));
          for (auto& id : prompt) id = token(rng);
          std::vector<double> tps;
          for (int r = 0; r < c.reps + 1; ++r) {  // the first run warms caches and pages
            engine.reset_all();
            const auto t0 = std::chrono::steady_clock::now();
            engine.prefill(0, prompt, logits.data());
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (r > 0) tps.push_back(p / s);
          }
          auto [mean, sd] = mean_std(tps);
          nlohmann::json j = base_row("pp" + std::to_string(p));
          j["n_prompt"] = p;
          j["avg_ts"] = mean;
          j["stddev_ts"] = sd;
          j["samples_ts"] = tps;
          emit(std::move(j));
        }
        for (int depth : c.depths)
          for (int n : c.gens) {
            if (n == 0) continue;
            std::vector<int> seqs(static_cast<size_t>(b));
            std::vector<int32_t> toks(static_cast<size_t>(b));
            for (int i = 0; i < b; ++i) seqs[static_cast<size_t>(i)] = i;
            std::vector<int32_t> context(static_cast<size_t>(depth));
            for (auto& id : context) id = token(rng);
            std::vector<double> tps;
            std::vector<LayerStats> before;
            for (int r = 0; r < c.reps + 1; ++r) {
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
            j["n_gen"] = n;
            j["depth"] = depth;
            j["avg_ts"] = mean;
            j["stddev_ts"] = sd;
            j["samples_ts"] = tps;
            // One step reads every weight once for the whole batch.
            j["weight_gbps"] = weight_bytes * (mean / b) / 1e9;
            if (c.peak_gbps > 0) j["peak_fraction"] = j["weight_gbps"].get<double>() / c.peak_gbps;
            const auto memory = engine.attention().memory_report();
            if (!memory.is_null()) {
              j["memory"] = memory;
              j["placement_matched"] = memory["matched"];
            }
            add_stage_times(j, before, engine.layer_stats(), static_cast<double>(c.reps) * n);
            if (engine.scheduler()) j["sched"] = engine.scheduler()->to_json();  // of the last repetition
            emit(std::move(j));
          }
      }
  return rows;
}

}  // namespace hg::eval
