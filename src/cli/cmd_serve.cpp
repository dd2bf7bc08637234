// hybridgen serve: the OpenAI-compatible server (src/serve/). Parses the options, loads the model,
// builds one engine per served policy, and takes SIGTERM / SIGINT: the first stops accepting and
// lets streams in flight finish within --grace, then the process exits 0; a second ends it at once.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "hybridgen/error.h"
#include "serve/server.h"
#include "util/strings.h"

namespace hg::cli {

namespace {

struct ServeOptions {
  ModelOptions model;
  RuntimeOptions runtime;
  PolicyOptions policy;
  SamplerOptions sampler;
  serve::ServerOptions server;
  serve::BatcherOptions batcher;
  int parallel = 4;
  std::string api_key_file, alias, chat_template = "auto";
  double max_body_mb = 8;
  int prefix_cache_mb = 1024;
};

// SIGTERM and SIGINT, taken on a thread of their own (signalfd; util/signals.h says why no thread
// that computes may take one). The first calls `first`; the second ends the process at once.
class ShutdownSignals {
 public:
  explicit ShutdownSignals(std::function<void()> first) : first_(std::move(first)) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // every thread started from here on inherits it
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    if (signal_fd_ < 0 || stop_fd_ < 0) throw Error("serve: cannot watch for SIGTERM and SIGINT");
    thread_ = std::thread([this] { watch(); });
  }
  ~ShutdownSignals() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(stop_fd_, &one, sizeof one);
    thread_.join();
    close(signal_fd_);
    close(stop_fd_);
  }
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

 private:
  void watch() {
    int seen = 0;
    for (;;) {
      pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) return;
      signalfd_siginfo info;
      if (read(signal_fd_, &info, sizeof info) != sizeof info) continue;
      if (++seen > 1) {
        std::fprintf(stderr, "serve: second signal: exiting now\n");
        _exit(128 + static_cast<int>(info.ssi_signo));
      }
      std::fprintf(stderr, "serve: %s: no new requests; finishing those in flight (a second signal ends now)\n",
                   strsignal(static_cast<int>(info.ssi_signo)));
      first_();
    }
  }
  std::function<void()> first_;
  int signal_fd_ = -1, stop_fd_ = -1;
  std::thread thread_;
};

std::string model_id(const ServeOptions& o) {
  if (!o.alias.empty()) return o.alias;
  if (!o.model.synthetic.empty()) return std::filesystem::path(o.model.synthetic).stem().string();
  const std::filesystem::path p(o.model.model);
  return p.has_extension() || p.has_parent_path() ? p.stem().string() : o.model.model;
}

std::string api_key(const ServeOptions& o) {
  if (!o.api_key_file.empty()) {
    if (!o.server.api_key.empty()) throw Error("give --api-key or --api-key-file, not both");
    std::string key = read_text_file(o.api_key_file);
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
    if (key.empty()) throw Error("--api-key-file " + o.api_key_file + " is empty");
    return key;
  }
  return o.server.api_key;
}

void check_options(const ServeOptions& o) {
  check_range("--parallel", o.parallel, 1, kMaxBatch, "sequences decoded together");
  check_range("--port", o.server.port, 0, 65535, "0: any free port");
  check_range("--timeout", o.server.timeout_s, 1, 86400, "seconds");
  check_real_range("--grace", o.server.grace_s, 0, 86400, "seconds");
  check_real_range("--max-body", o.max_body_mb, 0.001, 4096, "MB");
  check_range("--max-queue", o.batcher.max_queue, 0, 1 << 20);
  check_range("--prefill-chunk", o.batcher.prefill_chunk, 16, 1 << 20, "tokens");
  check_range("--prefix-cache", o.prefix_cache_mb, 0, 1 << 22, "MiB; 0: off");
  check_range("--http-threads", o.server.http_threads, 2, 4096);
}

