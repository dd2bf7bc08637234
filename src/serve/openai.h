// The OpenAI API's request and reply bodies: a completion or chat request read into a
// GenerationRequest (every field checked: a wrong type or value is an ApiError naming the field,
// as OpenAI's own `invalid_request_error`), and the replies written back, whole or as
// server-sent-event chunks.
#pragma once
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridgen/tokenizer.h"
#include "serve/request.h"

namespace hg::serve {

// An error reply: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int s, const std::string& message, std::string p = {}, std::string c = {},
           std::string t = "invalid_request_error")
      : std::runtime_error(message), status(s), type(std::move(t)), param(std::move(p)), code(std::move(c)) {}
  nlohmann::json body() const;
};

// What a request is read against: the served model and its tokenizer.
struct ApiContext {
  std::string model_id;                   // what /v1/models lists; requests must name it
  const Tokenizer* tok = nullptr;         // null: token-id prompts only
  ChatTemplate chat_template = ChatTemplate::Auto;
  int vocab = 0;
  int ctx = 0;                            // tokens per sequence
  SamplerOptions defaults;                // the server's sampling defaults
};

enum class Endpoint { Completions, Chat };

struct ParsedRequest {
  GenerationRequest generation;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the reply's text begins with the prompt
  std::string prompt_text;     // for echo
};

// Parses a request body; ApiError on anything malformed. `seeds` gives a request without "seed" one.
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const ApiContext& ctx, std::mt19937_64& seeds);

// The whole reply of a finished request.
nlohmann::json reply_body(Endpoint endpoint, const std::string& id, const std::string& model, int64_t created,
                          const ParsedRequest& request, const std::vector<Piece>& pieces, const RequestStream& stream,
                          const Tokenizer* tok);
// One streamed chunk: the pieces since the last one (finish: null while running).
nlohmann::json stream_chunk(Endpoint endpoint, const std::string& id, const std::string& model, int64_t created,
                            const ParsedRequest& request, const std::vector<Piece>& pieces, const char* finish,
                            bool first, const Tokenizer* tok);
// The usage object: prompt, completion and total tokens, with the cached prompt tokens.
nlohmann::json usage_json(const RequestStream& stream);

}  // namespace hg::serve
