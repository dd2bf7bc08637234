// Engine: weights uploaded once, scratch allocated once, then prefill and decode steps run the
// forward pass (forward.cpp) over rows of tokens that may belong to different sequences.
#include "hybridgen/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "attention/kv_fill.h"
#include "attention/layer_attention.h"
#include "attention/prompt_state.h"
#include "device/device.h"
#include "engine/forward.h"
#include "engine/prefill_recorder.h"
#include "hybridgen/error.h"
#include "kv/memory_plan.h"
#include "mem/placement.h"
#include "sched/batch_scheduler.h"
#include "sched/cores.h"
#include "util/thread_pool.h"

namespace hg {

DType parse_kv_dtype(const std::string& name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  throw Error("--kv-dtype: '" + name + "' is not one of f32, f16, bf16");
}

Precision parse_precision(const std::string& name) {
  if (name == "auto") return Precision::Auto;
  if (name == "f32") return Precision::F32;
  if (name == "bf16") return Precision::Bf16;
  throw Error("--precision: '" + name + "' is not one of auto, f32, bf16");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Auto:
      return "auto";
    case Precision::F32:
      return "f32";
    case Precision::Bf16:
      return "bf16";
  }
  return "?";
}

Precision resolve_precision(Precision asked, const Model& model) {
  if (asked != Precision::Auto) return asked;
  // The layers' matrices decide (norms and biases are fp32 vectors in every format).
  for (const LayerWeights& l : model.weights.layers)
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (t->present() && t->dtype != DType::F32 && t->dtype != DType::F16) return Precision::Bf16;
  return Precision::F32;
}

struct Engine::Impl {
  const Model& model;
  EngineOptions options;
  std::unique_ptr<Device> device;
  std::unique_ptr<DeviceWeights> weights;
  std::unique_ptr<LayerAttention> attn;
  std::unique_ptr<Scratch> scratch;
  std::vector<StepPlan> plans;            // [batch]: the plan of each sequence's next steps
  std::unique_ptr<BatchScheduler> sched;  // hybrid policies: sets `plans` from each step's timings
  RunStats stats;
  std::string all_on_device_note;  // set when a hybrid policy's window covers the whole context
  std::string device_defaults;     // what the device chose for the knobs left to it (resolve_device_defaults)
  std::string fingerprint;         // the model's, once a prefill state needs it
  std::unique_ptr<ThreadPool> score_pool;  // prompt scores on a device without a CPU pool (CUDA)

  // Where a recorded prefill computes its prompt scores: the CPU device's pool, else a pool of
  // this machine's cores made on first use.
  ThreadPool& scores_pool() {
    if (ThreadPool* p = device->cpu_pool()) return *p;
    if (!score_pool) score_pool = std::make_unique<ThreadPool>(hardware_threads());
    return *score_pool;
  }

  // seq's plan once its context is known before a step (a prefill, a loaded state, a fill): the
  // adaptive scheduler's K at the floor of its host tokens.
  void follow_context(int seq) {
    if (!sched || !sched->adaptive()) return;
    sched->follow_context(seq, attn->host_tokens(seq));
    plans[static_cast<size_t>(seq)] = sched->plan(seq);
  }

