#include "tokenizer/normalizer.h"

#include "tokenizer/regex.h"
#include "tokenizer/text_util.h"

namespace hg::tok {

namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  std::string normalize(std::string text) const override {
    // ASCII is invariant under every normal form; skip utf8proc for it.
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) return unicode_normalize(text, form_);
    return text;
  }

 private:
  NormalForm form_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(const std::string& pattern, bool literal, std::string content,
                    const std::string& where)
      : regex_(pattern, literal, where), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    return regex_replace_all(regex_, text, content_);
  }

 private:
  Regex regex_;
  std::string content_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return unicode_lowercase(text); }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    size_t b = left_ ? leading_whitespace(text) : 0;
    size_t e = right_ ? text.size() - trailing_whitespace(text) : text.size();
    return b >= e ? std::string() : text.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<NormalizerPtr> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string text) const override {
    for (const auto& p : parts_) text = p->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<NormalizerPtr> parts_;
};

}  // namespace

NormalizerPtr make_unicode_normalizer(NormalForm form) {
  return std::make_unique<UnicodeNormalizer>(form);
}
NormalizerPtr make_prepend_normalizer(std::string prefix) {
  return std::make_unique<PrependNormalizer>(std::move(prefix));
}
NormalizerPtr make_replace_normalizer(const std::string& pattern, bool literal, std::string content,
                                      const std::string& where) {
  return std::make_unique<ReplaceNormalizer>(pattern, literal, std::move(content), where);
}
NormalizerPtr make_lowercase_normalizer() { return std::make_unique<LowercaseNormalizer>(); }
NormalizerPtr make_strip_normalizer(bool left, bool right) {
  return std::make_unique<StripNormalizer>(left, right);
}
NormalizerPtr make_sequence_normalizer(std::vector<NormalizerPtr> parts) {
  return std::make_unique<SequenceNormalizer>(std::move(parts));
}

}  // namespace hg::tok
