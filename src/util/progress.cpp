#include "util/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace hg {

namespace {

constexpr int kMaxBarCells = 24;
constexpr int kMinBarCells = 10;

// Columns of the terminal behind `out`, or 80 when it does not say.
int terminal_columns(std::FILE* out) {
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string format_rate(double per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, per_second >= 100 ? "%.0f" : per_second >= 10 ? "%.1f" : "%.2f", per_second);
  return buf;
}

}  // namespace

ProgressMode resolve_progress_mode(ProgressMode mode, std::FILE* out) {
  if (mode != ProgressMode::Auto) return mode;
  return out && isatty(fileno(out)) ? ProgressMode::Bar : ProgressMode::Lines;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit, const ProgressOptions& options)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      options_(options),
      mode_(resolve_progress_mode(options.mode, options.out)),
      start_(now()) {
  if (!options_.out) mode_ = ProgressMode::Off;
}

Progress::~Progress() { finish(); }

double Progress::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Progress::update(int64_t done, std::string_view status) {
  if (finished_) return;
  done_ = done;
  if (!status.empty()) status_ = status;
  if (mode_ == ProgressMode::Off) return;
  const double t = elapsed();
  if (t < options_.delay_s) return;
  const double interval = mode_ == ProgressMode::Bar ? options_.redraw_s : options_.line_interval_s;
  // A Lines report waits a full interval after the delay, so work only just past the delay
  // stays quiet; the bar appears at once.
  if (mode_ == ProgressMode::Lines && !shown_ && t < options_.delay_s + interval) return;
  if (t - last_emit_ < interval) return;
  last_emit_ = t;
  emit(false);
}

void Progress::advance(int64_t n, std::string_view status) { update(done_ + n, status); }

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  // Only a report already under way gets its final state: a quiet run stays quiet, and a last
  // line already showing it is not repeated (the bar still ends its line).
  if (!shown_) return;
  if (mode_ == ProgressMode::Lines && last_emitted_done_ == done_) return;
  emit(true);
}

std::string Progress::render(int bar_cells) const {
  const double t = elapsed();
  const double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
  std::string text = label_;
  if (bar_cells > 0 && total_ > 0) {
    const double frac = std::clamp(static_cast<double>(done_) / static_cast<double>(total_), 0.0, 1.0);
    const int cells = static_cast<int>(frac * bar_cells);
    text += " [" + std::string(static_cast<size_t>(cells), '#') +
            std::string(static_cast<size_t>(bar_cells - cells), '-') + "]";
  }
  text += " " + std::to_string(done_);
  if (total_ > 0) text += "/" + std::to_string(total_);
  text += " " + unit_;
  if (total_ > 0)
    text +=
        " " + std::to_string(static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_))) + "%";
  if (done_ > 0) text += " " + format_rate(rate) + " " + unit_ + "/s";
  if (done_ >= total_ && total_ > 0)
    text += " in " + format_duration(t);
  else if (total_ > 0 && rate > 0)
    text += " ETA " + format_duration(static_cast<double>(total_ - done_) / rate);
  if (!status_.empty()) text += " | " + status_;
  return text;
}

void Progress::emit(bool final_report) {
  std::FILE* out = options_.out;
  if (mode_ == ProgressMode::Bar) {
    // The bar takes the room the numbers and the status leave (at least kMinBarCells); what still
    // does not fit is cut, since a wrapped line could not be redrawn in place.
    const int columns = std::max(20, terminal_columns(out) - 1);
    const int room = columns - static_cast<int>(render(0).size()) - 3;
    std::string text = render(std::clamp(room, kMinBarCells, kMaxBarCells));
    if (text.size() > static_cast<size_t>(columns)) text.resize(static_cast<size_t>(columns));
    // \r back to the line start, \033[K clears what a longer previous draw left behind.
    std::fprintf(out, "\r%s\033[K%s", text.c_str(), final_report ? "\n" : "");
  } else {
    std::fprintf(out, "%s\n", render(0).c_str());
  }
  std::fflush(out);
  shown_ = true;
  last_emitted_done_ = done_;
}

}  // namespace hg