  // Runs tokens through `stage` as sequence `seq` (at `start`) in chunks of ubatch rows; false when
  // `chunk_done` asked to stop after a chunk.
  // plans: the stage's sequences' step plans.
  bool run_prefill(LayerAttention& stage, std::span<const StepPlan> stage_plans, int seq, int start,
                   std::span<const int32_t> tokens, float* logits_last, float* logits_all,
                   const PrefillChunkDone& chunk_done) {
    const int vocab = model.spec.vocab_size;
    std::vector<TokenRow> rows;
    for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(options.ubatch)) {
      const size_t end = std::min(tokens.size(), begin + static_cast<size_t>(options.ubatch));
      rows.clear();
      for (size_t i = begin; i < end; ++i) rows.push_back({seq, start + static_cast<int>(i), tokens[i]});
      const bool last_chunk = end == tokens.size();
      float* out_all = logits_all ? logits_all + begin * static_cast<size_t>(vocab) : nullptr;
      stage.begin_step(rows, /*prefill=*/true, stage_plans);
      forward(*device, model.spec, *weights, stage, *scratch, rows, out_all, last_chunk ? logits_last : nullptr);
      stage.end_step(rows);
      if (chunk_done && !chunk_done(static_cast<int64_t>(end)) && !last_chunk) return false;
    }
    return true;
  }

  void check_seq(int seq) const {
    if (seq < 0 || seq >= options.batch)
      throw Error("sequence " + std::to_string(seq) + " is outside the batch of " + std::to_string(options.batch));
  }

  // A state to record a prefill of `seq` (at `start`) into: checked against the model and the
  // sequence, and given the names of the prompt scores the stage keeps tokens by.
  void begin_record(PrefillState& record, int start) {
    PromptState* ps = attn->prompt_state();
    if (!attn->exact_prefill() || (ps && ps->places_prefill() && start > 0))
      throw Error("prefill state: the policy '" + attn->describe() +
                  "' drops or prunes tokens during this prefill; its state would not serve other policies");
    if (record.layers.empty()) {
      std::vector<std::string> names = std::move(record.score_names);
      record = PrefillState::for_model(model);
      record.score_names = std::move(names);
    }
    check_state(record);
    if (record.n_tokens() != start)
      throw Error("prefill state: it holds " + std::to_string(record.n_tokens()) + " tokens, the sequence " +
                  std::to_string(start) + "; record from the sequence's start");
    if (ps)
      for (const std::string& name : ps->prompt_scores())
        if (record.score_index(name) < 0) {
          if (start > 0) throw Error("prefill state: its prompt scores must be asked for at the sequence's start");
          record.score_names.push_back(name);
        }
  }

  // hg::Error when `state` was made by another model (the fingerprint is computed once).
  void check_state(const PrefillState& state) {
    if (fingerprint.empty()) fingerprint = model_fingerprint(model);
    state.check_model(model, "prefill state", fingerprint);
  }

  Impl(const Model& m, const EngineOptions& o) : model(m), options(o) {}
};

namespace {
// The CPU device. host_share: the share of its cores the host workers take while they compute
// (the feedback scheduler's FeedbackParams::host_share).
std::unique_ptr<Device> cpu_device_for(const EngineOptions& o, double& host_share) {
  // The CPU device and the host workers share the cores: -t is their total (src/sched/cores.h).
  const CorePlan cores = plan_cores(o.threads, available_cpus(), o.policy.host_workers(), true);
  if (o.policy.host_workers() > 0) spdlog::info("cores: {}", cores.describe());
  host_share = cores.host_share();
  return make_cpu_device(cores.device_threads, o.precision == Precision::Bf16);
}
}  // namespace

