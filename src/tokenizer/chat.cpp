// Chat formatting for instruct models. We do not run Jinja: the three template families that
// matter here are recognised by their marker tokens and rendered for one (system, user) turn,
// ending with the assistant header so the model answers next.
#include <regex>

#include "hybridgen/error.h"
#include "hybridgen/tokenizer.h"
#include "tokenizer/text_util.h"

namespace hg {

namespace {

const char* const kChoose = "choose one with --chat-template chatml|llama3|llama2";

ChatTemplate detect(const std::string& tmpl) {
  if (tmpl.empty()) throw Error(std::string("the model has no chat template; ") + kChoose);
  if (tmpl.find("<|im_start|>") != std::string::npos) return ChatTemplate::ChatML;
  if (tmpl.find("<|start_header_id|>") != std::string::npos) return ChatTemplate::Llama3;
  if (tmpl.find("[INST]") != std::string::npos) return ChatTemplate::Llama2;
  throw Error(std::string("unknown chat template (not ChatML, Llama-3 or Llama-2 [INST]); ") + kChoose);
}

// A ChatML template that inserts a system turn when the user gave none (SmolLM2, Qwen2.5):
// the literal '<|im_start|>system\n...<|im_end|>' text in the template.
std::string default_system(const std::string& tmpl) {
  // The newline may be written as an escape (\n) or be a real newline in the template string.
  static const std::regex re(R"('<\|im_start\|>system(?:\\n|\n)([^'{}<]*)<\|im_end\|>(?:\\n|\n)')");
  std::smatch m;
  if (!std::regex_search(tmpl, m, re)) return {};
  std::string s = m[1].str();
  tok::replace_all(s, "\\n", "\n");
  return s;
}

std::string trim(std::string_view s) {
  size_t b = tok::leading_whitespace(s);
  if (b == s.size()) return {};
  return std::string(s.substr(b, s.size() - b - tok::trailing_whitespace(s)));
}

// The template renders bos_token itself; add its text unless encode() adds BOS anyway.
std::string bos_text(const Tokenizer& tok) {
  auto bos = tok.bos_id();
  if (!bos) return {};
  auto with_special = tok.encode("", true);
  if (!with_special.empty() && with_special.front() == *bos) return {};
  return tok.piece(*bos);
}

}  // namespace

ChatTemplate parse_chat_template_name(std::string_view name) {
  if (name == "chatml") return ChatTemplate::ChatML;
  if (name == "llama3") return ChatTemplate::Llama3;
  if (name == "llama2") return ChatTemplate::Llama2;
  if (name == "auto" || name.empty()) return ChatTemplate::Auto;
  throw Error("--chat-template: unknown template '" + std::string(name) + "' (known: chatml, llama3, llama2, auto)");
}

std::string format_chat(const Tokenizer& tok, ChatTemplate which, std::string_view user,
                        std::string_view system) {
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", std::string(system)});
  messages.push_back({"user", std::string(user)});
  return format_chat(tok, which, messages);
}

namespace {

// The system prompt (the first message, when it is one) and the turns after it.
struct Conversation {
  std::string system;
  std::span<const ChatMessage> turns;
};

Conversation split_system(std::span<const ChatMessage> messages) {
  for (const ChatMessage& m : messages)
    if (m.role != "system" && m.role != "developer" && m.role != "user" && m.role != "assistant")
      throw Error("chat: unknown role '" + m.role + "' (known: system, developer, user, assistant)");
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer"))
    return {messages[0].content, messages.subspan(1)};
  return {{}, messages};
}

const std::string& role_name(const ChatMessage& m) {
  static const std::string system = "system";
  return m.role == "developer" ? system : m.role;
}

std::string llama2(const Tokenizer& tok, const Conversation& c) {
  // [INST] <<SYS>> system <</SYS>> user [/INST] answer </s><s>[INST] user [/INST]
  std::string out = bos_text(tok);
  std::string sys = c.system.empty() ? std::string() : "<<SYS>>\n" + trim(c.system) + "\n<</SYS>>\n\n";
  for (const ChatMessage& m : c.turns) {
    if (m.role == "assistant") {
      out += " " + trim(m.content) + " ";
      if (auto eos = tok.eos_id()) out += tok.piece(*eos);
      out += bos_text(tok);
      continue;
    }
    out += "[INST] " + sys + trim(m.content) + " [/INST]";
    sys.clear();
  }
  return out;
}

}  // namespace

std::string format_chat(const Tokenizer& tok, ChatTemplate which, std::span<const ChatMessage> messages) {
  std::string tmpl = tok.chat_template();
  if (which == ChatTemplate::Auto) which = detect(tmpl);
  const Conversation c = split_system(messages);
  std::string out;
  switch (which) {
    case ChatTemplate::ChatML: {
      const std::string sys = c.system.empty() ? default_system(tmpl) : c.system;
      if (!sys.empty()) out += "<|im_start|>system\n" + sys + "<|im_end|>\n";
      for (const ChatMessage& m : c.turns) out += "<|im_start|>" + role_name(m) + "\n" + m.content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      break;
    }
    case ChatTemplate::Llama3:
      out = bos_text(tok);
      if (!c.system.empty()) out += "<|start_header_id|>system<|end_header_id|>\n\n" + trim(c.system) + "<|eot_id|>";
      for (const ChatMessage& m : c.turns)
        out += "<|start_header_id|>" + role_name(m) + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplate::Llama2:
      out = llama2(tok, c);
      break;
    case ChatTemplate::Auto: break;  // resolved above
  }
  return out;
}

}  // namespace hg
