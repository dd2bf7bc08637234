#include "tokenizer/hf_json_sax.h"

#include "hybridgen/error.h"

namespace hg::tok {

namespace {

using DomParser = nlohmann::detail::json_sax_dom_parser<Json>;

// Forwards every event to the DOM builder except the contents of model.vocab / model.merges.
class Handler : public nlohmann::json_sax<Json> {
 public:
  Handler(Json& root, BpeTables& tables, const std::string& name) : dom_(root, false), t_(tables), name_(name) {}

  bool null() override { return capture_ == None ? dom_.null() : fail("null"); }
  bool boolean(bool v) override { return capture_ == None ? dom_.boolean(v) : fail("a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (capture_ == None) return dom_.number_integer(v);
    return vocab_value(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (capture_ == None) return dom_.number_unsigned(v);
    if (v > uint64_t(INT64_MAX)) return fail("a huge number");
    return vocab_value(int64_t(v));
  }
  bool number_float(number_float_t v, const string_t& s) override {
    return capture_ == None ? dom_.number_float(v, s) : fail("a float");
  }
  bool binary(binary_t& b) override { return capture_ == None ? dom_.binary(b) : fail("binary"); }
  bool string(string_t& s) override {
    if (capture_ == None) return dom_.string(s);
    if (capture_ != Merges) return fail("a string");
    if (depth_ == capture_depth_ + 1) {  // inside a [left, right] pair
      if (pair_parts_ >= 2) return fail("a pair of more than two strings");
      (pair_parts_++ == 0 ? t_.merges.back().first : t_.merges.back().second) = std::move(s);
      return true;
    }
    // "left right"
    size_t sp = s.find(' ', 1);
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      return fail("a merge that is not \"left right\"");
    t_.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    return true;
  }
  bool start_object(std::size_t n) override {
    ++depth_;
    if (capture_ != None) return fail("an object");
    keys_.resize(depth_);
    if (depth_ == 3 && keys_[0] == "model" && keys_[1] == "vocab") {
      capture_ = Vocab;
      capture_depth_ = depth_;
      t_.has_vocab = true;
      return dom_.start_object(0);
    }
    return dom_.start_object(n);
  }
  bool key(string_t& k) override {
    if (capture_ == Vocab) {
      pending_key_ = std::move(k);
      return true;
    }
    if (capture_ != None) return fail("a key");
    if (depth_ >= 1 && depth_ <= 2) keys_[depth_ - 1] = k;
    return dom_.key(k);
  }
  bool end_object() override {
    if (capture_ == Vocab && depth_ == capture_depth_) capture_ = None;
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) override {
    ++depth_;
    if (capture_ == Merges && depth_ == capture_depth_ + 1) {
      t_.merges.emplace_back();
      pair_parts_ = 0;
      return true;
    }
    if (capture_ != None) return fail("an array");
    keys_.resize(depth_);
    if (depth_ == 3 && keys_[0] == "model" && keys_[1] == "merges") {
      capture_ = Merges;
      capture_depth_ = depth_;
      t_.has_merges = true;
      return dom_.start_array(0);
    }
    return dom_.start_array(n);
  }
  bool end_array() override {
    --depth_;
    if (capture_ == Merges && depth_ == capture_depth_) {  // closed a [left, right] pair
      if (pair_parts_ != 2) return fail("a pair that is not [left, right]");
      return true;
    }
    if (capture_ == Merges && depth_ == capture_depth_ - 1) capture_ = None;
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception&) override {
    error_ = name_ + ": not valid JSON (malformed or truncated) near byte " + std::to_string(pos);
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  enum Capture { None, Vocab, Merges };
  bool vocab_value(int64_t v) {
    if (capture_ != Vocab || depth_ != capture_depth_) return fail("a number");
    t_.vocab.emplace_back(std::move(pending_key_), v);
    return true;
  }
  bool fail(const char* what) {
    error_ = name_ + ": model." + (capture_ == Vocab ? "vocab" : "merges") + ": unexpected " + what;
    return false;
  }

  DomParser dom_;
  BpeTables& t_;
  const std::string& name_;
  std::string error_;
  std::vector<std::string> keys_;  // the key at each object level (levels 1 and 2 only)
  std::string pending_key_;
  Capture capture_ = None;
  size_t depth_ = 0, capture_depth_ = 0;
  int pair_parts_ = 0;
};

}  // namespace

Json parse_tokenizer_json(std::string_view text, const std::string& name, BpeTables& tables) {
  Json root;
  Handler handler(root, tables, name);
  bool ok = Json::sax_parse(text.begin(), text.end(), &handler, nlohmann::detail::input_format_t::json, true);
  if (!ok) throw Error(handler.error().empty() ? name + ": not valid JSON" : handler.error());
  return root;
}

}  // namespace hg::tok
