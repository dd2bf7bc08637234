#include <algorithm>

#include "hybridgen/tokenizer.h"
#include "tokenizer/utf8.h"

namespace hg {

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text = tok_.decode_raw(ids_, skip_special_);
  size_t complete = tok::utf8_complete_prefix(text);
  std::string out;
  if (complete > emitted_bytes_) {
    out = tok::utf8_lossy(std::string_view(text).substr(emitted_bytes_, complete - emitted_bytes_));
    emitted_bytes_ = complete;
  }
  if (complete == text.size()) {
    // Nothing pending: restart the window at this token so decoding stays O(1) per token.
    ids_.assign(1, id);
    emitted_bytes_ = tok_.decode_raw(ids_, skip_special_).size();
  }
  return out;
}

std::string StreamDecoder::flush() {
  std::string text = tok_.decode_raw(ids_, skip_special_);
  std::string out = tok::utf8_lossy(std::string_view(text).substr(std::min(emitted_bytes_, text.size())));
  ids_.clear();
  emitted_bytes_ = 0;
  return out;
}

}  // namespace hg
