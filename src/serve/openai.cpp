#include "serve/openai.h"

#include <limits>
#include <optional>

#include "hybridgen/error.h"
#include "tokenizer/utf8.h"

namespace hg::serve {

using json = nlohmann::json;

namespace {

constexpr int kMaxLogprobs = 20;
constexpr size_t kMaxStops = 4;

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// A field that is absent or null reads as absent; a field of the wrong type is an error naming it.
const json* field(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> get_int(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(key, std::string("'") + key + "' must be an integer");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi) ? hi + 1 : v->get<int64_t>();
  if (x < lo || x > hi)
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                 ", got " + v->dump());
  return x;
}

std::optional<double> get_number(const json& body, const char* key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    bad(key, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v->dump());
  return x;
}

std::optional<bool> get_bool(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, std::string("'") + key + "' must be true or false");
  return v->get<bool>();
}

std::vector<int32_t> token_ids(const json& array, const ApiContext& ctx) {
  std::vector<int32_t> ids;
  for (const json& t : array) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.vocab)
      bad("prompt", "token ids must be integers from 0 to " + std::to_string(ctx.vocab - 1) + ", got " + t.dump());
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::vector<int32_t> encode(const std::string& text, const ApiContext& ctx, const char* param) {
  if (!ctx.tok) bad(param, "this model has no tokenizer: send the prompt as token ids");
  return ctx.tok->encode(text, /*add_special=*/true);
}

// "prompt": a string, token ids, or a list holding one of either.
void read_prompt(const json& body, const ApiContext& ctx, ParsedRequest& out) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  const json* one = p;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) bad("prompt", "one prompt per request: this server answers n = 1");
    one = &p->front();
  }
  if (one->is_string()) {
    out.prompt_text = one->get<std::string>();
    out.generation.prompt = encode(out.prompt_text, ctx, "prompt");
  } else if (one->is_array()) {
    out.generation.prompt = token_ids(*one, ctx);
    if (ctx.tok) out.prompt_text = ctx.tok->decode(out.generation.prompt);
  } else {
    bad("prompt", "'prompt' must be a string, a list of token ids, or a list holding one of them");
  }
}

