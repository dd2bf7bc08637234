// hybridgen tokenize: text -> ids (or pieces) with a model's tokenizer, and --decode for ids -> text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "hybridgen/error.h"
#include "hybridgen/model.h"
#include "hybridgen/tokenizer.h"
#include "util/strings.h"
#include "util/token_ids.h"

namespace hg::cli {

namespace {

struct TokenizeOptions {
  std::string tokenizer, model, prompt, file, decode, chat_template = "auto", system;
  bool ids = false, pieces = false, bos = false, chat = false;
};

std::unique_ptr<Tokenizer> open_tokenizer(const TokenizeOptions& o) {
  if (!o.tokenizer.empty()) return hg::load_tokenizer(o.tokenizer);
  auto path = resolve_model_path(o.model);
  auto tok = load_model_tokenizer(path);
  if (!tok) throw Error(path.string() + ": the model has no tokenizer (use --tokenizer FILE)");
  return tok;
}

std::string input_text(const TokenizeOptions& o) {
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) throw Error(o.file + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  return o.prompt;
}

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void run_decode(const Tokenizer& tok, const std::string& text) {
  const std::vector<int32_t> ids = parse_ids(text, "--decode");
  std::string out = tok.decode(ids);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fputc('\n', stdout);
}

void run_tokenize(const TokenizeOptions& o) {
  if (o.tokenizer.empty() == o.model.empty()) throw Error("tokenize: give exactly one of --tokenizer FILE or -m MODEL");
  auto tok = open_tokenizer(o);
  if (!o.decode.empty()) return run_decode(*tok, o.decode);
  if (!o.file.empty() && !o.prompt.empty()) throw Error("tokenize: give only one of -p TEXT or -f FILE");
  std::string text = input_text(o);
  if (o.chat) text = format_chat(*tok, parse_chat_template_name(o.chat_template), text, o.system);
  std::vector<int32_t> ids = tok->encode(text, true);
  // --bos: make sure the sequence starts with BOS even where the tokenizer does not add one.
  if (o.bos) {
    auto bos = tok->bos_id();
    if (!bos) throw Error("--bos: this tokenizer has no BOS token");
    if (ids.empty() || ids.front() != *bos) ids.insert(ids.begin(), *bos);
  }
  std::string out;
  if (o.ids || o.pieces) {
    out = "[" + join(ids, ", ", [&](int32_t id) { return o.ids ? std::to_string(id) : json_string(tok->piece(id)); }) +
          "]\n";
  } else {
    for (int32_t id : ids) out += std::to_string(id) + "\t" + json_string(tok->piece(id)) + "\n";
    out += "# " + std::to_string(ids.size()) + " tokens\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Text to token ids with a model's tokenizer (or ids to text with --decode)");
  auto* tokenizer = cmd->add_option("--tokenizer", opts->tokenizer,
                                    "tokenizer.json, GPT-2 vocab.json (merges.txt beside it) or .gguf file");
  auto* model = cmd->add_option("-m,--model", opts->model, "model directory, .gguf file or alias (smollm2, qwen2.5-0.5b)");
  tokenizer->excludes(model);
  auto* prompt = cmd->add_option("-p,--prompt", opts->prompt, "text to tokenize");
  auto* file = cmd->add_option("-f,--file", opts->file, "file whose contents to tokenize");
  prompt->excludes(file);
  auto* ids = cmd->add_flag("--ids", opts->ids, "print one JSON array of ids");
  auto* pieces = cmd->add_flag("--pieces", opts->pieces, "print one JSON array of pieces");
  ids->excludes(pieces);
  cmd->add_flag("--bos", opts->bos, "start with the BOS token even where the tokenizer adds none");
  cmd->add_option("--decode", opts->decode, "decode a JSON array of ids instead, e.g. \"[1, 2]\"");
  cmd->add_flag("--chat", opts->chat, "wrap the text in the model's chat template first");
  cmd->add_option("--chat-template", opts->chat_template, "chatml | llama3 | llama2 | auto (from the model)");
  cmd->add_option("--system", opts->system, "system prompt for --chat");
  cmd->callback([opts] { run_tokenize(*opts); });
}

}  // namespace hg::cli
