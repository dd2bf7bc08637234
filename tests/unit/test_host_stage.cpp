// HostStage's job-slot protocol: jobs run in submission order on the stage's pool, each slot
// holds one job at a time, exceptions resurface in wait() and leave the slot usable, and a
// submit/wait cycle allocates nothing (this binary counts operator new).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "attention/host_stage.h"
#include "hybridgen/error.h"

// Both the allocation and the deallocation functions are replaced (malloc / free); GCC's
// -Wmismatched-new-delete cannot see that pairing once it inlines std::allocator.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace hg {
namespace {

TEST(HostStage, JobsRunInOrderAndWaitInAnyOrder) {
  HostStage stage(2, 8);
  std::vector<int> order(24, -1);  // order[k]: the tag of the k-th job that ran
  std::atomic<int> ran{0};
  std::vector<int64_t> sums(8, 0);
  for (int round = 0; round < 3; ++round) {  // the slot ring wraps around
    for (int s = 0; s < 8; ++s) {
      int* out = order.data();
      std::atomic<int>* count = &ran;
      int64_t* sum = &sums[static_cast<size_t>(s)];
      const int tag = round * 8 + s;
      stage.submit(s, [out, count, sum, tag](ThreadPool& pool) {
        out[count->fetch_add(1)] = tag;
        std::atomic<int64_t> acc{0};
        pool.parallel_for(100, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) acc += i;
        });
        *sum += acc.load();
      });
    }
    for (int s = 7; s >= 0; --s) {
      EXPECT_TRUE(stage.pending(s));
      EXPECT_GE(stage.wait(s), 0.0);
      EXPECT_FALSE(stage.pending(s));
    }
  }
  for (int i = 0; i < 24; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  for (int64_t s : sums) EXPECT_EQ(s, 3 * 4950);
}

TEST(HostStage, ExceptionResurfacesInWaitAndTheSlotIsReusable) {
  HostStage stage(1, 2);
  stage.submit(1, [](ThreadPool&) { throw Error("job failed on purpose"); });
  EXPECT_THROW(stage.wait(1), Error);
  int x = 0;
  int* px = &x;
  EXPECT_GE(stage.run(1, [px](ThreadPool&) { *px = 42; }), 0.0);
  EXPECT_EQ(x, 42);
}

TEST(HostStage, MisuseIsAnError) {
  HostStage stage(1, 2);
  EXPECT_THROW(stage.wait(0), Error);                        // nothing submitted
  EXPECT_THROW(stage.submit(2, [](ThreadPool&) {}), Error);  // no such slot
  std::atomic<bool> release{false};
  std::atomic<bool>* r = &release;
  stage.submit(0, [r](ThreadPool&) {
    while (!r->load()) std::this_thread::yield();
  });
  EXPECT_THROW(stage.submit(0, [](ThreadPool&) {}), Error);  // slot 0 still has its job
  release = true;
  stage.wait(0);
}

// On the CPU device the host workers borrow the device pool's cores: reserved from the submit
// (the device's next op already leaves them) until the queue runs empty, then all back.
TEST(HostStage, ReservesSharedCoresOnlyWhileItHasWork) {
  ThreadPool device(3);
  HostStage stage(2, 2, {}, &device);
  EXPECT_EQ(device.width(), 3);
  std::atomic<bool> go{false};
  std::atomic<int> seen_width{0};
  std::atomic<bool>* g = &go;
  std::atomic<int>* w = &seen_width;
  ThreadPool* d = &device;
  stage.submit(0, [g, w, d](ThreadPool&) {
    while (!g->load()) std::this_thread::yield();
    w->store(d->width());
  });
  stage.submit(1, [](ThreadPool&) {});
  EXPECT_EQ(device.width(), 1);  // reserved at submit, before the job starts
  go = true;
  stage.wait(0);
  stage.wait(1);
  EXPECT_EQ(seen_width.load(), 1);
  EXPECT_EQ(device.width(), 3);  // the queue is empty: released before wait returned
}

// When the host would take every core of the device's pool (CorePlan::shared: the default
// --host-threads 0 on the CPU device), the jobs run in wait(), in submission order, on that pool
// from the waiting thread, and the pool keeps its width.
TEST(HostStage, JobsRunInlineOnTheDevicePoolWhenTheyWouldTakeEveryCore) {
  ThreadPool device(2);
  HostStage stage(2, 4, {}, &device);
  struct Seen {
    std::vector<int> order;
    std::thread::id thread;
    ThreadPool* pool = nullptr;
    int width = 0;
    int64_t sum = 0;
  } seen;
  Seen* p = &seen;
  for (int s = 0; s < 3; ++s)
    stage.submit(s, [p, s](ThreadPool& pool) {
      p->order.push_back(s);
      p->thread = std::this_thread::get_id();
      p->pool = &pool;
      p->width = pool.width();
      std::atomic<int64_t> sum{0};
      pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
        int64_t local = 0;
        for (int64_t i = b; i < e; ++i) local += i;
        sum += local;
      });
      p->sum += sum.load();
    });
  EXPECT_TRUE(seen.order.empty());  // nothing ran before a wait
  EXPECT_EQ(device.width(), 2);     // and no core was reserved
  EXPECT_GE(stage.wait(1), 0.0);    // runs slot 0's job first, then slot 1's
  EXPECT_EQ(seen.order, (std::vector<int>{0, 1}));
  EXPECT_EQ(seen.thread, std::this_thread::get_id());
  EXPECT_EQ(seen.pool, &device);
  EXPECT_EQ(seen.width, 2);
  stage.wait(0);  // already done
  stage.wait(2);
  EXPECT_EQ(seen.order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(seen.sum, 3 * 499500);
  // An exception resurfaces in its own slot's wait, and the slot is reusable.
  stage.submit(3, [](ThreadPool&) { throw Error("job failed on purpose"); });
  stage.submit(0, [p](ThreadPool&) { p->order.push_back(10); });
  EXPECT_NO_THROW(stage.wait(0));  // ran slot 3's job too
  EXPECT_THROW(stage.wait(3), Error);
  EXPECT_GE(stage.run(3, [p](ThreadPool&) { p->order.push_back(13); }), 0.0);
  EXPECT_EQ(seen.order, (std::vector<int>{0, 1, 2, 10, 13}));
}

TEST(HostStage, SubmitAndWaitAllocateNothing) {
  HostStage stage(2, 4);
  // A job as large as the decode pipeline's (five pointers and an int).
  struct Args {
    const void *a, *b, *c, *d;
    int64_t* out;
    int layer;
  };
  int64_t result = 0;
  const Args args{nullptr, nullptr, nullptr, nullptr, &result, 3};
  stage.run(0, [args](ThreadPool&) { *args.out += args.layer; });  // warm: pool and queue exist
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 1000; ++i) {
    stage.submit(i % 4, [args](ThreadPool&) { *args.out += args.layer; });
    stage.wait(i % 4);
  }
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0);
  EXPECT_EQ(result, 3 * 1001);
}

}  // namespace
}  // namespace hg
