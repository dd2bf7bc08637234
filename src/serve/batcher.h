// Continuous batching: the server's one engine thread. Requests wait in a queue; each takes a free
// sequence slot of its policy's engine at the next step and leaves it when it ends, so the batch a
// decode step runs changes from step to step. Every sequence keeps its own cache as its policy
// splits it (the window on the device, the rest on the host) and the engine's feedback scheduler
// sees the whole batch. A prompt is prefilled in chunks of `prefill_chunk` tokens, one chunk
// between two decode steps, so that a long prompt does not stall the streams already running.
//
// One engine per served policy (serve --policy hybrid,full), all over the same loaded weights;
// each has `parallel` slots. A prompt that begins with one the server has prefilled places that
// prefix from the prefix cache (serve/prefix_cache.h) and prefills only the rest.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hybridgen/engine.h"
#include "hybridgen/tokenizer.h"
#include "serve/metrics.h"
#include "serve/request.h"

namespace hg::serve {

struct ServedPolicy {
  std::string label;     // what a request names it by ("hybrid", "hybrid:k=512")
  EngineOptions engine;  // its engine (batch: the slots)
};

struct BatcherOptions {
  int prefill_chunk = 512;         // prompt tokens prefilled between two decode steps
  int max_queue = 64;              // requests waiting beyond the running ones; more are refused
  size_t prefix_cache_bytes = 0;   // prefill states kept in memory (0: none)
  std::string state_cache_dir;     // and on disk (empty: not)
  int min_prefix = 32;             // the shortest cached prefix worth placing
};

// Why submit refused a request; the HTTP side makes a status of it.
struct Refused : std::runtime_error {
  enum class Why { QueueFull, Draining, BadRequest } why;
  std::string param;
  Refused(Why w, const std::string& message, std::string p = {})
      : std::runtime_error(message), why(w), param(std::move(p)) {}
};

class Batcher {
 public:
  // tok may be null (a model without a tokenizer: pieces carry ids, no text).
  Batcher(const Model& model, const Tokenizer* tok, const std::vector<ServedPolicy>& policies,
          const BatcherOptions& options, Metrics& metrics);
  ~Batcher();  // cancels what runs and joins the engine thread
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a request; Refused when the queue is full, the server is draining, the policy is not
  // served, the prompt does not fit the context or the request's knobs do not apply.
  std::shared_ptr<RequestStream> submit(GenerationRequest request);
  // From now on submit refuses (Draining); what is queued or running goes on.
  void drain();
  // Ends every queued and running request (Cancelled) at the engine's next step.
  void cancel_all();
  bool idle() const;  // nothing queued, nothing running

  const std::vector<std::string>& policy_labels() const { return labels_; }
  int ctx() const { return ctx_; }
  int slots() const { return slots_; }  // per served policy

 private:
  struct Lane;
  struct Slot;
  struct Queued {
    GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point arrived;
    size_t lane = 0;
  };

  void loop();
  bool wait_for_work();
  void reap_cancelled();
  void admit();
  void start(Lane& lane, Slot& slot, Queued q);
  void prefill_step();
  void prefill_chunk(Lane& lane, Slot& slot);
  void decode_step(Lane& lane);
  bool emit(Lane& lane, Slot& slot, float* logits);
  void release(Lane& lane, Slot& slot, Finish finish, const std::string& error = {});
  void publish_gauges();

  const Model& model_;
  const Tokenizer* tok_;
  BatcherOptions options_;
  Metrics& metrics_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::string> labels_;
  int ctx_ = 0, slots_ = 0;
  std::vector<int32_t> stop_ids_;
  uint64_t admitted_ = 0;  // admission order: the oldest prefilling slot goes first

  mutable std::mutex mutex_;  // guards queue_, running_, draining_, stopping_, cancel_all_
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  int running_ = 0;
  bool draining_ = false, stopping_ = false, cancel_all_ = false;
  std::thread thread_;
};

}  // namespace hg::serve
