#include "eval/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include <sys/resource.h>

#include "attention/layer_attention.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "device/cpu_info.h"
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

// Attention-stage statistics of the timed decode steps, summed over layers and repetitions
// (each repetition's delta: the untimed fills in between are not counted).
struct DecodeStats {
  double dev = 0, host = 0, tx = 0, wait = 0, selected = 0, bytes_h2d = 0;
  int layers = 0;
  // What the device was asked to do (a GPU or the emulated one; none on the CPU device).
  bool counted = false;
  DeviceCounters device;
  void add(const std::optional<DeviceCounters>& before, const std::optional<DeviceCounters>& after) {
    if (!before || !after) return;
    counted = true;
    device.launches += after->launches - before->launches;
    device.graph_launches += after->graph_launches - before->graph_launches;
    device.syncs += after->syncs - before->syncs;
    device.h2d_bytes += after->h2d_bytes - before->h2d_bytes;
    device.d2h_bytes += after->d2h_bytes - before->d2h_bytes;
  }
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
  // Per decode step, summed over layers; bytes per generated token.
  void write(nlohmann::json& j, double steps, int batch) const {
    const double tokens = steps * batch;
    j["h2d_bytes_per_token"] = bytes_h2d / tokens;  // what the attention stage shipped
    if (counted) {                                  // what crossed to the device, counted by the device
      j["launches_per_token"] = static_cast<double>(device.launches) / tokens;
      j["graph_launches_per_token"] = static_cast<double>(device.graph_launches) / tokens;
      j["syncs_per_token"] = static_cast<double>(device.syncs) / tokens;
      j["h2d_bytes_per_token"] = static_cast<double>(device.h2d_bytes) / tokens;
      j["d2h_bytes_per_token"] = static_cast<double>(device.d2h_bytes) / tokens;
    }
    if (layers == 0) return;
    j["t_dev_ms"] = dev / steps * 1e3;
    j["t_host_ms"] = host / steps * 1e3;
    j["t_tx_ms"] = tx / steps * 1e3;
    j["t_wait_ms"] = wait / steps * 1e3;
    j["selected_per_layer"] = selected / steps / layers;
  }
};

// One combination of a run: a policy at a thread count and a batch size, with its engine.
struct BenchCombo {
  const std::string& policy;
  int threads, batch;
  const EngineOptions& options;
  Engine& engine;
  std::vector<float>& logits;  // [batch, vocab]
};

// The timed repetitions of a decode test: tokens/s of each, and what they cost.
struct DecodeTiming {
  std::vector<double> tps;
  double cpu = 0;  // CPU seconds
  DecodeStats stats;
};

// The tests of a run, in order, and what they share: one generator of random tokens for the whole
// run (drawn in test order), the recorded prefills of the depths, and the rows so far.
class BenchRunner {
 public:
  BenchRunner(const Model& model, const BenchConfig& c, const BenchHooks& hooks)
      : model_(model),
        c_(c),
        hooks_(hooks),
        model_name_(model.spec.name.empty() ? model.source.filename().string() : model.spec.name),
        weight_bytes_(streamed_weight_bytes(model)),
        token_(0, model.spec.vocab_size - 1) {}

  // ppN: the prefill of N random tokens.
  void prefill_test(const BenchCombo& k, int p);
  // tgN @ dD: N decode steps of the whole batch from a context of D tokens.
  void decode_test(const BenchCombo& k, int depth, int n);
  std::vector<nlohmann::json> take_rows() { return std::move(rows_); }

 private:
  DecodeTiming time_decode(const BenchCombo& k, int depth, int n);
  void fill_depth(Engine& engine, int seq, int depth);
  std::vector<int32_t> depth_context(int depth);
  nlohmann::json base_row(const BenchCombo& k, const std::string& test) const;
  void ran(const BenchCombo& k, const std::string& test) const {
    if (hooks_.on_run)
      hooks_.on_run(k.policy + " " + test + " t" + std::to_string(k.threads) + " b" + std::to_string(k.batch));
  }
  void emit(nlohmann::json j) {
    rows_.push_back(std::move(j));
    if (hooks_.on_row) hooks_.on_row(rows_.back());
  }