void run_serve(ServeOptions o) {
  setup_logging(o.runtime.verbose);
  check_options(o);
  o.server.api_key = api_key(o);
  o.server.max_body_bytes = static_cast<size_t>(o.max_body_mb * 1e6);
  o.batcher.prefix_cache_bytes = static_cast<size_t>(o.prefix_cache_mb) << 20;
  o.policy.seed = o.sampler.seed;
  // Before any thread starts: the engine's, the batcher's and the HTTP threads inherit the mask.
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not the end of the server
  std::unique_ptr<serve::Server> server;
  std::mutex server_mutex;
  bool stop_early = false;
  ShutdownSignals signals([&] {
    std::lock_guard lock(server_mutex);
    if (server) server->shutdown();
    else stop_early = true;
  });
  auto model = load_model(o.model);
  check_sampler_options(o.sampler, model->spec.vocab_size, std::max(model->spec.max_ctx, o.runtime.ctx));
  auto tok = load_tokenizer(o.model, *model);
  const std::vector<PolicyEntry> entries = parse_policy_list(o.policy.preset);
  std::vector<serve::ServedPolicy> policies;
  for (const PolicyEntry& e : entries) {
    EngineOptions eo = engine_options(o.runtime, model->spec, model->spec.max_ctx, o.parallel);
    apply_policy_options(entry_options(o.policy, e), e.preset, eo, entry_presets(entries));
    policies.push_back({e.label, eo});
  }
  serve::Metrics metrics;
  serve::Batcher batcher(*model, tok.get(), policies, o.batcher, metrics);
  serve::ApiContext api{model_id(o), tok.get(),
                        o.chat_template == "auto" ? ChatTemplate::Auto : parse_chat_template_name(o.chat_template),
                        model->spec.vocab_size, batcher.ctx(), o.sampler};
  {
    std::lock_guard lock(server_mutex);
    if (stop_early) return;
    server = std::make_unique<serve::Server>(batcher, metrics, api, o.server);
  }
  const int port = server->bind();
  std::fprintf(stderr, "serve: '%s' (%s) on http://%s:%d/v1, %d sequences of %d tokens per policy\n",
               api.model_id.c_str(), join(batcher.policy_labels()).c_str(), o.server.host.c_str(), port, o.parallel,
               batcher.ctx());
  std::fflush(stderr);
  server->run();
  {
    std::lock_guard lock(server_mutex);
    server.reset();  // joins its grace timer while the batcher it watches is still here
  }
  std::fprintf(stderr, "serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "an OpenAI-compatible HTTP server (completions, chat, streaming) with continuous batching");
  add_model_options(*cmd, o->model);
  add_runtime_options(*cmd, o->runtime);
  cmd->add_option("-s,--seed", o->sampler.seed, "seed of the policy's noise (keyformer); a request without 'seed' gets a random one")
      ->capture_default_str();
  add_policy_options(*cmd, o->policy, /*preset_list=*/true);
  cmd->add_option("--host", o->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->server.port, "port (0: any free one)")->capture_default_str();
  cmd->add_option("--parallel", o->parallel, "sequences decoded together, per served policy")->capture_default_str();
  cmd->add_option("--alias", o->alias, "the model's id in /v1/models and requests (default: the file's name)");
  cmd->add_option("--api-key", o->server.api_key, "ask /v1/ requests for 'Authorization: Bearer KEY'");
  cmd->add_option("--api-key-file", o->api_key_file, "read the key from this file");
  cmd->add_option("--timeout", o->server.timeout_s, "seconds: the longest a request runs, and the socket write timeout (a request's bytes may pause 10 s at most)")
      ->capture_default_str();
  cmd->add_option("--grace", o->server.grace_s, "seconds streams in flight may go on after SIGTERM/SIGINT")->capture_default_str();
  cmd->add_option("--max-queue", o->batcher.max_queue, "requests waiting for a slot before 429")->capture_default_str();
  cmd->add_option("--max-body", o->max_body_mb, "largest request body, MB (413 past it)")->capture_default_str();
  cmd->add_option("--prefill-chunk", o->batcher.prefill_chunk, "prompt tokens prefilled between two decode steps")
      ->capture_default_str();
  cmd->add_option("--prefix-cache", o->prefix_cache_mb, "MiB of prefill states kept for prompts that share a prefix (0: off)")
      ->capture_default_str();
  cmd->add_option("--state-cache", o->batcher.state_cache_dir, "also keep the prefix cache's states in this directory");
  cmd->add_option("--http-threads", o->server.http_threads, "connections served at once")->capture_default_str();
  add_sampler_options(*cmd, o->sampler, "; a request's default");
  cmd->add_option("--chat-template", o->chat_template, "auto|chatml|llama3|llama2")->capture_default_str();
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace hg::cli
