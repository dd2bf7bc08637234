#include "serve/request.h"

namespace hg::serve {

const char* finish_reason(Finish f) {
  switch (f) {
    case Finish::Stop: return "stop";
    case Finish::Length: return "length";
    case Finish::Cancelled: return "cancelled";
    case Finish::Error: return "error";
    case Finish::Running: break;
  }
  return "running";
}

bool RequestStream::take(std::vector<Piece>& out, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (pieces_.empty() && finish_ == Finish::Running)
    ready_.wait_for(lock, wait, [&] { return !pieces_.empty() || finish_ != Finish::Running; });
  while (!pieces_.empty()) {
    out.push_back(std::move(pieces_.front()));
    pieces_.pop_front();
  }
  return finish_ != Finish::Running;
}

void RequestStream::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool RequestStream::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

Finish RequestStream::finish() const {
  std::lock_guard lock(mutex_);
  return finish_;
}

std::string RequestStream::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

RequestStream::Usage RequestStream::usage() const {
  std::lock_guard lock(mutex_);
  return usage_;
}

void RequestStream::started(int prompt_tokens, int cached_tokens) {
  std::lock_guard lock(mutex_);
  usage_.prompt = prompt_tokens;
  usage_.cached = cached_tokens;
}

void RequestStream::push(Piece piece) {
  {
    std::lock_guard lock(mutex_);
    if (piece.id >= 0) ++usage_.completion;  // -1: text released at the end, no token of its own
    pieces_.push_back(std::move(piece));
  }
  ready_.notify_all();
}

void RequestStream::end(Finish finish, std::string error) {
  {
    std::lock_guard lock(mutex_);
    if (finish_ != Finish::Running) return;
    finish_ = finish;
    error_ = std::move(error);
  }
  ready_.notify_all();
}

}  // namespace hg::serve
