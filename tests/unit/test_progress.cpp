// The progress reporter: a bar redrawn in place on a terminal, plain lines elsewhere, nothing
// for quick work or with --no-progress; the numbers (done/total, percentage, ETA) are right.
#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/progress.h"

namespace hg {
namespace {

// A FILE* writing to memory; text() flushes and returns what was written.
class MemoryStream {
 public:
  MemoryStream() : f_(open_memstream(&buf_, &size_)) {}
  ~MemoryStream() {
    std::fclose(f_);
    std::free(buf_);
  }
  std::FILE* get() { return f_; }
  std::string text() {
    std::fflush(f_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  std::FILE* f_;
};

ProgressOptions immediate(ProgressMode mode, std::FILE* out) {
  ProgressOptions o;
  o.mode = mode;
  o.out = out;
  o.delay_s = 0;
  o.redraw_s = 0;
  o.line_interval_s = 0;
  return o;
}

TEST(Progress, BarRedrawsInPlaceAndEndsTheLine) {
  MemoryStream s;
  {
    Progress p("prefill", 4, "tokens", immediate(ProgressMode::Bar, s.get()));
    for (int i = 0; i < 4; ++i) p.advance(1);
  }
  const std::string t = s.text();
  EXPECT_NE(t.find("\rprefill ["), std::string::npos) << t;
  EXPECT_NE(t.find("2/4 tokens 50%"), std::string::npos) << t;
  EXPECT_NE(t.find("ETA"), std::string::npos) << t;
  EXPECT_NE(t.find("[########################] 4/4 tokens 100%"), std::string::npos) << t;
  EXPECT_EQ(t.back(), '\n');
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 1) << t;  // one line, redrawn
}

TEST(Progress, BarNarrowsToLeaveRoomForTheStatus) {
  MemoryStream s;  // not a terminal: 80 columns
  {
    Progress p("perplexity", 768, "tokens", immediate(ProgressMode::Bar, s.get()));
    p.update(256, "window 1/3, ppl so far 123.4567");
  }
  const std::string t = s.text();
  EXPECT_NE(t.find("perplexity [###-------] 256/768"), std::string::npos)
      << t;  // the bar shrinks to its 10-cell minimum first
  size_t longest = 0;
  for (size_t b = 0, e; b < t.size(); b = e + 1) {
    e = std::min(t.find_first_of("\r\n", b), t.size());
    longest = std::max(longest, e - b);
  }
  EXPECT_LE(longest, 79u + 3u) << t;  // 79 columns of text (+ the \033[K)
}

TEST(Progress, LinesHaveNoBarAndNoCarriageReturn) {
  MemoryStream s;
  {
    Progress p("perplexity", 3, "windows", immediate(ProgressMode::Lines, s.get()));
    p.update(1, "ppl 12.5");
    p.update(3);
  }
  const std::string t = s.text();
  EXPECT_EQ(t.find('\r'), std::string::npos) << t;
  EXPECT_EQ(t.find('['), std::string::npos) << t;
  EXPECT_NE(t.find("perplexity 1/3 windows 33%"), std::string::npos) << t;
  EXPECT_NE(t.find("| ppl 12.5"), std::string::npos) << t;  // the status stays until replaced
  EXPECT_NE(t.find("perplexity 3/3 windows 100%"), std::string::npos) << t;
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 2) << t;  // the final state is not printed twice
}

TEST(Progress, QuickWorkAndOffShowNothing) {
  MemoryStream s;
  {
    double now = 0;
    ProgressOptions o = immediate(ProgressMode::Bar, s.get());
    o.clock = [&now] { return now; };
    o.delay_s = 60;
    Progress p("prefill", 10, "tokens", o);
    now = 59.5;  // the work ends before the delay
    p.update(10);
  }
  {
    Progress p("prefill", 10, "tokens", immediate(ProgressMode::Off, s.get()));
    p.update(5);
  }
  EXPECT_TRUE(s.text().empty()) << s.text();
}

TEST(Progress, LinesAreRateLimited) {
  MemoryStream s;
  double now = 0;
  ProgressOptions o = immediate(ProgressMode::Lines, s.get());
  o.clock = [&now] { return now; };
  o.line_interval_s = 60;
  {
    Progress p("bench", 1000, "runs", o);
    for (int i = 1; i <= 1000; ++i) {
      now = 0.0599 * i;  // the last at 59.9 s
      p.update(i);
    }
  }
  EXPECT_TRUE(s.text().empty()) << s.text();  // under a minute: not one periodic line
}

TEST(Progress, AutoPicksBarOnATerminalAndLinesInAPipe) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::FILE* tty = fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::Auto, tty), ProgressMode::Bar);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::Off, tty), ProgressMode::Off);
  std::fclose(tty);
  close(master);

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::FILE* pipe_end = fdopen(fds[1], "w");
  EXPECT_EQ(resolve_progress_mode(ProgressMode::Auto, pipe_end), ProgressMode::Lines);
  std::fclose(pipe_end);
  close(fds[0]);
}

// The clock is the test's: rate and ETA are exact, whatever the machine's speed.
TEST(Progress, EtaFromTheRateSoFar) {
  MemoryStream s;
  double now = 1000;  // seconds on the reporter's clock
  ProgressOptions o = immediate(ProgressMode::Lines, s.get());
  o.clock = [&now] { return now; };
  {
    Progress p("x", 100, "tokens", o);
    now = 1000.2;
    p.update(50);  // 50 tokens in 0.2 s: 250 tokens/s, 50 left: ETA 0.2 s, rounded to 0:00
    now = 1059.6;
    p.update(50);  // 50 in 59.6 s: 50 left take 59.6 s, rounded to 1:00
    now = 1080;
    p.update(100);  // done in 80 s
  }
  EXPECT_EQ(s.text(),
            "x 50/100 tokens 50% 250 tokens/s ETA 0:00\n"
            "x 50/100 tokens 50% 0.84 tokens/s ETA 1:00\n"
            "x 100/100 tokens 100% 1.25 tokens/s in 1:20\n");
  EXPECT_EQ(format_duration(75), "1:15");
  EXPECT_EQ(format_duration(74.5), "1:15");  // halves round up
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace hg
