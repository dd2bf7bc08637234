#include "serve/batcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "attention/layer_attention.h"
#include "eval/shared_prefill.h"
#include "hybridgen/error.h"
#include "hybridgen/prefill_state.h"
#include "serve/prefix_cache.h"
#include "util/strings.h"

namespace hg::serve {

using Clock = std::chrono::steady_clock;

struct Batcher::Slot {
  int seq = 0;
  bool busy = false, decoding = false, first_sent = false;
  GenerationRequest request;
  std::shared_ptr<RequestStream> stream;
  Clock::time_point arrived;
  uint64_t order = 0;
  size_t done = 0;  // prompt tokens the sequence holds
  int cached = 0;   // of them, placed from the prefix cache
  std::optional<PrefillState> record;
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> text;
  std::vector<int32_t> history;  // prompt and generated tokens (the repetition penalty's window)
  int generated = 0;
  int32_t next = 0;  // the token the next decode step feeds
  std::string held;  // text not sent yet: it might begin a stop string
};

struct Batcher::Lane {
  std::string label;
  std::unique_ptr<Engine> engine;
  std::vector<Slot> slots;
  std::unique_ptr<PrefixCache> cache;
  std::vector<float> logits;  // [slots][vocab]
  bool keeps_host_tokens = false;  // a split policy: a request may set its K
};

namespace {

// The longest end of `text` that begins one of the stop strings (text held back until the next
// token shows whether the stop string follows).
size_t stop_prefix_at_end(const std::string& text, const std::vector<std::string>& stop) {
  size_t keep = 0;
  for (const std::string& s : stop)
    for (size_t n = std::min(s.size() - 1, text.size()); n > keep; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  return keep;
}

// Where the first stop string begins in `text`, or npos.
size_t first_stop(const std::string& text, const std::vector<std::string>& stop) {
  size_t at = std::string::npos;
  for (const std::string& s : stop) at = std::min(at, text.find(s));
  return at;
}

// log-softmax of the raw logits: the sampled token's and the n likeliest, before the sampler
// changes them.
void fill_logprobs(const float* logits, int vocab, int32_t id, int n, Piece& piece) {
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  piece.logprob = logits[id] - log_z;
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) ids[static_cast<size_t>(i)] = i;
  const auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  const size_t k = std::min(static_cast<size_t>(n), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), by_logit);
  for (size_t i = 0; i < k; ++i) piece.top.push_back({ids[i], logits[ids[i]] - log_z});
}

// The request's K over whatever plan the sequence has (the scheduler's after each step).
void apply_request_k(Engine& engine, int seq, const GenerationRequest& r) {
  if (!r.k) return;
  StepPlan plan = engine.step_plan(seq);
  plan.K = *r.k;
  engine.set_step_plan(seq, plan);
}

}  // namespace

