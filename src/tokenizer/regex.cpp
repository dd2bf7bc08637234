#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "hybridgen/error.h"

namespace hg::tok {

namespace {
struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
};

// A large JIT stack for the rare subject that overflows the default 32 KiB one (long runs of
// whitespace under a look-ahead); made only when needed so the common path allocates nothing.
struct BigStack {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 512 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  BigStack() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~BigStack() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};
}  // namespace

Regex::Regex(std::string_view pattern, bool literal, const std::string& where) : pattern_(pattern) {
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  // UCP only changes what character classes mean, and PCRE2 refuses it with LITERAL.
  options |= literal ? PCRE2_LITERAL : PCRE2_UCP;
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(where + ": bad regex '" + std::string(pattern) + "' at offset " +
                std::to_string(err_offset) + ": " + reinterpret_cast<const char*>(msg));
  }
  // JIT failure is not an error: the interpreter gives the same matches, only slower.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view subject, std::vector<Match>& out) const {
  out.clear();
  auto* code = static_cast<pcre2_code*>(code_);
  MatchData md(code);
  auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  std::unique_ptr<BigStack> big;
  size_t pos = 0;
  while (pos < subject.size()) {
    int rc = pcre2_match(code, s, subject.size(), pos, 0, md.data, big ? big->context : nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big) {
      big = std::make_unique<BigStack>();
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error("regex '" + pattern_ + "': match failed: " + reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.push_back({b, e});
      pos = e;
    } else {
      // An empty match: step over one character (or one invalid byte) and try again.
      pos = b + 1;
      while (pos < subject.size() && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace hg::tok
