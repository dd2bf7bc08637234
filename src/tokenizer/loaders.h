// Entry points of the format-specific loaders (each in its own file); load.cpp picks one by file.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hybridgen/tokenizer.h"

namespace hg::gguf {
class File;
}

namespace hg::tok {

// What tokenizer_config.json (beside tokenizer.json or vocab.json) adds: the names of the
// special tokens and the chat template.
struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, unk_token;
  std::optional<bool> add_bos_token;
  std::string chat_template;
};
// Reads `file` when it exists; returns an empty config otherwise.
TokenizerConfig read_tokenizer_config(const std::filesystem::path& file);
TokenizerConfig parse_tokenizer_config(std::string_view json_text, const std::string& name);

// HF tokenizer.json text; `name` is used in error messages.
std::unique_ptr<Tokenizer> load_hf_json(std::string_view json_text, const std::string& name,
                                        const TokenizerConfig& config);
std::unique_ptr<Tokenizer> load_hf_json_file(const std::filesystem::path& file);

// GPT-2 vocab.json + merges.txt (OPT checkpoints).
std::unique_ptr<Tokenizer> load_gpt2_vocab(std::string_view vocab_json, std::string_view merges_txt,
                                           const std::string& name, const TokenizerConfig& config);
std::unique_ptr<Tokenizer> load_gpt2_files(const std::filesystem::path& vocab_json);

// The vocabulary of a GGUF file, as the metadata arrays hold it.
struct GgufVocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;    // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;
  std::vector<float> scores;       // llama only
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;   // gpt2 only: "left right"
  std::optional<int32_t> bos, eos, unk, pad;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;
};
GgufVocab read_gguf_vocab(const gguf::File& file);
std::unique_ptr<Tokenizer> load_gguf_vocab(const GgufVocab& vocab, const std::string& name);

}  // namespace hg::tok
