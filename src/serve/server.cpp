#include "serve/server.h"

#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

#include "hybridgen/error.h"

namespace hg::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr auto kReadTimeout = std::chrono::seconds(10);
constexpr auto kKeepAlive = std::chrono::seconds(2);  // an idle stream's SSE comment: finds a client gone

// Equal strings, in a time that depends on the length of `given` only.
bool same_key(const std::string& given, const std::string& key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ (key.empty() ? 0 : key[i % key.size()]));
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body().dump(), "application/json");
}

// The port of a socket address (IPv4 or IPv6), -1 for another family.
int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// The socket of this request's connection: cpp-httplib 0.11 does not hand it to a handler, so it is
// found among the process's descriptors by its two ports (unique for a connection to this server).
// -1 when none matches.
int connection_socket(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
      continue;
    if (port_of(local) == req.local_port && port_of(peer) == req.remote_port) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

// True once the client has closed its side (a read would return end of file).
bool client_gone(int fd) {
  if (fd < 0) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

int64_t unix_time() { return static_cast<int64_t>(std::time(nullptr)); }

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

// What a request that ended without finishing says: the server ended it, or the engine failed.
ApiError ended_error(const RequestStream& stream) {
  if (stream.finish() == Finish::Error) return ApiError(500, "the engine failed: " + stream.error(), {}, {}, "server_error");
  return ApiError(503, "the request was cancelled: the server is shutting down", {}, {}, "server_error");
}

// One request's reply as the HTTP thread writes it: waits for the pieces, cancels what runs too long.
struct Reply {
  Endpoint endpoint;
  ParsedRequest request;
  std::shared_ptr<RequestStream> stream;
  std::string id, model;
  int64_t created = 0;
  Clock::time_point deadline;
  const Tokenizer* tok = nullptr;

  bool take(std::vector<Piece>& pieces) {
    if (Clock::now() > deadline) stream->cancel();
    return stream->take(pieces, kPoll);
  }
  bool ended_badly() const { return stream->finish() == Finish::Cancelled || stream->finish() == Finish::Error; }
};

// Streams the reply as server-sent events; false (and the request cancelled) once the client is gone.
bool write_events(Reply& r, httplib::DataSink& sink, bool& first, Clock::time_point& last_write) {
  std::vector<Piece> pieces;
  const bool ended = r.take(pieces);
  auto write = [&](const std::string& text) {
    last_write = Clock::now();
    if (sink.write(text.data(), text.size())) return true;
    r.stream->cancel();
    return false;
  };
  if (!pieces.empty() || (first && !ended)) {
    if (!write(sse(stream_chunk(r.endpoint, r.id, r.model, r.created, r.request, pieces, nullptr, first, r.tok))))
      return false;
    first = false;
  } else if (!ended && Clock::now() - last_write > kKeepAlive) {
    return write(": waiting\n\n");
  }
  if (!ended) return true;
  if (r.ended_badly()) {
    if (!write(sse(ended_error(*r.stream).body()))) return false;
  } else {
    const char* finish = finish_reason(r.stream->finish());
    if (!write(sse(stream_chunk(r.endpoint, r.id, r.model, r.created, r.request, {}, finish, first, r.tok)))) return false;
    if (r.request.include_usage) {
      json usage = stream_chunk(r.endpoint, r.id, r.model, r.created, r.request, {}, nullptr, false, r.tok);
      usage["choices"] = json::array();
      usage["usage"] = usage_json(*r.stream);
      if (!write(sse(usage))) return false;
    }
  }
  if (!write("data: [DONE]\n\n")) return false;
  sink.done();
  return true;
}

}  // namespace

Server::Server(Batcher& batcher, Metrics& metrics, ApiContext api, const ServerOptions& options)
    : batcher_(batcher), metrics_(metrics), api_(std::move(api)), options_(options),
      http_(std::make_unique<httplib::Server>()), seeds_(std::random_device{}()) {
  routes();
}

Server::~Server() {
  if (grace_.joinable()) grace_.join();
}

int Server::bind() {
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // A request's bytes stop for at most kReadTimeout: a reader blocked in a half-sent request holds
  // its HTTP thread (and, at shutdown, the exit) no longer than that.
  http_->set_read_timeout(std::min<time_t>(options_.timeout_s, kReadTimeout.count()), 0);
  http_->set_write_timeout(options_.timeout_s, 0);
  int port = options_.port;
  if (port == 0) port = http_->bind_to_any_port(options_.host);
  else if (!http_->bind_to_port(options_.host, port)) port = -1;
  if (port <= 0)
    throw Error("serve: cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                " (in use, or not an address of this machine)");
  return port;
}

void Server::run() { http_->listen_after_bind(); }

// cpp-httplib cuts a chunked reply off once its listening socket closes: the socket closes only
// after the streams in flight have written their last event (or the grace period has cancelled
// them). Until then a new request is answered 503.
void Server::shutdown() {
  if (shutting_down_.exchange(true)) return;
  batcher_.drain();
  const double grace = options_.grace_s;
  grace_ = std::thread([this, grace] {
    const auto until = Clock::now() + std::chrono::duration<double>(grace);
    while (in_flight_ > 0 && Clock::now() < until) std::this_thread::sleep_for(kPoll);
    if (in_flight_ > 0) {
      spdlog::warn("serve: the grace period ({} s) is over: cancelling the requests still running", grace);
      batcher_.cancel_all();
      const auto cut = Clock::now() + std::chrono::seconds(5);
      while (in_flight_ > 0 && Clock::now() < cut) std::this_thread::sleep_for(kPoll);
    }
    http_->stop();  // listen_after_bind returns once every handler has
  });
}

void Server::routes() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (auth.rfind(bearer, 0) == 0 && same_key(auth.substr(bearer.size()), options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, auth.empty() ? "an API key is required: Authorization: Bearer KEY"
                                               : "the API key is not this server's",
                             {}, "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, ApiError(413, "the request body is larger than this server takes (--max-body)"));
    else if (res.status == 404)
      send_error(res, ApiError(404, "no such endpoint", {}, "not_found"));
    else
      send_error(res, ApiError(res.status, "the request could not be read (HTTP " + std::to_string(res.status) + ")"));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, what, {}, {}, "server_error"));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request_done(res.status);
    spdlog::debug("{} {} {}", req.method, req.path, res.status);
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool up = !shutting_down_;
    res.status = up ? 200 : 503;
    res.set_content(json{{"status", up ? "ok" : "shutting down"}}.dump(), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.prometheus_text(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", api_.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "hybridgen"},
                  {"meta", {{"ctx", api_.ctx}, {"vocab", api_.vocab}, {"policies", batcher_.policy_labels()},
                            {"parallel", batcher_.slots()}}}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(Endpoint::Completions, req, res);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(Endpoint::Chat, req, res);
  });
}

void Server::handle_generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto reply = std::make_shared<Reply>();
  ++in_flight_;
  // Counts the request in flight until its reply is written (a stream's: until its provider is released).
  auto done = std::shared_ptr<void>(nullptr, [this](void*) { --in_flight_; });
  try {
    if (shutting_down_) throw ApiError(503, "the server is shutting down", {}, {}, "server_error");
    {
      std::lock_guard lock(seeds_mutex_);
      reply->request = parse_request(endpoint, req.body, api_, seeds_);
    }
    reply->stream = batcher_.submit(reply->request.generation);
  } catch (const ApiError& e) {
    send_error(res, e);
    return;
  } catch (const Refused& e) {
    if (e.why == Refused::Why::QueueFull) res.set_header("Retry-After", "1");
    const int status = e.why == Refused::Why::QueueFull ? 429 : e.why == Refused::Why::Draining ? 503 : 400;
    send_error(res, ApiError(status, e.what(), e.param, status == 429 ? "rate_limit_exceeded" : "",
                             status == 400 ? "invalid_request_error" : "server_error"));
    return;
  }
  reply->endpoint = endpoint;
  reply->id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_);
  reply->model = api_.model_id;
  reply->created = unix_time();
  reply->deadline = Clock::now() + std::chrono::seconds(options_.timeout_s);
  reply->tok = api_.tok;
  if (reply->request.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [reply, first = true, last = Clock::now()](size_t, httplib::DataSink& sink) mutable {
          return write_events(*reply, sink, first, last);
        },
        [reply, done](bool) { reply->stream->cancel(); });  // ends early or late: nothing of it runs on
    return;
  }
  // A whole reply is written only at the end: meanwhile the connection is watched, so that a
  // client that hangs up cancels its request as a stream's does.
  const int socket = connection_socket(req);
  std::vector<Piece> pieces;
  while (!reply->take(pieces))
    if (client_gone(socket)) reply->stream->cancel();
  if (reply->ended_badly()) {
    send_error(res, ended_error(*reply->stream));
    return;
  }
  res.set_content(reply_body(endpoint, reply->id, reply->model, reply->created, reply->request, pieces,
                             *reply->stream, api_.tok).dump(),
                  "application/json");
}

}  // namespace hg::serve
