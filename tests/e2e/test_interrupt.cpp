// Ctrl-C during generate, with a real child process sent SIGINT: it stops cleanly, what was
// generated so far stays printed, --stats still prints, and the exit status is 130.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace hg::test {
namespace {

namespace fs = std::filesystem;

struct Child {
  pid_t pid = -1;
  fs::path out, err;
};

Child start_hybridgen(const std::vector<std::string>& args) {
  Child c;
  const fs::path dir = temp_dir("sigint");
  c.out = dir / "out";
  c.err = dir / "err";
  std::vector<std::string> argv = {(bin_dir() / "hybridgen").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  c.pid = fork();
  if (c.pid == 0) {
    signal(SIGINT, SIG_DFL);  // a test runner may have started us with SIGINT ignored
    const int out = open(c.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  return c;
}

// Waits until `path` holds at least `bytes` bytes (or the timeout passes).
bool wait_for_output(const fs::path& path, uintmax_t bytes, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    std::error_code ec;
    if (fs::exists(path, ec) && fs::file_size(path, ec) >= bytes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Waits until the child catches SIGINT (its handler is installed: /proc/PID/status SigCgt).
bool wait_for_handler(pid_t pid, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    const std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
    const size_t at = status.find("SigCgt:");
    if (at != std::string::npos && (std::stoull(status.substr(at + 7), nullptr, 16) >> (SIGINT - 1) & 1)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int interrupt_and_wait(const Child& c) {
  kill(c.pid, SIGINT);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status) + 1000;  // killed by the signal: not clean
  return WEXITSTATUS(status);
}

class Interrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    if (smollm2_path().empty()) GTEST_SKIP() << hg::test::kNoSmolLM2Message;
  }
};

TEST_F(Interrupt, DuringDecodeKeepsTextAndStats) {
  const fs::path stats = temp_dir("sigint_stats") / "stats.json";
  const Child c =
      start_hybridgen({"generate", "-m", smollm2_path(), "-p", "Once upon a time", "-n", "4000", "--ignore-eos",
                       "--temp", "0", "-t", "2", "--stats", "--stats-json", stats.string()});
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(wait_for_output(c.out, 20, std::chrono::seconds(120))) << read_file(c.err);
  EXPECT_EQ(interrupt_and_wait(c), 130) << read_file(c.err);
  const std::string out = read_file(c.out), err = read_file(c.err);
  EXPECT_GE(out.size(), 20u);
  EXPECT_EQ(out.back(), '\n');  // the stream was flushed and the line ended
  EXPECT_NE(err.find("interrupted: stopped after"), std::string::npos) << err;
  EXPECT_NE(err.find("--- stats"), std::string::npos) << err;
  EXPECT_NE(err.find("decode:"), std::string::npos) << err;
  const std::string json = read_file(stats);
  EXPECT_NE(json.find("\"decode_tokens\""), std::string::npos) << json;
}

// Threads of the child (/proc/PID/task): main and the interrupt watcher while it loads; the
// engine's pool worker and the CPU device's copier join them before prefill.
int thread_count(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

bool wait_for_threads(pid_t pid, int n, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (thread_count(pid) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(Interrupt, DuringPrefillStopsBetweenChunks) {
  const fs::path ids = temp_dir("sigint_ids") / "ids.json";
  write_ids(ids, random_ids(8000, 9, 40000));  // many seconds of prefill on a CPU
  // Three times, the signal landing inside prefill's matmuls: before the watcher took SIGINT, a
  // signal handled inside oneDNN's JIT GEMM corrupted the heap in about one run in three.
  for (int run = 0; run < 3; ++run) {
    const Child c =
        start_hybridgen({"generate", "-m", smollm2_path(), "--ids-file", ids.string(), "-n", "8", "-t", "2", "--stats"});
    ASSERT_GT(c.pid, 0);
    ASSERT_TRUE(wait_for_handler(c.pid, std::chrono::seconds(60)));
    ASSERT_TRUE(wait_for_threads(c.pid, 4, std::chrono::seconds(60)));
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 100 * run));  // in the first chunks
    EXPECT_EQ(interrupt_and_wait(c), 130) << read_file(c.err);
    const std::string err = read_file(c.err);
    EXPECT_NE(err.find("stopped after 0 generated tokens (during prefill)"), std::string::npos) << err;
    EXPECT_NE(err.find("prefill:"), std::string::npos) << err;
    EXPECT_EQ(read_file(c.out), "\n");
  }
}

}  // namespace
}  // namespace hg::test