  const Model& model_;
  const BenchConfig& c_;
  const BenchHooks& hooks_;
  const std::string model_name_;
  const double weight_bytes_;
  std::mt19937 rng_{1234};
  std::uniform_int_distribution<int32_t> token_;
  std::vector<nlohmann::json> rows_;
  // --depth-fill prefill: the context of each depth (seeded by the depth: the same for every
  // policy), prefilled once and recorded; every repetition of every policy whose prefill is exact
  // attention starts from that state (Engine::load_state), which is what its own prefill would
  // leave, in seconds instead of minutes at 32K. A policy that keeps tokens by prompt scores the
  // state lacks (the first h2o or keyformer row) records it again, with them; streaming, h2o and
  // keyformer with --exact-prefill false prefill each time.
  std::map<int, PrefillState> depth_states_;
  int depth_prefills_ = 0, depth_loads_ = 0;  // of the current row
};

nlohmann::json BenchRunner::base_row(const BenchCombo& k, const std::string& test) const {
  return nlohmann::json{{"model", model_name_},
                        {"size_bytes", static_cast<double>(model_.weight_bytes())},
                        {"n_params", static_cast<double>(model_.n_params())},
                        {"backend", k.engine.device().name()},
                        {"threads", k.threads},
                        {"batch", k.batch},
                        {"ubatch", k.engine.options().ubatch},
                        {"kv", std::string(dtype_name(k.options.kv_dtype))},
                        {"policy", k.policy},
                        {"attention", k.engine.describe_attention()},
                        {"device_defaults", k.engine.device_defaults()},
                        {"test", test},
                        {"cpu_info", cpu_summary()},
                        {"cpu_isa", cpu_info().isa}};
}

std::vector<int32_t> BenchRunner::depth_context(int depth) {
  std::mt19937 r(static_cast<uint32_t>(4321 + depth));
  std::vector<int32_t> context(static_cast<size_t>(depth));
  for (auto& id : context) id = token_(r);
  return context;
}

void BenchRunner::fill_depth(Engine& engine, int seq, int depth) {
  auto it = depth_states_.find(depth);
  if (engine.exact_prefill() && it != depth_states_.end() && it->second.holds_scores(engine.prompt_scores())) {
    engine.load_state(seq, it->second, nullptr);
    ++depth_loads_;
    return;
  }
  ++depth_prefills_;
  if (!engine.exact_prefill()) {
    engine.prefill(seq, depth_context(depth), nullptr);
    return;
  }
  PrefillState s;
  if (it != depth_states_.end()) s.score_names = it->second.score_names;  // the earlier rows' too
  engine.prefill(seq, depth_context(depth), nullptr, nullptr, &s);
  depth_states_.insert_or_assign(depth, std::move(s));
}

void BenchRunner::prefill_test(const BenchCombo& k, int p) {
  std::vector<int32_t> prompt(static_cast<size_t>(p));
  for (auto& id : prompt) id = token_(rng_);
  std::vector<double> tps;
  double cpu = 0;
  for (int r = 0; r < c_.reps + 1; ++r) {  // the first run warms caches and pages
    k.engine.reset_all();
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    k.engine.prefill(0, prompt, k.logits.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) {
      tps.push_back(p / s);
      cpu += process_cpu_seconds() - c0;
    }
    ran(k, "pp" + std::to_string(p));
  }
  auto [mean, sd] = mean_std(tps);
  nlohmann::json j = base_row(k, "pp" + std::to_string(p));
  j["n_prompt"] = p;
  j["cpu_seconds_per_run"] = cpu / c_.reps;
  j["avg_ts"] = mean;
  j["stddev_ts"] = sd;
  j["samples_ts"] = tps;
  emit(std::move(j));
}