Batcher::Batcher(const Model& model, const Tokenizer* tok, const std::vector<ServedPolicy>& policies,
                 const BatcherOptions& options, Metrics& metrics)
    : model_(model), tok_(tok), options_(options), metrics_(metrics) {
  if (policies.empty()) throw Error("serve: no policy to serve");
  const size_t cache_share = options.prefix_cache_bytes / policies.size();
  for (const ServedPolicy& p : policies) {
    auto lane = std::make_unique<Lane>();
    lane->label = p.label;
    lane->engine = std::make_unique<Engine>(model, p.engine);
    lane->keeps_host_tokens = lane->engine->attention().split_kv() != nullptr;
    lane->slots.resize(static_cast<size_t>(p.engine.batch));
    for (int i = 0; i < p.engine.batch; ++i) lane->slots[static_cast<size_t>(i)].seq = i;
    lane->logits.resize(static_cast<size_t>(p.engine.batch) * static_cast<size_t>(model.spec.vocab_size));
    if (lane->engine->exact_prefill() && (cache_share > 0 || !options.state_cache_dir.empty()))
      lane->cache = std::make_unique<PrefixCache>(cache_share, options.state_cache_dir, lane->engine->fingerprint(),
                                                  eval::prefill_computed_on(*lane->engine));
    labels_.push_back(p.label);
    ctx_ = p.engine.ctx;
    slots_ = p.engine.batch;
    lanes_.push_back(std::move(lane));
  }
  if (tok_) stop_ids_ = tok_->stop_ids();
  thread_ = std::thread([this] { loop(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cancel_all_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestStream> Batcher::submit(GenerationRequest request) {
  size_t lane = 0;
  if (!request.policy.empty()) {
    const auto it = std::find(labels_.begin(), labels_.end(), request.policy);
    if (it == labels_.end())
      throw Refused(Refused::Why::BadRequest,
                    "policy '" + request.policy + "' is not served here (served: " + join(labels_) + ")",
                    "hybridgen.policy");
    lane = static_cast<size_t>(it - labels_.begin());
  }
  if (request.prompt.empty()) throw Refused(Refused::Why::BadRequest, "the prompt is empty", "prompt");
  if (static_cast<int>(request.prompt.size()) >= ctx_)
    throw Refused(Refused::Why::BadRequest,
                  "this server's context is " + std::to_string(ctx_) + " tokens per sequence; the prompt has " +
                      std::to_string(request.prompt.size()) + " (--ctx)",
                  "prompt");
  if (request.k && !lanes_[lane]->keeps_host_tokens)  // read-only here: the engine is the engine thread's
    throw Refused(Refused::Why::BadRequest,
                  "k applies to the policies that keep tokens on the host; '" + labels_[lane] + "' keeps none",
                  "hybridgen.k");
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard lock(mutex_);
    if (draining_ || stopping_) throw Refused(Refused::Why::Draining, "the server is shutting down");
    if (static_cast<int>(queue_.size()) >= options_.max_queue)
      throw Refused(Refused::Why::QueueFull, "too many requests are waiting (" + std::to_string(queue_.size()) +
                                                 "; --max-queue); retry later");
    queue_.push_back(Queued{std::move(request), stream, Clock::now(), lane});
  }
  wake_.notify_all();
  return stream;
}

void Batcher::drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

void Batcher::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_all_ = true;
  }
  wake_.notify_all();
}

bool Batcher::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && running_ == 0;
}

// Waits while there is nothing to do; false when the batcher is to stop.
bool Batcher::wait_for_work() {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return stopping_ || cancel_all_ || !queue_.empty() || running_ > 0; });
  return !(stopping_ && queue_.empty() && running_ == 0);
}

void Batcher::loop() {
  while (wait_for_work()) {
    reap_cancelled();
    admit();
    prefill_step();
    for (auto& lane : lanes_) decode_step(*lane);
    publish_gauges();
  }
}