Engine::Engine(const Model& model, const EngineOptions& options) : impl_(std::make_unique<Impl>(model, options)) {
  auto& o = impl_->options;
  const ModelSpec& spec = model.spec;
  if (o.ctx <= 0) o.ctx = spec.max_ctx;
  if (spec.is_opt() && o.ctx > spec.max_ctx)
    throw Error("--ctx " + std::to_string(o.ctx) + ": OPT's learned position embeddings end at " +
                std::to_string(spec.max_ctx) + " positions (max_position_embeddings)");
  if (o.batch < 1) throw Error("--batch must be at least 1, got " + std::to_string(o.batch));
  if (o.ubatch < 0) throw Error("--ubatch must be >= 0 (0: auto), got " + std::to_string(o.ubatch));
  o.precision = resolve_precision(o.precision, model);
  std::unique_ptr<Device> cuda = make_named_cuda_device(o.device, o.gpu);
  // The knobs left to the device (--host-threads auto, --query auto), then the host workers.
  impl_->device_defaults = resolve_device_defaults(o.policy, !cuda, o.threads, available_cpus());
  if (!impl_->device_defaults.empty()) spdlog::info("{}", impl_->device_defaults);
  if (o.policy.splits_kv()) o.policy.host_threads = resolve_host_threads(o.policy.host_threads, o.threads);
  double host_share = 0;  // 0 on a CUDA device: the host workers take nothing from the GPU
  impl_->device = cuda ? std::move(cuda) : cpu_device_for(o, host_share);
  // Said before the weights and the KV cache are allocated (the host side: HybridAttention).
  plan_device_memory(model, o.policy, o.kv_dtype, o.ctx, o.batch, *impl_->device).require_fits();
  impl_->weights = upload_weights(*impl_->device, model);
  const AttentionContext ac{*impl_->device, model, o.kv_dtype, o.ctx, o.batch, o.host_job_hook};
  mem::PlacementOptions po;
  po.policy = mem::parse_placement_policy(o.kv_placement);
  po.k_node = o.k_node;
  po.v_node = o.v_node;
  po.k_dram_budget = o.k_dram_budget;
  po.huge_pages = o.kv_huge_pages;
  AttentionStage stage = make_attention(ac, o.policy, po);
  impl_->attn = std::move(stage.attention);
  impl_->all_on_device_note = stage.note;
  if (!stage.note.empty()) spdlog::info("{}", stage.note);
  if (o.ubatch == 0) o.ubatch = impl_->attn->exact_prefill() ? kExactPrefillUbatch : kPruningPrefillUbatch;
  impl_->scratch = std::make_unique<Scratch>(*impl_->device, spec, std::max(o.ubatch, o.batch));
  impl_->plans.assign(static_cast<size_t>(o.batch), initial_plan(o.policy));
  impl_->sched = make_batch_scheduler(o.policy, model, o.batch, host_share);
  if (impl_->sched)
    for (int s = 0; s < o.batch; ++s) impl_->plans[static_cast<size_t>(s)] = impl_->sched->plan(s);
}

Engine::~Engine() = default;

const ModelSpec& Engine::spec() const { return impl_->model.spec; }
const EngineOptions& Engine::options() const { return impl_->options; }
Device& Engine::device() { return *impl_->device; }
int Engine::vocab_size() const { return impl_->model.spec.vocab_size; }
RunStats& Engine::stats() { return impl_->stats; }
int Engine::position(int seq) const { return impl_->attn->length(seq); }
Engine::KvBytes Engine::kv_bytes(int seq) const {
  impl_->check_seq(seq);
  const ModelSpec& spec = impl_->model.spec;
  const int64_t per_token =
      2 * static_cast<int64_t>(spec.n_layers) * static_cast<int64_t>(dtype_row_bytes(impl_->options.kv_dtype, spec.kv_dim()));
  const int64_t on_device = impl_->attn->device_tokens(seq);
  return {on_device * per_token, (impl_->attn->length(seq) - on_device) * per_token};
}
void Engine::reset(int seq) {
  impl_->attn->reset(seq);
  impl_->plans.at(static_cast<size_t>(seq)) = initial_plan(impl_->options.policy);
  if (impl_->sched) {
    impl_->sched->reset(seq);
    impl_->plans[static_cast<size_t>(seq)] = impl_->sched->plan(seq);
  }
}
const BatchScheduler* Engine::scheduler() const { return impl_->sched.get(); }
void Engine::set_step_plan(int seq, const StepPlan& plan) {
  impl_->check_seq(seq);
  if (plan.K < -1) throw Error("step plan: K must be >= 0 (or -1 for all host tokens), got " + std::to_string(plan.K));
  impl_->plans[static_cast<size_t>(seq)] = plan;
}
const StepPlan& Engine::step_plan(int seq) const { return impl_->plans.at(static_cast<size_t>(seq)); }
const StepTiming* Engine::last_step_timing() const { return impl_->attn->last_step_timing(); }

void Engine::fill_random(int seq, int n_tokens, uint64_t seed) {
  auto& im = *impl_;
  im.check_seq(seq);
  if (n_tokens < 0 || n_tokens > im.options.ctx)
    throw Error("--depth-fill random: " + std::to_string(n_tokens) + " tokens do not fit the context of " +
                std::to_string(im.options.ctx) + " tokens");
  im.attn->reset(seq);
  im.attn->fill(seq, n_tokens, random_kv_source(seed, im.model.spec.kv_dim()));
  im.follow_context(seq);
}

bool Engine::exact_prefill() const { return impl_->attn->exact_prefill(); }