DecodeTiming BenchRunner::time_decode(const BenchCombo& k, int depth, int n) {
  const int b = k.batch;
  Engine& engine = k.engine;
  std::vector<int> seqs(static_cast<size_t>(b));
  std::vector<int32_t> toks(static_cast<size_t>(b));
  for (int i = 0; i < b; ++i) seqs[static_cast<size_t>(i)] = i;
  DecodeTiming d;
  depth_prefills_ = depth_loads_ = 0;
  for (int r = 0; r < c_.reps + 1; ++r) {
    engine.reset_all();
    // Decode at a context depth: filling the context is not timed (llama-bench's -d).
    for (int i = 0; i < b && depth > 0; ++i) {
      if (c_.random_fill)
        engine.fill_random(i, depth, 1234 + static_cast<uint64_t>(i));
      else
        fill_depth(engine, i, depth);
    }
    const auto before = engine.layer_stats();
    const auto counters_before = engine.device().counters();
    const double c0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < n; ++step) {
      for (auto& id : toks) id = token_(rng_);
      engine.decode(seqs, toks, k.logits.data());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) {
      d.tps.push_back(static_cast<double>(n) * b / s);
      d.cpu += process_cpu_seconds() - c0;
      d.stats.add(before, engine.layer_stats());
      d.stats.add(counters_before, engine.device().counters());
    }
    ran(k, "tg" + std::to_string(n) + (depth > 0 ? "@d" + std::to_string(depth) : ""));
  }
  return d;
}

void BenchRunner::decode_test(const BenchCombo& k, int depth, int n) {
  const DecodeTiming d = time_decode(k, depth, n);
  auto [mean, sd] = mean_std(d.tps);
  const std::string fill_label = depth > 0 && c_.random_fill ? " (random KV)" : "";
  nlohmann::json j =
      base_row(k, "tg" + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : "") + fill_label);
  j["n_gen"] = n;
  j["depth"] = depth;
  j["depth_fill"] = depth == 0 ? "none" : c_.random_fill ? "random" : "prefill";
  if (depth > 0 && !c_.random_fill) {
    j["depth_prefills"] = depth_prefills_;  // contexts prefilled (warm-up and repetitions)
    j["depth_loads"] = depth_loads_;        // ... started from the depth's recorded prefill
  }
  j["avg_ts"] = mean;
  j["stddev_ts"] = sd;
  j["samples_ts"] = d.tps;
  j["ms_per_token"] = 1e3 / mean;
  j["cpu_ms_per_token"] = d.cpu * 1e3 / (static_cast<double>(c_.reps) * n * k.batch);
  // One step reads every weight once for the whole batch.
  j["weight_gbps"] = weight_bytes_ * (mean / k.batch) / 1e9;
  if (c_.peak_gbps > 0) j["peak_fraction"] = j["weight_gbps"].get<double>() / c_.peak_gbps;
  const auto memory = k.engine.attention().memory_report();
  if (!memory.is_null()) {
    j["memory"] = memory;
    j["placement_matched"] = memory["matched"];
  }
  d.stats.write(j, static_cast<double>(c_.reps) * n, k.batch);
  j["peak_rss_bytes"] = peak_rss_bytes();
  if (k.engine.scheduler()) j["sched"] = k.engine.scheduler()->to_json();  // of the last repetition
  emit(std::move(j));
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

int64_t BenchConfig::runs() const {
  int64_t tests = 0;
  for (int p : prompts) tests += p > 0;
  for (int n : gens) tests += static_cast<int64_t>(depths.size()) * (n > 0);
  return static_cast<int64_t>(policies.size() * threads.size() * batches.size()) * tests * (reps + 1);
}

std::vector<nlohmann::json> run_bench(const Model& model, const BenchConfig& c, const BenchEngineOptions& options,
                                      const BenchHooks& hooks) {
  if (c.reps < 1) throw Error("-r must be at least 1");
  const int ctx = c.ctx > 0 ? c.ctx : std::max(max_of(c.prompts), max_of(c.depths)) + max_of(c.gens) + 1;
  BenchRunner runner(model, c, hooks);
  for (const std::string& policy : c.policies)
    for (int t : c.threads)
      for (int b : c.batches) {
        const EngineOptions eo = options(policy, t, b, ctx);
        Engine engine(model, eo);
        std::vector<float> logits(static_cast<size_t>(b) * model.spec.vocab_size);  // [b, vocab]
        const BenchCombo k{policy, t, b, eo, engine, logits};
        for (int p : c.prompts)
          if (p != 0) runner.prefill_test(k, p);
        for (int depth : c.depths)
          for (int n : c.gens)
            if (n != 0) runner.decode_test(k, depth, n);
      }
  return runner.take_rows();
}

}  // namespace hg::eval
