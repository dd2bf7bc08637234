// Tokenizers: text in, token ids out, and back, exactly as the reference tokenizers do.
// Implementations live in src/tokenizer/ (HF tokenizer.json, GPT-2 vocab.json + merges.txt, GGUF).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hg {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // add_special: apply the post-processor (BOS/EOS as the tokenizer is configured to add).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  // skip_special: leave out special (control) tokens from the text.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = false) const = 0;
  // As decode, but bytes that do not form valid UTF-8 are returned as they are instead of being
  // replaced by U+FFFD: a streaming decoder needs to see a character's first bytes as they come.
  virtual std::string decode_raw(std::span<const int32_t> ids, bool skip_special = false) const {
    return decode(ids, skip_special);
  }

  virtual int32_t vocab_size() const = 0;
  // The token's piece as stored in the vocabulary (e.g. "Ġthe", "▁the", "<0x0A>").
  virtual std::string piece(int32_t id) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view piece) const = 0;
  virtual bool is_special(int32_t id) const = 0;

  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // All ids that end generation (eos, <|im_end|>, <|eot_id|>, ...).
  virtual std::vector<int32_t> stop_ids() const = 0;
  // The chat template string (Jinja) shipped with the tokenizer, "" when none.
  virtual std::string chat_template() const = 0;
};

// FILE may be a tokenizer.json, a GPT-2 vocab.json (merges.txt beside it) or a .gguf file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& file);
// The tokenizer that belongs to a model directory or .gguf file; nullptr when it has none.
std::unique_ptr<Tokenizer> load_model_tokenizer(const std::filesystem::path& model_path);

// Incremental detokenizer for streaming: push ids, get back only complete UTF-8 text.
// The concatenation of everything push() and flush() return equals tok.decode(all ids) (for the
// decoders we support), so generate never prints half a character.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false)
      : tok_(tok), skip_special_(skip_special) {}
  std::string push(int32_t id);  // text that became complete with this id (may be empty)
  std::string flush();           // whatever is left (invalid bytes replaced by U+FFFD)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  // Ids since the last point where all text was emitted, plus the one before it: decoders look
  // at a token's neighbour (leading-space stripping), so the window starts one token early.
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;  // bytes of decode_raw(ids_) already returned
};

enum class ChatTemplate { Auto, ChatML, Llama3, Llama2 };
ChatTemplate parse_chat_template_name(std::string_view name);  // "chatml" | "llama3" | "llama2"
// Wraps a single user message (optionally with a system prompt) in the model's chat format, ending
// with the assistant header. Auto detects the template from tok.chat_template(); an unknown template
// is an hg::Error that says so and names --chat-template.
std::string format_chat(const Tokenizer& tok, ChatTemplate which, std::string_view user,
                        std::string_view system = {});
// A conversation (roles "system", "user", "assistant"; a "developer" message is a system one) in
// the model's chat format, ending with the assistant header. hg::Error for an unknown role.
struct ChatMessage {
  std::string role, content;
};
std::string format_chat(const Tokenizer& tok, ChatTemplate which, std::span<const ChatMessage> messages);

}  // namespace hg
