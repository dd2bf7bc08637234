// `hybridgen serve`: the OpenAI-compatible HTTP front door of the engine (cpp-httplib, Debian's
// libcpp-httplib-dev). POST /v1/completions and /v1/chat/completions (whole replies, or
// server-sent events ending in `data: [DONE]` with "stream": true), GET /v1/models, /health and
// /metrics (Prometheus). Each request is parsed on an HTTP thread (serve/openai.h), run by the
// batcher's one engine thread (serve/batcher.h), and its tokens come back through its
// RequestStream to the HTTP thread that writes them.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/openai.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hg::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (bind() says which)
  std::string api_key;               // empty: no key asked for
  size_t max_body_bytes = 8u << 20;  // a larger body is refused with 413
  int timeout_s = 600;               // socket read/write timeout, and the longest a request may run
  double grace_s = 30;               // after the first SIGTERM/SIGINT: how long streams in flight may go on
  int http_threads = 32;             // connections served at once (streams hold theirs)
};

class Server {
 public:
  Server(Batcher& batcher, Metrics& metrics, ApiContext api, const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; the port bound. hg::Error when it cannot.
  int bind();
  // Serves until shutdown() has stopped it and every request in flight has ended.
  void run();
  // Stops taking requests (a new one is answered 503) and lets those in flight finish for up to
  // grace_s, then cancels them; the listening socket closes once every reply is written, and run()
  // returns. Safe from any thread; the second call does nothing.
  void shutdown();

 private:
  void routes();
  void handle_generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);

  Batcher& batcher_;
  Metrics& metrics_;
  ApiContext api_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> in_flight_{0};  // generation requests whose reply is not written yet
  std::thread grace_;
  std::mutex seeds_mutex_;
  std::mt19937_64 seeds_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace hg::serve
