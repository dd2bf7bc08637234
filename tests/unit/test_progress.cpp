// The progress reporter: a bar redrawn in place on a terminal, plain lines elsewhere, nothing
// for quick work or with --no-progress; the numbers (done/total, percentage, ETA) are right.
#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

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
}

TEST(Progress, QuickWorkAndOffShowNothing) {
  MemoryStream s;
  {
    ProgressOptions o = immediate(ProgressMode::Bar, s.get());
    o.delay_s = 60;  // the work ends long before the delay
    Progress p("prefill", 10, "tokens", o);
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
  ProgressOptions o = immediate(ProgressMode::Lines, s.get());
  o.line_interval_s = 60;
  {
    Progress p("bench", 1000, "runs", o);
    for (int i = 1; i <= 1000; ++i) p.update(i);
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

TEST(Progress, EtaFromTheRateSoFar) {
  MemoryStream s;
  Progress p("x", 100, "tokens", immediate(ProgressMode::Lines, s.get()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  p.update(50);  // 50 tokens in ~0.2 s: ~250 tokens/s, 50 left: ETA ~0.2 s, rounds to 0:00
  const std::string t = s.text();
  EXPECT_NE(t.find("ETA 0:00"), std::string::npos) << t;
  EXPECT_EQ(format_duration(75), "1:15");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace hg
