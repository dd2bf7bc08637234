#include "tokenizer/decoder.h"

#include "tokenizer/text_util.h"
#include "tokenizer/utf8.h"

namespace hg::tok {

std::string byte_level_piece_bytes(const std::string& piece) {
  auto bytes = byte_map().decode_text(piece);
  return bytes ? *bytes : piece;
}

namespace {

std::string concat(const std::vector<std::string>& pieces) {
  size_t n = 0;
  for (const auto& p : pieces) n += p.size();
  std::string out;
  out.reserve(n);
  for (const auto& p : pieces) out += p;
  return out;
}

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& pieces, bool raw) const override {
    std::string bytes;
    for (const auto& p : pieces) bytes += byte_level_piece_bytes(p);
    pieces.assign(1, raw ? std::move(bytes) : utf8_lossy(bytes));
  }
  bool is_byte_level() const override { return true; }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& pieces, bool) const override {
    for (auto& p : pieces) replace_all(p, pattern_, content_);
  }

 private:
  std::string pattern_, content_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& pieces, bool raw) const override {
    std::vector<std::string> out;
    std::string pending;  // bytes of consecutive <0xNN> pieces
    auto flush = [&] {
      if (pending.empty()) return;
      if (raw || utf8_is_valid(pending)) {
        out.push_back(pending);
      } else {
        // HF emits one U+FFFD per byte of an invalid run.
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (auto& p : pieces) {
      int byte = parse_byte(p);
      if (byte >= 0) {
        pending += char(byte);
        continue;
      }
      flush();
      out.push_back(std::move(p));
    }
    flush();
    pieces = std::move(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  static int parse_byte(const std::string& p) {
    if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
    int hi = hex(p[3]), lo = hex(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& pieces, bool) const override {
    pieces.assign(1, concat(pieces));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& pieces, bool) const override {
    if (content_.empty()) return;
    for (auto& p : pieces) {
      size_t b = 0;
      for (size_t k = 0; k < start_ && p.compare(b, content_.size(), content_) == 0; ++k)
        b += content_.size();
      size_t e = p.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         p.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k)
        e -= content_.size();
      p = p.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepend)
      : replacement_(std::move(replacement)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& pieces, bool) const override {
    for (size_t k = 0; k < pieces.size(); ++k) {
      // HF drops every replacement char of the first piece when a prefix was prepended.
      replace_all(pieces[k], replacement_, k == 0 && prepend_ ? "" : " ");
    }
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<DecoderPtr> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& pieces, bool raw) const override {
    for (const auto& p : parts_) p->decode_chain(pieces, raw);
  }
  bool is_byte_level() const override { return parts_.size() == 1 && parts_[0]->is_byte_level(); }

 private:
  std::vector<DecoderPtr> parts_;
};

}  // namespace

DecoderPtr make_byte_level_decoder() { return std::make_unique<ByteLevelDecoder>(); }
DecoderPtr make_replace_decoder(std::string pattern, std::string content) {
  return std::make_unique<ReplaceDecoder>(std::move(pattern), std::move(content));
}
DecoderPtr make_byte_fallback_decoder() { return std::make_unique<ByteFallbackDecoder>(); }
DecoderPtr make_fuse_decoder() { return std::make_unique<FuseDecoder>(); }
DecoderPtr make_strip_decoder(std::string content, size_t start, size_t stop) {
  return std::make_unique<StripDecoder>(std::move(content), start, stop);
}
DecoderPtr make_metaspace_decoder(std::string replacement, bool prepend) {
  return std::make_unique<MetaspaceDecoder>(std::move(replacement), prepend);
}
DecoderPtr make_sequence_decoder(std::vector<DecoderPtr> parts) {
  return std::make_unique<SequenceDecoder>(std::move(parts));
}

}  // namespace hg::tok
