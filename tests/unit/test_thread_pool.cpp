// The pool runs every index exactly once, in chunks aligned to the grain, across many
// back-to-back jobs (the decode loop's pattern); built under TSan by `make test-tsan`.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hybridgen/error.h"
#include "util/thread_pool.h"

namespace hg {
namespace {

TEST(ThreadPool, EveryIndexOnceAcrossManyJobs) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  for (int job = 0; job < 2000; ++job) {
    const int64_t n = 1 + job % 997;
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    });
  }
  int64_t total = 0;
  for (auto& h : hits) total += h.load();
  int64_t expected = 0;
  for (int job = 0; job < 2000; ++job) expected += 1 + job % 997;
  EXPECT_EQ(total, expected);
}

TEST(ThreadPool, ChunksAreGrainAligned) {
  ThreadPool pool(2);
  std::atomic<int> misaligned{0};
  pool.parallel_for(
      1000,
      [&](int64_t b, int64_t e, int) {
        if (b % 16 != 0 || (e % 16 != 0 && e != 1000)) misaligned++;
      },
      16);
  EXPECT_EQ(misaligned.load(), 0);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(10, [&](int64_t b, int64_t e, int t) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    EXPECT_EQ(t, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, IdleWorkersSleepAndWake) {
  ThreadPool pool(2);
  std::atomic<int> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e, int) { sum += static_cast<int>(e - b); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers fall asleep
  pool.parallel_for(100, [&](int64_t b, int64_t e, int) { sum += static_cast<int>(e - b); });
  EXPECT_EQ(sum.load(), 200);
}

TEST(ThreadPool, ReservedCoresParkTheHighestWorkers) {
  ThreadPool pool(4);
  // The highest thread_index seen in 50 jobs whose chunks take a while (chunks go to whichever
  // thread is free: a worker still waking must find some left).
  auto max_index = [&] {
    std::atomic<int> top{-1};
    for (int job = 0; job < 50; ++job)
      pool.parallel_for(400, [&](int64_t, int64_t, int t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        for (int seen = top.load(); t > seen && !top.compare_exchange_weak(seen, t);) {
        }
      });
    return top.load();
  };
  EXPECT_EQ(pool.width(), 4);
  EXPECT_EQ(max_index(), 3);
  pool.reserve(2);
  EXPECT_EQ(pool.width(), 2);
  EXPECT_EQ(max_index(), 1);
  pool.reserve(5);  // more than it has: the caller still runs the work
  EXPECT_EQ(pool.width(), 1);
  EXPECT_EQ(max_index(), 0);
  pool.release(7);
  EXPECT_EQ(pool.width(), 4);
  std::atomic<int64_t> sum{0};  // every index once after parking and waking again
  pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
  EXPECT_EQ(max_index(), 3);
}

TEST(ThreadPool, FewerUnitsThanThreadsWakeOnlyWhatTheyNeed) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(2, [&](int64_t b, int64_t e, int t) {
    EXPECT_EQ(e - b, 1);
    EXPECT_LT(t, 2);
    ++calls;
  });
  EXPECT_EQ(calls.load(), 2);
}

// Holds threads of this process in a signal handler until released, so that a test decides which
// of a pool's workers have not started a job yet instead of racing them. A signal handler sees
// only globals: the threads to hold (their ids, 0 once released) and how many are held now.
constexpr int kMaxHeld = 8;
std::atomic<pid_t> g_to_hold[kMaxHeld];
std::atomic<int> g_held{0};

pid_t thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Holds the thread until released or, so that a pool waiting for a held worker fails the test
// rather than hanging it, for a minute at most.
void hold_this_thread(int) {
  const int saved_errno = errno;
  const pid_t self = thread_id();
  for (auto& slot : g_to_hold) {
    if (slot.load() != self) continue;
    g_held.fetch_add(1);
    timespec start{}, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    const timespec pause{0, 100'000};
    do {
      nanosleep(&pause, nullptr);  // async-signal-safe, unlike a futex wait
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while (slot.load() == self && now.tv_sec - start.tv_sec < 60);
    g_held.fetch_sub(1);
  }
  errno = saved_errno;
}

// Waits for `done` (a guard against a hang only: the checks do not depend on how long it takes).
template <typename Fn>
bool eventually(Fn done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

class HeldThreads {
 public:
  HeldThreads() {
    struct sigaction sa {};
    sa.sa_handler = hold_this_thread;  // no SA_RESTART: a worker asleep in a futex wakes to take it
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &previous_);
  }
  ~HeldThreads() {
    release_all();
    eventually([] { return g_held.load() == 0; });
    sigaction(SIGUSR1, &previous_, nullptr);
  }
  HeldThreads(const HeldThreads&) = delete;
  HeldThreads& operator=(const HeldThreads&) = delete;

  // Holds these threads (at most kMaxHeld, while none is held); returns once all of them are held.
  bool hold(const std::vector<pid_t>& ids) {
    if (ids.size() > kMaxHeld || g_held.load() != 0) return false;
    for (size_t i = 0; i < ids.size(); ++i) {
      g_to_hold[i].store(ids[i]);
      syscall(SYS_tgkill, getpid(), ids[i], SIGUSR1);
    }
    return eventually([&] { return g_held.load() == static_cast<int>(ids.size()); });
  }
  void release(pid_t id) {
    for (auto& slot : g_to_hold)
      if (slot.load() == id) slot.store(0);
  }
  void release_all() {
    for (auto& slot : g_to_hold) slot.store(0);
  }

 private:
  struct sigaction previous_ {};
};

// A worker that has not started a job when the caller has run its own chunk 0 (held here in a
// signal handler; in a run, descheduled or still waking from its futex) leaves the chunks to the
// others: each runs once, with the index of the thread that runs it; a worker that starts in time
// takes the next chunk left.
TEST(ThreadPool, CallerRunsTheChunksOfWorkersNotStartedYet) {
  ThreadPool pool(3);
  const pid_t caller = thread_id();
  // Runs a job of 3 chunks; returns the thread that ran each chunk. chunk0 (may be empty): what
  // chunk 0 does first, given the runs of each chunk so far; `meet`: chunks 1 and 2 each wait
  // until both have started, so two threads other than the caller must run them.
  using Hits = std::vector<std::atomic<int>>;
  auto job = [&](const std::function<void(const Hits&)>& chunk0, bool meet = false) {
    Hits hits(3);
    std::vector<std::atomic<pid_t>> runner(3);
    std::atomic<int> arrived{0};
    pool.parallel_for(3, [&](int64_t b, int64_t e, int t) {
      ASSERT_EQ(e - b, 1);
      ASSERT_EQ(t == 0, thread_id() == caller);  // thread_index is the runner's: 0 for the caller
      ASSERT_LT(t, 3);
      if (b == 0) {
        ASSERT_EQ(t, 0);  // the caller takes chunk 0 before it wakes a worker
      }
      if (b == 0 && chunk0) chunk0(hits);
      if (b > 0 && meet) {
        arrived.fetch_add(1);
        EXPECT_TRUE(eventually([&] { return arrived.load() == 2; })) << "chunks 1 and 2 never ran side by side";
      }
      runner[static_cast<size_t>(b)].store(thread_id());
      hits[static_cast<size_t>(b)].fetch_add(1);
    });
    std::vector<pid_t> out;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(hits[i].load(), 1) << "chunk " << i;
      out.push_back(runner[i].load());
    }
    return out;
  };

  // While the caller's chunk 0 waits for the others, only the workers can run them, one each
  // (they wait for each other), which also tells the workers' thread ids.
  std::vector<pid_t> ran = job(
      [](const Hits& hits) {
        EXPECT_TRUE(eventually([&] { return hits[1].load() + hits[2].load() == 2; })) << "the workers never ran";
      },
      true);
  const pid_t worker1 = ran[1], worker2 = ran[2];
  ASSERT_NE(worker1, caller);
  ASSERT_NE(worker2, caller);
  ASSERT_NE(worker1, worker2);

  HeldThreads held;
  // Neither worker has started: the caller runs all three chunks.
  ASSERT_TRUE(held.hold({worker1, worker2})) << "the workers were not held within a minute";
  EXPECT_EQ(job({}), std::vector<pid_t>(3, caller));

  // Worker 1 starts while the caller runs chunk 0 (which waits for chunk 1 to have run): it takes
  // the next chunk, and the last goes to whichever of the two is free first; held worker 2 none.
  ran = job([&](const Hits& hits) {
    held.release(worker1);
    EXPECT_TRUE(eventually([&] { return hits[1].load() == 1; })) << "the released worker never ran";
  });
  EXPECT_EQ(ran[0], caller);
  EXPECT_EQ(ran[1], worker1);
  EXPECT_TRUE(ran[2] == caller || ran[2] == worker1);

  // Both free again: every chunk once, by whoever claims it first.
  held.release_all();
  ASSERT_TRUE(eventually([] { return g_held.load() == 0; }));
  job({});
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // sanitizers reserve terabytes of address space
// When the system refuses a thread, the pool throws hg::Error after joining the threads it
// started; it used to end in std::terminate (exit 134: `hybridgen -t 99999`). The child process
// caps its address space so that thread stacks soon cannot be mapped.
TEST(ThreadPool, RefusedThreadIsAnErrorNotAnAbort) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (64u << 20);
    const rlimit limit{cap, cap};
    if (pages == 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    try {
      ThreadPool pool(4096);  // 8 MiB stacks: a few fit under the cap, not 4096
      _exit(2);
    } catch (const Error& e) {
      _exit(std::string(e.what()).find("cannot start thread") != std::string::npos ? 0 : 4);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
#endif

}  // namespace
}  // namespace hg
