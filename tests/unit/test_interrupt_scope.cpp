// cli::InterruptScope: Ctrl-C is taken by the scope's watcher thread, never by a thread that
// computes (a signal frame pushed on a thread inside oneDNN's JIT GEMM corrupts the heap: see
// util/signals.h); the first SIGINT sets the flag, the second ends the process, an ignored SIGINT
// stays ignored, and the scope's end restores the handler and the thread's signal mask.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cli/interrupt.h"
#include "util/thread_pool.h"

namespace hg::cli {
namespace {

bool sigint_blocked_here() {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, SIGINT) == 1;
}

void (*sigint_handler())(int) {
  struct sigaction sa {};
  sigaction(SIGINT, nullptr, &sa);
  return sa.sa_handler;
}

// Each test starts from SIGINT's default disposition and puts back the one it found: a runner
// started in the background or under nohup hands SIGINT ignored to its children.
class InterruptScopeTest : public ::testing::Test {
 protected:
  void SetUp() override { inherited_ = signal(SIGINT, SIG_DFL); }
  void TearDown() override { signal(SIGINT, inherited_); }

 private:
  void (*inherited_)(int) = SIG_DFL;
};

bool wait_interrupted(const InterruptScope& scope) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!scope.interrupted() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return scope.interrupted();
}

TEST_F(InterruptScopeTest, SigintGoesToTheWatcherNeverToAComputeThread) {
  ASSERT_EQ(sigint_handler(), SIG_DFL);
  ASSERT_FALSE(sigint_blocked_here());
  ThreadPool pool(3);  // started before the scope: its workers block SIGINT themselves
  {
    const InterruptScope scope;
    EXPECT_TRUE(sigint_blocked_here());
    std::atomic<int> blocked{0};
    pool.parallel_for(3, [&](int64_t, int64_t, int) { blocked += sigint_blocked_here() ? 1 : 0; });
    EXPECT_EQ(blocked.load(), 3);

    std::atomic<bool> stop{false};
    std::thread busy([&] {  // a compute loop running while the signal comes
      while (!stop.load()) pool.parallel_for(3, [](int64_t, int64_t, int) {});
    });
    ASSERT_EQ(kill(getpid(), SIGINT), 0);
    EXPECT_TRUE(wait_interrupted(scope));
    stop = true;
    busy.join();
    // The fallback handler (SA_RESETHAND) never ran: no thread took the signal on its own stack.
    EXPECT_NE(sigint_handler(), SIG_DFL);
  }
  EXPECT_EQ(sigint_handler(), SIG_DFL);
  EXPECT_FALSE(sigint_blocked_here());
}

TEST_F(InterruptScopeTest, IgnoredSigintStaysIgnored) {
  signal(SIGINT, SIG_IGN);
  {
    const InterruptScope scope;
    EXPECT_FALSE(sigint_blocked_here());
    ASSERT_EQ(kill(getpid(), SIGINT), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(scope.interrupted());
  }
  EXPECT_EQ(sigint_handler(), SIG_IGN);
}

TEST_F(InterruptScopeTest, SecondSigintEndsTheProcess) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const InterruptScope scope;
    kill(getpid(), SIGINT);
    if (!wait_interrupted(scope)) _exit(2);
    kill(getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    _exit(3);  // still alive: wrong
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

}  // namespace
}  // namespace hg::cli
