// The server's continuous batching without HTTP: requests that join and leave a running batch get
// the tokens each gets alone (greedy, against a plain Engine run with its own prefill and decode),
// a cancelled request frees its sequence, a prompt that extends one already run places the shared
// prefix from the prefix cache, and what the batcher cannot run is refused. Tiny random models:
// these run under ASan and TSan (HTTP threads are stood in for by std::threads calling submit).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/sampler.h"
#include "hybridgen/engine.h"
#include "hybridgen/model.h"
#include "serve/batcher.h"
#include "test_util.h"

namespace hg::test {
namespace {

using serve::Batcher;
using serve::BatcherOptions;
using serve::Finish;
using serve::GenerationRequest;
using serve::Piece;
using serve::Refused;
using serve::RequestStream;
using serve::ServedPolicy;

constexpr int kCtx = 160;

EngineOptions engine_options(int batch, const std::string& preset = "full") {
  EngineOptions o;
  o.threads = 2;
  o.kv_dtype = DType::F32;
  o.ctx = kCtx;
  o.batch = batch;
  o.policy = policy_preset(preset);
  if (preset != "full") {
    o.policy.window = 16;
    o.policy.n_sinks = 4;
  }
  return o;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampler.temperature = 0;
  return r;
}

// What the request gives alone: one sequence, the whole prompt prefilled at once, then decode.
std::vector<int32_t> alone(const Model& model, const GenerationRequest& r, const std::string& preset = "full") {
  Engine engine(model, engine_options(1, preset));
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()));
  Sampler sampler(r.sampler, engine.vocab_size());
  std::vector<int32_t> history = r.prompt, out;
  engine.prefill(0, r.prompt, logits.data());
  const int seq = 0;
  for (int i = 0; i < r.max_tokens; ++i) {
    const int32_t next = sampler.sample(logits.data(), history);
    history.push_back(next);
    out.push_back(next);
    if (i + 1 == r.max_tokens) break;
    engine.decode(std::span(&seq, 1), std::span(&next, 1), logits.data());
  }
  return out;
}

// Every piece of a stream until it ends.
std::vector<int32_t> drain(RequestStream& s) {
  std::vector<Piece> pieces;
  while (!s.take(pieces, std::chrono::milliseconds(100))) {
  }
  std::vector<int32_t> ids;
  for (const Piece& p : pieces)
    if (p.id >= 0) ids.push_back(p.id);
  return ids;
}

void wait_idle(const Batcher& b) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!b.idle()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the batcher did not become idle";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(ServeBatcher, RequestsThatJoinARunningBatchGetWhatTheyGetAlone) {
  auto model = load_model(tiny_model("llama-gqa").string());
  serve::Metrics metrics;
  BatcherOptions o;
  o.prefill_chunk = 16;  // prompts of up to 70 tokens prefill in several chunks between decode steps
  Batcher batcher(*model, nullptr, {ServedPolicy{"full", engine_options(3)}}, o, metrics);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(greedy(random_ids(10 + 9 * i, 100 + static_cast<uint32_t>(i)), 6 + 5 * (i % 3)));
  std::vector<std::vector<int32_t>> got(requests.size());
  // Three clients, each sending its requests one after another: requests join while others run.
  std::vector<std::thread> clients;
  for (size_t c = 0; c < 3; ++c)
    clients.emplace_back([&, c] {
      for (size_t i = c; i < requests.size(); i += 3) got[i] = drain(*batcher.submit(requests[i]));
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], alone(*model, requests[i])) << "request " << i;
  wait_idle(batcher);
  const auto g = metrics.current();
  EXPECT_EQ(g.kv_device_bytes + g.kv_host_bytes, 0);
}