// Requests whose client went away (or all of them, on cancel_all) leave the queue and their slots.
void Batcher::reap_cancelled() {
  bool all = false;
  std::deque<Queued> dropped;
  {
    std::lock_guard lock(mutex_);
    all = cancel_all_;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (all || it->stream->cancelled()) {
        dropped.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (all && stopping_) cancel_all_ = true;  // stays set: nothing new runs after the destructor's
    else cancel_all_ = false;
  }
  for (Queued& q : dropped) q.stream->end(Finish::Cancelled);
  for (auto& lane : lanes_)
    for (Slot& slot : lane->slots)
      if (slot.busy && (all || slot.stream->cancelled())) release(*lane, slot, Finish::Cancelled);
}

void Batcher::admit() {
  for (;;) {
    Queued q;
    Lane* lane = nullptr;
    Slot* slot = nullptr;
    {
      std::lock_guard lock(mutex_);
      // The oldest request whose policy has a free slot (a busy policy does not hold up another's).
      for (auto it = queue_.begin(); it != queue_.end() && !slot; ++it) {
        for (Slot& s : lanes_[it->lane]->slots) {
          if (s.busy) continue;
          lane = lanes_[it->lane].get();
          slot = &s;
          q = std::move(*it);
          queue_.erase(it);
          ++running_;
          break;
        }
      }
    }
    if (!slot) return;
    start(*lane, *slot, std::move(q));
  }
}

// Takes a request into a free slot: the sequence starts empty, or from the longest prefix of the
// prompt that the prefix cache holds.
void Batcher::start(Lane& lane, Slot& slot, Queued q) {
  Engine& engine = *lane.engine;
  slot.busy = true;
  slot.decoding = slot.first_sent = false;
  slot.request = std::move(q.request);
  slot.stream = std::move(q.stream);
  slot.arrived = q.arrived;
  slot.order = admitted_++;
  slot.done = 0;
  slot.cached = 0;
  slot.generated = 0;
  slot.held.clear();
  slot.history = slot.request.prompt;
  slot.sampler.emplace(slot.request.sampler, engine.vocab_size());
  if (tok_) slot.text.emplace(*tok_, /*skip_special=*/true);
  else slot.text.reset();
  slot.record.reset();
  const std::vector<int32_t>& prompt = slot.request.prompt;
  try {
    engine.reset(slot.seq);
    if (lane.cache) {
      // At least the last prompt token is prefilled: its logits start the answer.
      const auto hit = lane.cache->find(std::span(prompt).first(prompt.size() - 1), options_.min_prefix);
      if (hit) {
        engine.load_state(slot.seq, *hit->state, nullptr, hit->tokens);
        slot.done = static_cast<size_t>(hit->tokens);
        slot.cached = hit->tokens;
      }
      slot.record = hit ? hit->state->prefix(hit->tokens) : PrefillState::for_model(model_);
    }
    apply_request_k(engine, slot.seq, slot.request);
  } catch (const std::exception& e) {
    release(lane, slot, Finish::Error, e.what());
    return;
  }
  slot.stream->started(static_cast<int>(prompt.size()), slot.cached);
}

// One chunk of the prompt of the slot admitted first among those still prefilling.
void Batcher::prefill_step() {
  Lane* lane = nullptr;
  Slot* oldest = nullptr;
  for (auto& l : lanes_)
    for (Slot& s : l->slots)
      if (s.busy && !s.decoding && (!oldest || s.order < oldest->order)) {
        oldest = &s;
        lane = l.get();
      }
  if (oldest) prefill_chunk(*lane, *oldest);
}

void Batcher::prefill_chunk(Lane& lane, Slot& slot) {
  Engine& engine = *lane.engine;
  const std::vector<int32_t>& prompt = slot.request.prompt;
  // A dropping policy's prompt goes in one call: it is evicted once, after its exact prefill.
  const size_t chunk = engine.exact_prefill() ? static_cast<size_t>(options_.prefill_chunk) : prompt.size();
  const size_t n = std::min(chunk, prompt.size() - slot.done);
  const bool last = slot.done + n == prompt.size();
  float* logits = lane.logits.data() + static_cast<size_t>(slot.seq) * static_cast<size_t>(engine.vocab_size());
  try {
    engine.prefill(slot.seq, std::span(prompt).subspan(slot.done, n), last ? logits : nullptr, nullptr,
                   slot.record ? &*slot.record : nullptr);
  } catch (const std::exception& e) {
    release(lane, slot, Finish::Error, e.what());
    return;
  }
  slot.done += n;
  if (!last) return;
  if (slot.record) {
    lane.cache->insert(std::move(*slot.record));
    slot.record.reset();
  }
  slot.decoding = true;
  if (!emit(lane, slot, logits)) release(lane, slot, slot.stream->cancelled() ? Finish::Cancelled : Finish::Length);
}

void Batcher::decode_step(Lane& lane) {
  Engine& engine = *lane.engine;
  std::vector<int> seqs;
  std::vector<int32_t> tokens;
  for (Slot& s : lane.slots) {
    if (!s.busy || !s.decoding) continue;
    apply_request_k(engine, s.seq, s.request);  // the scheduler has set its own after the last step
    seqs.push_back(s.seq);
    tokens.push_back(s.next);
  }
  if (seqs.empty()) return;
  try {
    engine.decode(seqs, tokens, lane.logits.data());
  } catch (const std::exception& e) {
    for (int seq : seqs) release(lane, lane.slots[static_cast<size_t>(seq)], Finish::Error, e.what());
    return;
  }
  metrics_.decoded(static_cast<int64_t>(seqs.size()), Clock::now());
  const size_t vocab = static_cast<size_t>(engine.vocab_size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    Slot& s = lane.slots[static_cast<size_t>(seqs[i])];
    if (!emit(lane, s, lane.logits.data() + i * vocab)) release(lane, s, Finish::Length);
  }
}

// Samples the slot's next token from `logits` and sends it. False when the request has ended
// (its stream is then ended too, unless it ran out of tokens or context: the caller ends it with Length).
bool Batcher::emit(Lane& lane, Slot& slot, float* logits) {
  const GenerationRequest& r = slot.request;
  Piece piece;
  std::vector<float> raw;
  if (r.top_logprobs >= 0) raw.assign(logits, logits + lane.engine->vocab_size());
  const int32_t id = slot.sampler->sample(logits, slot.history);
  const bool eos = !r.ignore_eos && std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
  if (!slot.first_sent) {
    slot.first_sent = true;
    metrics_.first_token(std::chrono::duration<double>(Clock::now() - slot.arrived).count());
  }
  if (eos) {
    if (slot.text) slot.held += slot.text->flush();
    const size_t at = first_stop(slot.held, r.stop);
    if (!slot.held.empty()) slot.stream->push(Piece{-1, slot.held.substr(0, at), 0, {}});
    release(lane, slot, Finish::Stop);
    return false;
  }
  piece.id = id;
  if (!raw.empty()) fill_logprobs(raw.data(), static_cast<int>(raw.size()), id, r.top_logprobs, piece);
  slot.history.push_back(id);
  slot.next = id;
  ++slot.generated;
  const bool out_of_room = slot.generated >= r.max_tokens || lane.engine->position(slot.seq) >= ctx_;
  if (slot.text) slot.held += slot.text->push(id);
  if (out_of_room && slot.text) slot.held += slot.text->flush();
  const size_t at = first_stop(slot.held, r.stop);
  if (at != std::string::npos) {
    piece.text = slot.held.substr(0, at);
    slot.stream->push(std::move(piece));
    release(lane, slot, Finish::Stop);
    return false;
  }
  const size_t keep = out_of_room ? 0 : stop_prefix_at_end(slot.held, r.stop);
  piece.text = slot.held.substr(0, slot.held.size() - keep);
  slot.held.erase(0, slot.held.size() - keep);
  slot.stream->push(std::move(piece));
  return !out_of_room;
}

void Batcher::release(Lane& lane, Slot& slot, Finish finish, const std::string& error) {
  if (!slot.busy) return;
  try {
    lane.engine->reset(slot.seq);  // frees the sequence's KV on the device and the host
  } catch (const std::exception& e) {
    spdlog::error("serve: resetting sequence {} of '{}': {}", slot.seq, lane.label, e.what());
  }
  if (finish == Finish::Error) spdlog::warn("serve: a request of '{}' failed: {}", lane.label, error);
  metrics_.tokens(static_cast<int64_t>(slot.request.prompt.size()), slot.cached, slot.generated);
  slot.stream->end(finish, error);
  slot.stream.reset();
  slot.record.reset();
  slot.busy = slot.decoding = false;
  std::lock_guard lock(mutex_);
  --running_;
}

void Batcher::publish_gauges() {
  Metrics::Gauges g;
  for (auto& lane : lanes_) {
    for (const Slot& s : lane->slots) {
      const Engine::KvBytes kv = lane->engine->kv_bytes(s.seq);
      g.kv_device_bytes += kv.device;
      g.kv_host_bytes += kv.host;
    }
    if (lane->cache) g.prefix_cache_bytes += static_cast<int64_t>(lane->cache->bytes());
  }
  {
    std::lock_guard lock(mutex_);
    g.queued = static_cast<int64_t>(queue_.size());
    g.running = running_;
  }
  metrics_.gauges(g);
}

}  // namespace hg::serve
