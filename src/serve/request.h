// A generation request as the server's batcher takes it, and the channel its tokens come back on.
// The HTTP side (serve/server.h) parses a request into a GenerationRequest; the batcher
// (serve/batcher.h) runs it and pushes one Piece per token into its RequestStream, which the HTTP
// handler drains as it writes the reply.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace hg::serve {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings: the text ends before the first one
  int top_logprobs = -1;          // -1: no logprobs; n >= 0: the sampled token's and the n likeliest
  std::string policy;             // a served policy's label; empty: the server's first
  std::optional<int> k;           // this sequence's K (host tokens per kv-head), over the scheduler's
  bool ignore_eos = false;        // go on past end-of-sequence tokens (llama-server's ignore_eos)
};

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// One generated token: its id, the text it released (text that might begin a stop string is held
// back until it cannot), its log-probability and the likeliest alternatives when asked for.
struct Piece {
  int32_t id = 0;
  std::string text;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

enum class Finish { Running, Stop, Length, Cancelled, Error };
const char* finish_reason(Finish f);  // "stop", "length", "cancelled", "error"

class RequestStream {
 public:
  // The HTTP side. Moves the pieces that arrived into `out`, waiting up to `wait` when there are
  // none; true once the stream has ended and every piece has been taken.
  bool take(std::vector<Piece>& out, std::chrono::milliseconds wait);
  // The client went away (or the server is ending): the batcher frees the sequence at its next step.
  void cancel();
  bool cancelled() const;
  Finish finish() const;
  std::string error() const;
  struct Usage {
    int prompt = 0;
    int cached = 0;  // prompt tokens placed from the prefix cache, not prefilled
    int completion = 0;
  };
  Usage usage() const;

  // The batcher's side.
  void started(int prompt_tokens, int cached_tokens);
  void push(Piece piece);
  void end(Finish finish, std::string error = {});

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Piece> pieces_;
  Finish finish_ = Finish::Running;
  std::string error_;
  bool cancelled_ = false;
  Usage usage_;
};

}  // namespace hg::serve