std::string message_text(const json& content, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "a message's content must be a string or a list of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(param, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

void read_messages(const json& body, const ApiContext& ctx, ParsedRequest& out) {
  const json* m = field(body, "messages");
  if (!m || !m->is_array() || m->empty()) bad("messages", "'messages' must be a non-empty list");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      bad("messages[" + std::to_string(i) + "]", "each message must be an object with a string 'role'");
    const std::string role = msg["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant")
      bad("messages[" + std::to_string(i) + "].role", "role '" + role + "' is not supported (system, developer, user, assistant)");
    messages.push_back({role, message_text(msg.contains("content") ? msg["content"] : json(), i)});
  }
  if (!ctx.tok) bad("messages", "this model has no tokenizer: use /v1/completions with token ids");
  try {
    out.prompt_text = format_chat(*ctx.tok, ctx.chat_template, messages);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  out.generation.prompt = encode(out.prompt_text, ctx, "messages");
}

void read_stop(const json& body, GenerationRequest& g) {
  const json* s = field(body, "stop");
  if (!s) return;
  const std::string msg = "'stop' must be a string or a list of at most 4 non-empty strings";
  if (s->is_string()) {
    if (s->get<std::string>().empty()) bad("stop", msg);
    g.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array() || s->size() > kMaxStops) bad("stop", msg);
  for (const json& x : *s) {
    if (!x.is_string() || x.get<std::string>().empty()) bad("stop", msg);
    g.stop.push_back(x.get<std::string>());
  }
}

void read_sampling(const json& body, const ApiContext& ctx, GenerationRequest& g, std::mt19937_64& seeds) {
  SamplerOptions& s = g.sampler;
  s = ctx.defaults;
  if (auto v = get_number(body, "temperature", 0, 2)) s.temperature = static_cast<float>(*v);
  if (auto v = get_number(body, "top_p", 0, 1)) s.top_p = static_cast<float>(*v);
  if (auto v = get_int(body, "top_k", 0, ctx.vocab)) s.top_k = static_cast<int>(*v);
  if (auto v = get_number(body, "min_p", 0, 1)) s.min_p = static_cast<float>(*v);
  if (auto v = get_number(body, "repeat_penalty", 0.01, 100)) s.repeat_penalty = static_cast<float>(*v);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const auto seed = get_int(body, "seed", std::numeric_limits<int64_t>::min(), kMax);
  s.seed = seed ? static_cast<uint64_t>(*seed) : seeds();
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (auto v = get_number(body, key, -2, 2); v && *v != 0)
      throw ApiError(400, std::string("'") + key + "' is not supported; use repeat_penalty", key);
  if (auto n = get_int(body, "n", 1, kMax); n && *n != 1) bad("n", "this server answers n = 1");
  if (field(body, "logit_bias") && !(*field(body, "logit_bias")).empty())
    bad("logit_bias", "'logit_bias' is not supported");
}

void read_logprobs(Endpoint endpoint, const json& body, GenerationRequest& g) {
  if (endpoint == Endpoint::Completions) {
    if (auto n = get_int(body, "logprobs", 0, kMaxLogprobs)) g.top_logprobs = static_cast<int>(*n);
    return;
  }
  const auto top = get_int(body, "top_logprobs", 0, kMaxLogprobs);
  if (get_bool(body, "logprobs").value_or(false)) g.top_logprobs = static_cast<int>(top.value_or(0));
  else if (top) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
}

void read_extension(const json& body, const ApiContext& ctx, GenerationRequest& g) {
  const json* x = field(body, "hybridgen");
  if (!x) return;
  if (!x->is_object()) bad("hybridgen", "'hybridgen' must be an object: {\"policy\": ..., \"k\": ...}");
  for (const auto& [key, value] : x->items())
    if (key != "policy" && key != "k") bad("hybridgen." + key, "unknown knob 'hybridgen." + key + "' (known: policy, k)");
  if (const json* p = field(*x, "policy")) {
    if (!p->is_string()) bad("hybridgen.policy", "'hybridgen.policy' must be a string");
    g.policy = p->get<std::string>();
  }
  if (auto k = get_int(*x, "k", 0, ctx.ctx)) g.k = static_cast<int>(*k);
}

void read_max_tokens(Endpoint endpoint, const json& body, const ApiContext& ctx, GenerationRequest& g) {
  const int room = ctx.ctx - static_cast<int>(g.prompt.size());
  std::optional<int64_t> n = get_int(body, "max_completion_tokens", 1, ctx.ctx);
  if (!n) n = get_int(body, "max_tokens", 1, ctx.ctx);
  // OpenAI's defaults: 16 for a completion, the rest of the context for a chat.
  g.max_tokens = static_cast<int>(n.value_or(endpoint == Endpoint::Completions ? 16 : std::max(room, 1)));
}

// {"token", "logprob", "bytes"} of a token, as the chat API writes them.
json chat_token(int32_t id, float logprob, const Tokenizer* tok) {
  std::string raw = tok ? tok->decode_raw(std::vector<int32_t>{id}) : std::string();
  std::vector<int> bytes(raw.begin(), raw.end());
  for (int& b : bytes) b &= 0xff;
  return {{"token", tok::utf8_lossy(raw)}, {"logprob", logprob}, {"bytes", bytes}};
}

std::string token_text(int32_t id, const Tokenizer* tok) {
  return tok ? tok->decode(std::vector<int32_t>{id}) : std::to_string(id);
}

json logprobs_json(Endpoint endpoint, const std::vector<Piece>& pieces, const Tokenizer* tok, size_t text_offset) {
  if (endpoint == Endpoint::Chat) {
    json content = json::array();
    for (const Piece& p : pieces) {
      if (p.id < 0) continue;
      json t = chat_token(p.id, p.logprob, tok);
      t["top_logprobs"] = json::array();
      for (const TokenLogprob& alt : p.top) t["top_logprobs"].push_back(chat_token(alt.id, alt.logprob, tok));
      content.push_back(std::move(t));
    }
    return {{"content", std::move(content)}};
  }
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const Piece& p : pieces) {
    if (p.id < 0) continue;
    json top = json::object();
    for (const TokenLogprob& alt : p.top) top[token_text(alt.id, tok)] = alt.logprob;
    out["tokens"].push_back(token_text(p.id, tok));
    out["token_logprobs"].push_back(p.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += p.text.size();
  }
  return out;
}

}  // namespace

