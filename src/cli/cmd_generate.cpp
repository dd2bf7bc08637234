// hybridgen generate: prefill a prompt, then sample tokens and stream them as text.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/stats_print.h"
#include "engine/sampler.h"
#include "hybridgen/error.h"
#include "hybridgen/prefill_state.h"

namespace hg::cli {

namespace {

int common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<int>(ia - a.begin());
}

struct GenerateOptions {
  ModelOptions model;
  RuntimeOptions runtime;
  PolicyOptions policy;
  SamplerOptions sampler;
  std::string prompt, prompt_file, ids, ids_file;
  int n_predict = 64;
  bool chat = false;
  std::string chat_template = "auto";
  std::string system;
  bool ignore_eos = false;
  bool stats = false;
  std::string stats_json;
  std::string save_state, load_state;  // --save-state, --load-state
};

std::vector<int32_t> prompt_ids(const GenerateOptions& o, const Tokenizer* tok, const PrefillState* loaded) {
  const int sources = !o.prompt.empty() + !o.prompt_file.empty() + !o.ids.empty() + !o.ids_file.empty();
  if (sources > 1) throw Error("give only one of -p, -f, --ids, --ids-file");
  if (sources == 0 && loaded) return loaded->tokens;  // --load-state alone: continue the saved prompt
  if (!o.ids.empty()) return parse_ids(o.ids, "--ids");
  if (!o.ids_file.empty()) return parse_ids(read_text_file(o.ids_file), o.ids_file);
  std::string text = !o.prompt_file.empty() ? read_text_file(o.prompt_file) : o.prompt;
  if (sources == 0) text = "The meaning of life is";
  if (!tok) throw Error("this model has no tokenizer: give --tokenizer FILE, or token ids with --ids / --ids-file");
  if (o.chat) {
    text = format_chat(*tok, o.chat_template == "auto" ? ChatTemplate::Auto : parse_chat_template_name(o.chat_template),
                       text, o.system);
  }
  return tok->encode(text, /*add_special=*/true);
}

// Ranges of the numeric options (the policy's and the runtime's are checked where they are applied).
void check_options(const GenerateOptions& o, const ModelSpec& spec) {
  const int max_ctx = std::max(spec.max_ctx, o.runtime.ctx);
  check_range("-n", o.n_predict, 0, max_ctx, "the model's context");
  check_sampler_options(o.sampler, spec.vocab_size, max_ctx);
}

void run_generate(const GenerateOptions& o) {
  setup_logging(o.runtime.verbose);
  // Ctrl-C (from here on, model loading included) stops before the next prefill chunk or decode
  // step: the text so far stays, the stats still print, exit status 130.
  const InterruptScope interrupt;
  auto model = load_model(o.model);
  check_options(o, model->spec);
  auto tok = load_tokenizer(o.model, *model);
  std::optional<PrefillState> loaded;
  if (!o.load_state.empty()) {
    loaded = load_prefill_state(o.load_state);
    loaded->check_model(*model, o.load_state);
  }
  std::vector<int32_t> history = prompt_ids(o, tok.get(), loaded ? &*loaded : nullptr);
  if (history.empty()) throw Error("the prompt is empty after tokenization");

  const int needed = static_cast<int>(history.size()) + o.n_predict;
  EngineOptions eo = engine_options(o.runtime, model->spec, std::min(needed, model->spec.max_ctx), 1);
  PolicyOptions po = o.policy;
  po.seed = o.sampler.seed;
  apply_policy_options(po, po.preset, eo);
  if (static_cast<int>(history.size()) > eo.ctx)
    throw Error("prompt of " + std::to_string(history.size()) + " tokens is longer than the context (" +
                std::to_string(eo.ctx) + " tokens)");
  Engine engine(*model, eo);
  Sampler sampler(o.sampler, engine.vocab_size());
  std::vector<float> logits(static_cast<size_t>(engine.vocab_size()));

  std::vector<int32_t> stop;
  if (tok && !o.ignore_eos) stop = tok->stop_ids();
  std::unique_ptr<StreamDecoder> stream = tok ? std::make_unique<StreamDecoder>(*tok) : nullptr;
  std::vector<int32_t> generated;
  generated.reserve(static_cast<size_t>(o.n_predict));

  const int seq = 0;
  // --load-state: the prompt's first tokens that the state holds are placed, not prefilled (at
  // least the last prompt token is prefilled when the state does not end exactly there: its
  // logits are not kept); --save-state records the prompt's prefill on top of them.
  int reused = 0;
  if (loaded) {
    reused = common_prefix(loaded->tokens, history);
    if (reused == static_cast<int>(history.size()) && reused < loaded->n_tokens()) --reused;
    engine.load_state(seq, *loaded, reused == loaded->n_tokens() ? logits.data() : nullptr, reused);
    std::fprintf(stderr, "%s: reused %d of the prompt's %zu tokens\n", o.load_state.c_str(), reused, history.size());
  }
  std::optional<PrefillState> record;
  if (!o.save_state.empty()) {
    if (!engine.exact_prefill())
      throw Error("--save-state: the policy '" + engine.describe_attention() +
                  "' drops or prunes tokens during its prefill; save the state under a policy that does not");
    record = loaded ? loaded->prefix(reused) : PrefillState::for_model(*model);
  }
  const std::span<const int32_t> rest = std::span<const int32_t>(history).subspan(static_cast<size_t>(reused));
  const bool prefilled = prefill_with_progress(engine, seq, rest, logits.data(), progress_options(o.runtime),
                                               &interrupt, record ? &*record : nullptr);
  if (prefilled && record) save_prefill_state(*record, o.save_state);
  for (int i = 0; prefilled && i < o.n_predict && !interrupt.interrupted(); ++i) {
    const int32_t next = sampler.sample(logits.data(), history);
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) break;
    history.push_back(next);
    generated.push_back(next);
    if (stream) {
      std::fputs(stream->push(next).c_str(), stdout);
      std::fflush(stdout);
    }
    if (i + 1 == o.n_predict) break;
    if (engine.position(seq) >= eo.ctx) {
      std::fprintf(stderr,
                   "generate: stopped after %zu of %d tokens: the context of %d tokens is full (--ctx; the "
                   "model's trained context is %d)\n",
                   generated.size(), o.n_predict, eo.ctx, model->spec.max_ctx);
      break;
    }
    engine.decode(std::span<const int>(&seq, 1), std::span<const int32_t>(&next, 1), logits.data());
  }
  if (stream) {
    std::fputs(stream->flush().c_str(), stdout);
    std::fputs("\n", stdout);
  } else {
    std::printf("%s\n", nlohmann::json(generated).dump().c_str());
  }
  std::fflush(stdout);
  if (interrupt.interrupted())
    std::fprintf(stderr, "interrupted: stopped after %zu generated tokens%s\n", generated.size(),
                 prefilled ? "" : " (during prefill)");
  if (o.stats) print_run_stats(stderr, engine);
  if (!o.stats_json.empty()) write_stats_json(o.stats_json, engine);
  if (interrupt.interrupted()) throw Interrupted();
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "generate text from a prompt, streaming it as it is produced");
  add_model_options(*cmd, o->model);
  add_runtime_options(*cmd, o->runtime);
  // one seed for the sampler and the policy's noise (keyformer): copied in run_generate
  cmd->add_option("-s,--seed", o->sampler.seed, "seed of the sampler and of the policy's noise (keyformer)")
      ->capture_default_str();
  add_policy_options(*cmd, o->policy);
  cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  cmd->add_option("-f,--file", o->prompt_file, "read the prompt from a file");
  cmd->add_option("--ids", o->ids, "prompt as a JSON array of token ids");
  cmd->add_option("--ids-file", o->ids_file, "file holding a JSON array of token ids");
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate")->capture_default_str();
  add_sampler_options(*cmd, o->sampler);
  cmd->add_flag("--chat", o->chat, "wrap the prompt in the model's chat template");
  cmd->add_option("--chat-template", o->chat_template, "auto|chatml|llama3|llama2")->capture_default_str();
  cmd->add_option("--system", o->system, "system prompt for --chat");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_flag("--stats", o->stats, "print prefill and decode speed (to stderr)");
  cmd->add_option("--stats-json", o->stats_json, "write run statistics as JSON to this file");
  cmd->add_option("--save-state", o->save_state,
                  "save the prompt's prefill (K/V of every layer, last logits) to this file for --load-state");
  cmd->add_option("--load-state", o->load_state,
                  "start from a saved prefill: the prompt's tokens it holds are not prefilled again (no prompt: "
                  "continue the saved one)");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace hg::cli