const std::string& Engine::fingerprint() const {
  if (impl_->fingerprint.empty()) impl_->fingerprint = model_fingerprint(impl_->model);
  return impl_->fingerprint;
}

void Engine::load_state(int seq, const PrefillState& state, float* logits_last, int n_tokens) {
  auto& im = *impl_;
  if (n_tokens < 0) n_tokens = state.n_tokens();
  im.check_seq(seq);
  im.check_state(state);
  if (n_tokens > state.n_tokens())
    throw Error("prefill state: " + std::to_string(n_tokens) + " tokens asked of a state of " +
                std::to_string(state.n_tokens()));
  if (n_tokens > im.options.ctx)
    throw Error("prefill state: its " + std::to_string(n_tokens) + " tokens do not fit the context of " +
                std::to_string(im.options.ctx) + " tokens (raise --ctx)");
  if (!exact_prefill())
    throw Error("prefill state: the policy '" + im.attn->describe() +
                "' drops or prunes tokens during its prefill (--exact-prefill false), so it cannot start from a "
                "recorded one; it prefills the prompt itself");
  PromptState* ps = im.attn->prompt_state();
  const std::vector<std::string> needs = ps ? ps->prompt_scores() : std::vector<std::string>{};
  std::vector<int> score_of;
  for (const std::string& name : needs) {
    const int i = state.score_index(name);
    if (i < 0 || n_tokens != state.n_tokens())
      throw Error("prefill state: it holds no '" + name + "' prompt scores" +
                  (i < 0 ? std::string() : " for a prefix of it") + ", which the policy '" + im.attn->describe() +
                  "' keeps tokens by; record the state with this policy (generate --save-state --policy ...)");
    score_of.push_back(i);
  }
  reset(seq);
  for (size_t i = 0; i < score_of.size(); ++i)
    for (int layer = 0; layer < state.n_layers; ++layer)
      ps->learn_prompt_scores(seq, layer, i,
                                   state.layers[static_cast<size_t>(layer)].scores[static_cast<size_t>(score_of[i])].data(),
                                   n_tokens);
  const int kv_dim = state.kv_dim;
  im.attn->fill(seq, n_tokens, [&](int layer, int64_t pos0, int64_t n, float* k, float* v) {
    const PrefillState::Layer& l = state.layers[static_cast<size_t>(layer)];
    std::copy_n(l.k.data() + pos0 * kv_dim, n * kv_dim, k);
    std::copy_n(l.v.data() + pos0 * kv_dim, n * kv_dim, v);
  });
  const int q_rows = std::min(n_tokens, state.q_rows());
  if (q_rows > 0 && ps)
    for (int layer = 0; layer < state.n_layers; ++layer)
      ps->learn_prompt_queries(seq, layer, state.layers[static_cast<size_t>(layer)].q.data(), q_rows);
  if (logits_last) {
    if (n_tokens != state.n_tokens() || state.logits.empty())
      throw Error("prefill state: the logits of a prefix of the state are not kept");
    std::copy(state.logits.begin(), state.logits.end(), logits_last);
  }
  im.follow_context(seq);
}
std::vector<std::string> Engine::prompt_scores() const {
  const PromptState* ps = impl_->attn->prompt_state();
  return ps ? ps->prompt_scores() : std::vector<std::string>{};
}
LayerAttention& Engine::attention() { return *impl_->attn; }
const std::string& Engine::device_defaults() const { return impl_->device_defaults; }
std::string Engine::describe_attention() const {
  return impl_->all_on_device_note.empty() ? impl_->attn->describe() : impl_->all_on_device_note;
}
std::vector<LayerStats> Engine::layer_stats() const {
  auto* s = impl_->attn->layer_stats();
  return s ? *s : std::vector<LayerStats>{};
}
void Engine::reset_all() {
  for (int s = 0; s < impl_->options.batch; ++s) reset(s);
}