json ApiError::body() const {
  return {{"error", {{"message", what()}, {"type", type}, {"param", param.empty() ? json() : json(param)},
                     {"code", code.empty() ? json() : json(code)}}}};
}

ParsedRequest parse_request(Endpoint endpoint, const std::string& raw, const ApiContext& ctx, std::mt19937_64& seeds) {
  // JSON cannot carry bytes that are not UTF-8: they are read as U+FFFD (from_utf8_lossy).
  const json body = json::parse(tok::utf8_is_valid(raw) ? raw : tok::utf8_lossy(raw), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(400, "the body is not valid JSON");
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  const json* model = field(body, "model");
  if (!model || !model->is_string()) bad("model", "'model' is required: a string (GET /v1/models lists it)");
  if (model->get<std::string>() != ctx.model_id)
    throw ApiError(404, "the model '" + model->get<std::string>() + "' does not exist here (this server runs '" +
                            ctx.model_id + "')", "model", "model_not_found");
  ParsedRequest out;
  if (endpoint == Endpoint::Completions) read_prompt(body, ctx, out);
  else read_messages(body, ctx, out);
  if (out.generation.prompt.empty()) bad(endpoint == Endpoint::Chat ? "messages" : "prompt", "the prompt is empty");
  if (static_cast<int>(out.generation.prompt.size()) >= ctx.ctx)
    throw ApiError(400, "this server's context is " + std::to_string(ctx.ctx) + " tokens; the prompt has " +
                            std::to_string(out.generation.prompt.size()), endpoint == Endpoint::Chat ? "messages" : "prompt",
                   "context_length_exceeded");
  read_max_tokens(endpoint, body, ctx, out.generation);
  read_sampling(body, ctx, out.generation, seeds);
  read_stop(body, out.generation);
  read_logprobs(endpoint, body, out.generation);
  read_extension(body, ctx, out.generation);
  out.generation.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  out.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    out.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  if (endpoint == Endpoint::Completions) out.echo = get_bool(body, "echo").value_or(false);
  return out;
}

json usage_json(const RequestStream& stream) {
  const RequestStream::Usage u = stream.usage();
  return {{"prompt_tokens", u.prompt},
          {"completion_tokens", u.completion},
          {"total_tokens", u.prompt + u.completion},
          {"prompt_tokens_details", {{"cached_tokens", u.cached}}}};
}

json reply_body(Endpoint endpoint, const std::string& id, const std::string& model, int64_t created,
                const ParsedRequest& request, const std::vector<Piece>& pieces, const RequestStream& stream,
                const Tokenizer* tok) {
  std::string text = request.echo ? request.prompt_text : std::string();
  for (const Piece& p : pieces) text += p.text;
  const bool logprobs = request.generation.top_logprobs >= 0;
  json choice = {{"index", 0}, {"finish_reason", finish_reason(stream.finish())}};
  choice["logprobs"] = logprobs ? logprobs_json(endpoint, pieces, tok, request.echo ? request.prompt_text.size() : 0) : json();
  if (endpoint == Endpoint::Chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  return {{"id", id},
          {"object", endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json(stream)}};
}

json stream_chunk(Endpoint endpoint, const std::string& id, const std::string& model, int64_t created,
                  const ParsedRequest& request, const std::vector<Piece>& pieces, const char* finish, bool first,
                  const Tokenizer* tok) {
  std::string text = first && request.echo ? request.prompt_text : std::string();
  for (const Piece& p : pieces) text += p.text;
  json choice = {{"index", 0}, {"finish_reason", finish ? json(finish) : json()}};
  const bool logprobs = request.generation.top_logprobs >= 0 && !pieces.empty();
  choice["logprobs"] = logprobs ? logprobs_json(endpoint, pieces, tok, 0) : json();
  if (endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  return {{"id", id},
          {"object", endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({std::move(choice)})}};
}

}  // namespace hg::serve
