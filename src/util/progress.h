// Progress of long work (prefill of a long prompt, perplexity windows, bench grids, sweeps):
// done / total, rate and ETA on stderr. On a terminal it is one bar redrawn in place; anywhere
// else (a pipe, a log file) it is a plain line every few seconds, so logs stay readable. Work
// that ends within `delay_s` shows nothing at all, and stdout is never touched.
//
//   Progress p("prefill", n_tokens, "tokens", options);
//   for (...) { ...; p.advance(chunk); }   // or p.update(done, "status text")
//   p.finish();                             // also done by the destructor
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace hg {

enum class ProgressMode {
  Auto,   // Bar when the output stream is a terminal, Lines otherwise
  Bar,    // one line redrawn in place with '\r'
  Lines,  // a plain line every line_interval_s
  Off,    // nothing (--no-progress)
};

struct ProgressOptions {
  ProgressMode mode = ProgressMode::Auto;
  std::FILE* out = stderr;
  double delay_s = 0.5;           // nothing is shown before this much time has passed
  double redraw_s = 0.1;          // Bar: at most one redraw per this many seconds
  double line_interval_s = 10.0;  // Lines: at most one line per this many seconds
  // Seconds on a monotonic clock, read for the elapsed time, the rate and the ETA (empty: the
  // steady clock). A test drives it by hand, so that the figures do not depend on how fast the
  // machine runs it.
  std::function<double()> clock = {};
};

// Auto resolved against the stream: Bar for a terminal, Lines otherwise; other modes unchanged.
ProgressMode resolve_progress_mode(ProgressMode mode, std::FILE* out);
// 75 -> "1:15", 3725 -> "1:02:05"; "?" when not finite or negative.
std::string format_duration(double seconds);

class Progress {
 public:
  // total: units of work (0 or less: unknown, then no percentage and no ETA); unit: "tokens".
  Progress(std::string label, int64_t total, std::string unit, const ProgressOptions& options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // done: units finished so far (absolute); status: a short text shown after the numbers
  // (e.g. "ppl 12.3", "pp512 t2 b1"); it stays until the next call that gives one.
  void update(int64_t done, std::string_view status = {});
  void advance(int64_t n = 1, std::string_view status = {});
  // Draws the final state (if anything was shown) and ends the line. Idempotent.
  void finish();

  ProgressMode mode() const { return mode_; }
  int64_t done() const { return done_; }
  int64_t total() const { return total_; }
  bool shown() const { return shown_; }  // whether anything has been written
  // The text of one report: "prefill [#####-----] 512/1024 tokens 50% 812 tokens/s ETA 0:01";
  // bar_cells 0: no bar.
  std::string render(int bar_cells) const;

 private:
  double now() const;
  double elapsed() const { return now() - start_; }
  void emit(bool final_report);

  std::string label_, unit_, status_;
  int64_t total_ = 0;
  int64_t done_ = 0;
  ProgressOptions options_;
  ProgressMode mode_;
  double start_ = 0;  // now() when constructed
  double last_emit_ = -1e30;
  int64_t last_emitted_done_ = -1;
  bool shown_ = false;
  bool finished_ = false;
};

}  // namespace hg