bool Engine::prefill(int seq, std::span<const int32_t> tokens, float* logits_last, float* logits_all,
                     PrefillState* record, const PrefillChunkDone& chunk_done) {
  auto& im = *impl_;
  im.check_seq(seq);
  const int start = im.attn->length(seq);
  // A dropping policy's prompt: exact attention on the stage it gives for it, recorded, then placed
  PromptState* ps = im.attn->prompt_state();
  std::unique_ptr<LayerAttention> exact;
  if (ps && ps->places_prefill() && start == 0 && !tokens.empty()) exact = ps->exact_stage(static_cast<int>(tokens.size()));
  PrefillState placed_state;
  if (exact && !record) record = &placed_state;
  std::vector<float> recorded_logits;
  if (record) {
    im.begin_record(*record, start);
    if (!logits_last && !tokens.empty()) {
      recorded_logits.resize(static_cast<size_t>(im.model.spec.vocab_size));
      logits_last = recorded_logits.data();
    }
  }
  if (start + static_cast<int64_t>(tokens.size()) > im.options.ctx)
    throw Error("prompt of " + std::to_string(start + tokens.size()) + " tokens is longer than the context (" +
                std::to_string(im.options.ctx) + " tokens; raise --ctx, the model was trained on " +
                std::to_string(im.model.spec.max_ctx) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  LayerAttention& stage = exact ? *exact : *im.attn;
  std::optional<RecordingAttention> recording;
  if (record)
    recording.emplace(stage, *im.device, *record, im.model.spec, im.options.kv_dtype,
                      record->score_names.empty() ? nullptr : &im.scores_pool());
  // Stopped midway, the state holds rows of tokens it does not list (not kept as one), and a
  // placed prompt leaves the sequence empty.
  LayerAttention& run = recording ? static_cast<LayerAttention&>(*recording) : stage;
  const std::span<const StepPlan> plans = exact ? std::span<const StepPlan>(im.plans).first(1) : im.plans;
  if (!im.run_prefill(run, plans, exact ? 0 : seq, exact ? 0 : start, tokens, logits_last, logits_all, chunk_done))
    return false;
  if (record && !tokens.empty()) {
    record->tokens.insert(record->tokens.end(), tokens.begin(), tokens.end());
    record->logits.assign(logits_last, logits_last + im.model.spec.vocab_size);
  }
  if (exact) load_state(seq, *record, nullptr);
  im.stats.prefill_tokens += static_cast<int64_t>(tokens.size());
  im.stats.prefill_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  im.follow_context(seq);
  return true;
}

void Engine::decode(std::span<const int> seqs, std::span<const int32_t> tokens, float* logits) {
  auto& im = *impl_;
  if (seqs.size() != tokens.size()) throw Error("decode: one token per sequence");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TokenRow> rows;
  rows.reserve(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int pos = im.attn->length(seqs[i]);
    if (pos >= im.options.ctx)
      throw Error("sequence " + std::to_string(seqs[i]) + " reached the context limit of " +
                  std::to_string(im.options.ctx) + " tokens");
    rows.push_back({seqs[i], pos, tokens[i]});
  }
  im.attn->begin_step(rows, /*prefill=*/false, im.plans);
  im.device->decode_step_begin();
  try {
    forward(*im.device, im.model.spec, *im.weights, *im.attn, *im.scratch, rows, logits, nullptr);
  } catch (...) {
    try {
      im.device->decode_step_end();  // no capture outlives the step (the first error is the one reported)
      im.device->synchronize();      // nor a host callback the step queued (they read its rows)
    } catch (...) {
    }
    throw;
  }
  im.device->decode_step_end();
  im.attn->end_step(rows);
  if (im.sched && im.attn->last_step_timing()) {
    // The scheduler turns this step's timings into each sequence's plan for the next step.
    std::vector<int64_t> host(seqs.size());
    std::vector<double> recall(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      host[i] = im.attn->host_tokens(seqs[i]);
      recall[i] = im.attn->last_recall(seqs[i]);
    }
    im.sched->after_step(seqs, *im.attn->last_step_timing(), host, recall);
    if (im.sched->adaptive())
      for (int s : seqs) im.plans[static_cast<size_t>(s)] = im.sched->plan(s);
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  im.stats.decode_seconds += dt;
  im.stats.decode_steps += 1;
  im.stats.decode_tokens += static_cast<int64_t>(seqs.size());
  im.stats.step_ms.push_back(dt * 1e3);
}

}  // namespace hg