TEST(ServeBatcher, ASplitPolicyBatchesAndGivesWhatItGivesAlone) {
  auto model = load_model(tiny_model("llama-gqa").string());
  serve::Metrics metrics;
  Batcher batcher(*model, nullptr, {ServedPolicy{"hybrid", engine_options(2, "hybrid")}}, BatcherOptions{}, metrics);
  GenerationRequest a = greedy(random_ids(60, 7), 12), b = greedy(random_ids(45, 8), 12);
  a.k = b.k = -1;  // every host token: the result is exact attention, whatever the scheduler would choose
  auto sa = batcher.submit(a);
  auto sb = batcher.submit(b);
  const auto ia = drain(*sa), ib = drain(*sb);
  EXPECT_EQ(ia, alone(*model, greedy(a.prompt, 12), "full"));
  EXPECT_EQ(ib, alone(*model, greedy(b.prompt, 12), "full"));
}

TEST(ServeBatcher, ACancelledRequestFreesItsSequence) {
  auto model = load_model(tiny_model("llama-gqa").string());
  serve::Metrics metrics;
  // A split policy whose host stage is slowed: each decode step takes milliseconds, so the request
  // is still running when it is cancelled after its third token.
  EngineOptions slow = engine_options(2, "hybrid");
  slow.host_job_hook = [](int64_t, int) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  Batcher batcher(*model, nullptr, {ServedPolicy{"hybrid", slow}}, BatcherOptions{}, metrics);
  GenerationRequest r = greedy(random_ids(40, 9), kCtx - 40);
  r.ignore_eos = true;
  auto s = batcher.submit(r);
  std::vector<Piece> pieces;
  while (pieces.size() < 3) s->take(pieces, std::chrono::milliseconds(100));
  s->cancel();
  drain(*s);
  EXPECT_EQ(s->finish(), Finish::Cancelled);
  wait_idle(batcher);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto held = [&] { return metrics.current().kv_device_bytes + metrics.current().kv_host_bytes; };
  while (held() != 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(held(), 0);
  EXPECT_LT(s->usage().completion, kCtx - 40);
}

TEST(ServeBatcher, APromptThatExtendsOneAlreadyRunPlacesThePrefixFromTheCache) {
  auto model = load_model(tiny_model("llama-gqa").string());
  serve::Metrics metrics;
  BatcherOptions o;
  o.prefix_cache_bytes = 64u << 20;
  Batcher batcher(*model, nullptr, {ServedPolicy{"full", engine_options(1)}}, o, metrics);
  const auto prefix = random_ids(50, 11);
  auto first = batcher.submit(greedy(prefix, 4));
  drain(*first);
  EXPECT_EQ(first->usage().cached, 0);
  auto longer = prefix;
  for (int32_t t : random_ids(7, 12)) longer.push_back(t);
  auto second = batcher.submit(greedy(longer, 8));
  const auto ids = drain(*second);
  EXPECT_EQ(second->usage().cached, 50);
  EXPECT_EQ(ids, alone(*model, greedy(longer, 8)));
}

TEST(ServeBatcher, RefusesWhatItCannotRun) {
  auto model = load_model(tiny_model("llama-gqa").string());
  serve::Metrics metrics;
  BatcherOptions o;
  o.max_queue = 0;
  Batcher batcher(*model, nullptr, {ServedPolicy{"full", engine_options(1)}}, o, metrics);
  auto why = [&](GenerationRequest r) {
    try {
      batcher.submit(std::move(r));
    } catch (const Refused& e) {
      return e.why;
    }
    ADD_FAILURE() << "not refused";
    return Refused::Why::BadRequest;
  };
  EXPECT_EQ(why(greedy(random_ids(8, 1), 4)), Refused::Why::QueueFull);
  EXPECT_EQ(why(greedy(random_ids(kCtx, 1), 4)), Refused::Why::BadRequest);
  GenerationRequest other = greedy(random_ids(8, 1), 4);
  other.policy = "hybrid";
  EXPECT_EQ(why(other), Refused::Why::BadRequest);
  GenerationRequest k = greedy(random_ids(8, 1), 4);
  k.k = 8;
  EXPECT_EQ(why(k), Refused::Why::BadRequest);  // full keeps no token on the host
  batcher.drain();
  EXPECT_EQ(why(greedy(random_ids(8, 1), 4)), Refused::Why::Draining);
}

}  // namespace
}  // namespace hg::test
