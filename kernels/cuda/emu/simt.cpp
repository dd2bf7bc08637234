// The emulated device's SIMT machinery (kernels/cuda/emu/cuda_emu.h says what it is for): a
// kernel's blocks run one after another on the stream's worker thread; within a block every
// CUDA thread is a fiber (Boost.Context) on a pooled, guard-paged stack. A fiber runs until it
// finishes or waits at a barrier; the block's scheduler then resumes the next fiber that can go
// on, in the order HG_CUDA_EMU_ORDER names (forward, reverse or random), so a kernel that
// forgets a barrier reads another order's values and its result changes.
//
// Barriers are strict where the hardware is merely lenient: __syncthreads completes when every
// thread of the block has arrived (a thread that returned early never arrives), a warp operation
// when every lane its mask names has arrived with the same mask. A barrier that can never
// complete aborts with the kernel's name, the block and what each thread waits for.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emu/cuda_emu.h"
#include "kernels/cuda/emu/runtime_internal.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HG_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HG_EMU_ASAN 1
#endif
#ifdef HG_EMU_ASAN
extern "C" void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
#endif

namespace hg_cuda_emu::simt {

namespace ctx = boost::context;

namespace {

// sm_90's limits, as cudaGetDeviceProperties reports them (runtime.cpp fills the same values).
constexpr size_t kStaticSharedLimit = 48 * 1024;
constexpr size_t kDynamicSharedDefault = 48 * 1024;
constexpr size_t kSharedOptinLimit = 227 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridX = 2147483647u, kMaxGridYZ = 65535u, kMaxBlockZ = 64u;
constexpr size_t kGuard = 16;            // canary bytes around every shared array
constexpr unsigned char kCanary = 0xA5;  // canaries; fresh shared memory is 0xFF (NaN as floats)

#ifdef HG_EMU_ASAN
constexpr size_t kStackBytes = 512 * 1024;
#else
constexpr size_t kStackBytes = 128 * 1024;
#endif

// A pool of guard-paged fiber stacks, one pool per OS thread (fibers never migrate).
class StackPool {
 public:
  ~StackPool() {
    for (void* base : free_) {
#ifdef HG_EMU_ASAN
      // The shadow outlives the mapping: a later mmap at these addresses (a stream's thread gone,
      // a large malloc) would inherit the last fiber's poisoned entry frames.
      __asan_unpoison_memory_region(static_cast<char*>(base) + page(), kStackBytes);
#endif
      munmap(base, kStackBytes + page());
    }
  }
  ctx::stack_context allocate() {
    void* base;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, kStackBytes + page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
      if (base == MAP_FAILED) {
        std::fprintf(stderr, "cuda-emu: cannot map a fiber stack\n");
        std::abort();
      }
      mprotect(base, page(), PROT_NONE);  // overflowing the stack faults instead of corrupting
    }
#ifdef HG_EMU_ASAN
    // A reused stack still carries the shadow of its last fiber's outermost frames (Boost's entry
    // frame never returns; every deeper frame did, unpoisoning its own): clear the top.
    constexpr size_t kTop = 64 * 1024;
    __asan_unpoison_memory_region(static_cast<char*>(base) + page() + kStackBytes - kTop, kTop);
#endif
    // Stacks a power of two apart would put every fiber's hot frames in the same cache sets:
    // each stack's top is shifted by its own multiple of 64 bytes (up to 4 KiB).
    const size_t color = (next_color_++ % 64) * 64;
    ctx::stack_context sc;
    sc.size = kStackBytes - color;
    sc.sp = static_cast<char*>(base) + page() + kStackBytes - color;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) { free_.push_back(static_cast<char*>(sc.sp) - sc.size - page()); }

 private:
  static size_t page() {
    static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
  }
  std::vector<void*> free_;
  size_t next_color_ = 0;
};

thread_local StackPool tl_stacks;

struct PoolAllocator {
  ctx::stack_context allocate() { return tl_stacks.allocate(); }
  void deallocate(ctx::stack_context& sc) noexcept { tl_stacks.deallocate(sc); }
};

enum class Wait { None, Block, Warp };

struct Thread {
  ThreadState state;
  ctx::fiber fiber;  // the thread's context while it is suspended (empty before start, after end)
  ctx::fiber sink;   // the scheduler's context while the thread runs
  bool started = false, done = false;
  Wait wait = Wait::None;
  uint64_t wait_gen = 0;
  const char* wait_what = "";
  void* asan_fake = nullptr;
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
};

struct Warp {
  unsigned expected = 0;  // the mask of the pending operation
  unsigned arrived = 0;
  uint64_t gen = 0;
  uint64_t vals[2][32] = {};
  const char* what = "";
};

struct SharedDecl {
  std::string name;
  size_t offset, bytes;
};

enum class Order { Forward, Reverse, Random };

Order order_from_env() {
  const char* v = std::getenv("HG_CUDA_EMU_ORDER");
  if (!v || !*v || std::string(v) == "forward") return Order::Forward;
  if (std::string(v) == "reverse") return Order::Reverse;
  if (std::string(v) == "random") return Order::Random;
  std::fprintf(stderr, "cuda-emu: HG_CUDA_EMU_ORDER=%s is not forward, reverse or random\n", v);
  std::abort();
}

// One block's run: its threads, warps, barrier state and shared memory.
struct BlockRun {
  const LaunchConfig* cfg = nullptr;
  KernelBody* body = nullptr;
  BlockState block;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  int block_arrived = 0;
  uint64_t block_gen = 0;
  std::vector<unsigned char> arena;  // [guard][dynamic][guard]([array][guard])*
  size_t static_begin = 0, static_end = 0;
  std::vector<SharedDecl> decls;
  const void* sched_stack_bottom = nullptr;
  size_t sched_stack_size = 0;
};

thread_local BlockRun* tl_block = nullptr;
thread_local Thread* tl_thread = nullptr;

std::mutex g_attr_mutex;
std::unordered_map<const void*, size_t> g_dynamic_limit;  // cudaFuncAttributeMaxDynamicSharedMemorySize

std::atomic<uint64_t> g_launches{0}, g_blocks{0}, g_threads{0};

std::string dim_str(const uint3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}
std::string dim_str(const dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

[[noreturn]] void fail(const BlockRun& b, const std::string& why) {
  std::fprintf(stderr, "cuda-emu: kernel %s, block %s of grid %s, block %s: %s\n", b.cfg->kernel_name,
               dim_str(b.block.block_idx).c_str(), dim_str(b.block.grid_dim).c_str(),
               dim_str(b.block.block_dim).c_str(), why.c_str());
  std::fflush(stderr);
  std::abort();
}

// ---- switching between the scheduler and a thread's fiber ----

void yield_to_scheduler(Thread& t) {
  BlockRun& b = *tl_block;
#ifdef HG_EMU_ASAN
  __sanitizer_start_switch_fiber(&t.asan_fake, b.sched_stack_bottom, b.sched_stack_size);
#endif
  t.sink = std::move(t.sink).resume();
#ifdef HG_EMU_ASAN
  __sanitizer_finish_switch_fiber(t.asan_fake, &b.sched_stack_bottom, &b.sched_stack_size);
#else
  (void)b;
#endif
}

void resume_thread(BlockRun& b, Thread& t) {
  tl_thread = &t;
  if (!t.started) {
    t.started = true;
    ctx::stack_context sc = tl_stacks.allocate();
    t.stack_bottom = static_cast<char*>(sc.sp) - sc.size;
    t.stack_size = sc.size;
    t.fiber = ctx::fiber(std::allocator_arg, ctx::preallocated(sc.sp, sc.size, sc), PoolAllocator{},
                         [&b, &t](ctx::fiber&& sink) {
#ifdef HG_EMU_ASAN
                           __sanitizer_finish_switch_fiber(nullptr, &b.sched_stack_bottom, &b.sched_stack_size);
#endif
                           t.sink = std::move(sink);
                           try {
                             b.body->run_thread();
                           } catch (const std::exception& e) {
                             fail(b, std::string("thread threw ") + e.what());
                           }
                           t.done = true;
#ifdef HG_EMU_ASAN
                           __sanitizer_start_switch_fiber(nullptr, b.sched_stack_bottom, b.sched_stack_size);
#endif
                           return std::move(t.sink);
                         });
  }
#ifdef HG_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, t.stack_bottom, t.stack_size);
#endif
  t.fiber = std::move(t.fiber).resume();
#ifdef HG_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  tl_thread = nullptr;
}

bool released(const BlockRun& b, const Thread& t) {
  switch (t.wait) {
    case Wait::None:
      return true;
    case Wait::Block:
      return b.block_gen != t.wait_gen;
    case Wait::Warp:
      return b.warps[static_cast<size_t>(t.state.linear / warpSize)].gen != t.wait_gen;
  }
  return true;
}

[[noreturn]] void report_deadlock(const BlockRun& b) {
  int exited = 0, at_block = 0;
  std::string warps;
  for (const Thread& t : b.threads) {
    if (t.done) {
      ++exited;
    } else if (t.wait == Wait::Block) {
      ++at_block;
    } else if (t.wait == Wait::Warp) {
      const Warp& w = b.warps[static_cast<size_t>(t.state.linear / warpSize)];
      if (t.state.linear % warpSize == __builtin_ctz(w.arrived ? w.arrived : 1u))
        warps += " warp " + std::to_string(t.state.linear / warpSize) + " waits in " + w.what + " for lanes " +
                 std::to_string(std::popcount(w.expected & ~w.arrived)) + " more (mask " + std::to_string(w.expected) +
                 ");";
    }
  }
  fail(b, "a barrier can never complete: " + std::to_string(at_block) + " threads wait at __syncthreads, " +
              std::to_string(exited) + " exited;" + warps);
}

void check_canaries(const BlockRun& b) {
  auto intact = [&](size_t at) {
    for (size_t i = 0; i < kGuard; ++i)
      if (b.arena[at + i] != kCanary) return false;
    return true;
  };
  if (!intact(0)) fail(b, "wrote before the dynamic shared memory");
  if (!intact(b.static_begin - kGuard)) fail(b, "wrote past the dynamic shared memory");
  for (const SharedDecl& d : b.decls)
    if (!intact(d.offset - kGuard) || !intact(d.offset + d.bytes))
      fail(b, "wrote outside shared array '" + d.name + "'");
}

void run_block(BlockRun& b, const std::vector<int>& order) {
  const int n = static_cast<int>(b.threads.size());
  for (int i = 0; i < n; ++i) {
    Thread& t = b.threads[static_cast<size_t>(i)];
    t = Thread{};
    t.state.linear = i;
    t.state.thread_idx.x = static_cast<unsigned>(i) % b.block.block_dim.x;
    t.state.thread_idx.y = static_cast<unsigned>(i) / b.block.block_dim.x % b.block.block_dim.y;
    t.state.thread_idx.z = static_cast<unsigned>(i) / (b.block.block_dim.x * b.block.block_dim.y);
  }
  for (Warp& w : b.warps) w = Warp{};
  b.block_arrived = 0;
  b.block_gen = 0;
  b.decls.clear();
  const size_t dyn = b.cfg->dynamic_smem;
  std::memset(b.arena.data(), kCanary, kGuard);
  std::memset(b.arena.data() + kGuard, 0xFF, dyn);
  std::memset(b.arena.data() + kGuard + dyn, kCanary, kGuard);
  b.static_begin = b.static_end = kGuard + dyn + kGuard;

  int live = n;
  while (live > 0) {
    bool progress = false;
    for (int i : order) {
      Thread& t = b.threads[static_cast<size_t>(i)];
      if (t.done || !released(b, t)) continue;
      t.wait = Wait::None;
      resume_thread(b, t);
      progress = true;
      if (t.done) --live;
    }
    if (!progress) report_deadlock(b);
  }
  check_canaries(b);
}

void check_config(const LaunchConfig& c, std::string* why) {
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || c.block.z > kMaxBlockZ)
    *why = "block " + dim_str(c.block) + " is not 1 to 1024 threads (z at most 64)";
  else if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > kMaxGridX || c.grid.y > kMaxGridYZ ||
           c.grid.z > kMaxGridYZ)
    *why = "grid " + dim_str(c.grid) + " is outside sm_90's limits (x < 2^31, y and z <= 65535, none 0)";
  else {
    size_t limit = kDynamicSharedDefault;
    {
      std::lock_guard lock(g_attr_mutex);
      const auto it = g_dynamic_limit.find(c.kernel);
      if (it != g_dynamic_limit.end()) limit = it->second;
    }
    if (c.dynamic_smem > limit)
      *why = std::to_string(c.dynamic_smem) + " bytes of dynamic shared memory > the kernel's limit of " +
             std::to_string(limit) + " (cudaFuncAttributeMaxDynamicSharedMemorySize raises it to 227 KiB)";
  }
}

// Blocks are independent (no grid-wide sync): a grid's blocks spread over the stream's worker
// and the pool's helpers, one per further core, each running whole blocks on its own fibers.
struct GridJob {
  std::function<void()> participate;  // runs blocks until none is left
  int helpers_wanted = 0;
  int helpers_joined = 0;
  int helpers_done = 0;
};

class BlockPool {
 public:
  static BlockPool& get() {
    static BlockPool* pool = new BlockPool();  // never destroyed: its threads outlive main's statics
    return *pool;
  }

  // Runs job.participate on this thread and on up to job.helpers_wanted helpers; returns when all
  // that joined have finished.
  void run(GridJob& job) {
    if (helpers_.empty() || job.helpers_wanted == 0) {
      job.participate();
      return;
    }
    {
      std::lock_guard lock(m_);
      jobs_.push_back(&job);
    }
    cv_.notify_all();
    job.participate();
    std::unique_lock lock(m_);
    jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), &job), jobs_.end());  // no late joiners
    done_cv_.wait(lock, [&] { return job.helpers_done == job.helpers_joined; });
  }

 private:
  BlockPool() {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    int n = static_cast<int>(cores) - 1;
    if (const char* v = std::getenv("HG_CUDA_EMU_THREADS"); v && *v) n = std::max(0, std::atoi(v) - 1);
    for (int i = 0; i < n; ++i) helpers_.emplace_back([this] { help(); });
    for (auto& t : helpers_) t.detach();
  }

  void help() {
    std::unique_lock lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return !jobs_.empty(); });
      GridJob* job = jobs_.front();
      if (++job->helpers_joined >= job->helpers_wanted) jobs_.pop_front();
      lock.unlock();
      job->participate();
      lock.lock();
      ++job->helpers_done;
      done_cv_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<GridJob*> jobs_;
  std::vector<std::thread> helpers_;
};

void run_grid(const LaunchConfig& cfg, KernelBody& body) {
  static const Order order_kind = order_from_env();
  const int n = static_cast<int>(cfg.block.x * cfg.block.y * cfg.block.z);
  const uint64_t n_blocks = uint64_t{cfg.grid.x} * cfg.grid.y * cfg.grid.z;
  std::atomic<uint64_t> next{0};
  GridJob job;
  job.participate = [&] {
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    if (order_kind == Order::Reverse) std::reverse(order.begin(), order.end());
    BlockRun b;
    b.cfg = &cfg;
    b.body = &body;
    b.block.block_dim = cfg.block;
    b.block.grid_dim = cfg.grid;
    b.threads.resize(static_cast<size_t>(n));
    b.warps.resize(static_cast<size_t>((n + warpSize - 1) / warpSize));
    b.arena.resize(kGuard + cfg.dynamic_smem + kGuard + kStaticSharedLimit + 64 * kGuard + 64);
    BlockRun* saved = tl_block;
    tl_block = &b;
    for (uint64_t i; (i = next.fetch_add(1)) < n_blocks;) {
      const auto x = static_cast<unsigned>(i % cfg.grid.x);
      const auto y = static_cast<unsigned>(i / cfg.grid.x % cfg.grid.y);
      const auto z = static_cast<unsigned>(i / (uint64_t{cfg.grid.x} * cfg.grid.y));
      b.block.block_idx = {x, y, z};
      if (order_kind == Order::Random) {
        std::mt19937 rng(static_cast<uint32_t>(12345 + i));  // the same order whichever thread runs it
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
      }
      run_block(b, order);
    }
    tl_block = saved;
  };
  // A helper pays off only for enough work: a few blocks of a few threads run where they are.
  const uint64_t work = n_blocks * static_cast<uint64_t>(n);
  job.helpers_wanted = n_blocks < 2 || work < 4096 ? 0 : static_cast<int>(std::min<uint64_t>(n_blocks - 1, 64));
  BlockPool::get().run(job);
  g_launches.fetch_add(1, std::memory_order_relaxed);
  g_blocks.fetch_add(n_blocks, std::memory_order_relaxed);
  g_threads.fetch_add(n_blocks * static_cast<uint64_t>(n), std::memory_order_relaxed);
}

}  // namespace

ThreadState& this_thread() {
  if (!tl_thread) {
    std::fprintf(stderr, "cuda-emu: threadIdx read outside a kernel\n");
    std::abort();
  }
  return tl_thread->state;
}

const BlockState& this_block() {
  if (!tl_block) {
    std::fprintf(stderr, "cuda-emu: blockIdx read outside a kernel\n");
    std::abort();
  }
  return tl_block->block;
}

int lane_id() { return this_thread().linear % warpSize; }

void syncthreads() {
  BlockRun& b = *tl_block;
  Thread& t = *tl_thread;
  if (++b.block_arrived == static_cast<int>(b.threads.size())) {
    b.block_arrived = 0;
    ++b.block_gen;
    return;
  }
  t.wait = Wait::Block;
  t.wait_gen = b.block_gen;
  t.wait_what = "__syncthreads";
  yield_to_scheduler(t);
}

const uint64_t* warp_exchange(unsigned mask, uint64_t mine, const char* what) {
  BlockRun& b = *tl_block;
  Thread& t = *tl_thread;
  const int warp = t.state.linear / warpSize, lane = t.state.linear % warpSize;
  Warp& w = b.warps[static_cast<size_t>(warp)];
  const int lanes_here = std::min(warpSize, static_cast<int>(b.threads.size()) - warp * warpSize);
  const unsigned existing = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1u;
  if (!((mask >> lane) & 1u))
    fail(b, std::string(what) + ": lane " + std::to_string(lane) + " of warp " + std::to_string(warp) +
                " calls with a mask that does not name it");
  if (mask & ~existing)
    fail(b, std::string(what) + ": mask names lanes past the block's last thread (warp " + std::to_string(warp) + ")");
  if (w.arrived == 0) {
    w.expected = mask;
    w.what = what;
  } else if (w.expected != mask) {
    fail(b, std::string(what) + ": lanes of warp " + std::to_string(warp) + " meet with different masks (" +
                std::to_string(w.expected) + " in " + w.what + ", " + std::to_string(mask) + ")");
  }
  const uint64_t gen = w.gen;
  w.vals[gen & 1][lane] = mine;
  w.arrived |= 1u << lane;
  if (w.arrived == w.expected) {
    w.arrived = 0;
    ++w.gen;
  } else {
    t.wait = Wait::Warp;
    t.wait_gen = gen;
    t.wait_what = what;
    yield_to_scheduler(t);
  }
  return w.vals[gen & 1];
}

void syncwarp(unsigned mask) { warp_exchange(mask, 0, "__syncwarp"); }

void* shared_array(size_t bytes, size_t align, const char* name) {
  BlockRun& b = *tl_block;
  ThreadState& t = tl_thread->state;
  const size_t i = static_cast<size_t>(t.shared_decls++);
  if (i < b.decls.size()) {
    const SharedDecl& d = b.decls[i];
    if (d.name != name || d.bytes != bytes)
      fail(b, "thread " + std::to_string(t.linear) + " declares shared array '" + name + "' where others declared '" +
                  d.name + "'");
    return b.arena.data() + d.offset;
  }
  size_t offset = b.static_end + kGuard;
  offset = (offset + align - 1) / align * align;
  const size_t end = offset + bytes;
  const size_t static_bytes = end - (kGuard + b.cfg->dynamic_smem + kGuard);
  if (static_bytes > kStaticSharedLimit)
    fail(b, "static shared memory reaches " + std::to_string(static_bytes) + " bytes at '" + name +
                "' (sm_90 allows 48 KiB)");
  if (static_bytes + b.cfg->dynamic_smem > kSharedOptinLimit)
    fail(b, "static and dynamic shared memory exceed 227 KiB at '" + std::string(name) + "'");
  if (end + kGuard > b.arena.size()) fail(b, "shared arena too small (internal)");
  std::memset(b.arena.data() + b.static_end, kCanary, offset - b.static_end);
  std::memset(b.arena.data() + offset, 0xFF, bytes);
  std::memset(b.arena.data() + end, kCanary, kGuard);
  b.decls.push_back({name, offset, bytes});
  b.static_end = end + kGuard;
  return b.arena.data() + offset;
}

void* dynamic_shared() { return tl_block->arena.data() + kGuard; }

void trap(const char* why) {
  if (tl_block) fail(*tl_block, why);
  std::fprintf(stderr, "cuda-emu: %s outside a kernel\n", why);
  std::abort();
}

cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  if (value < 0 || static_cast<size_t>(value) > kSharedOptinLimit) return cudaErrorInvalidValue;
  std::lock_guard lock(g_attr_mutex);
  g_dynamic_limit[kernel] = static_cast<size_t>(value);
  return cudaSuccess;
}

void launch(const LaunchConfig& cfg, KernelBody* body_raw) {
  std::shared_ptr<KernelBody> body(body_raw);
  std::string why;
  check_config(cfg, &why);
  if (!why.empty()) {
    runtime::set_launch_error(cudaErrorInvalidConfiguration, std::string("kernel ") + cfg.kernel_name + ": " + why);
    return;
  }
  runtime::enqueue(cfg.stream, [cfg, body] { run_grid(cfg, *body); }, cfg.kernel_name);
}

Stats stats() {
  Stats s;
  s.kernel_launches = g_launches.load();
  s.blocks = g_blocks.load();
  s.threads = g_threads.load();
  s.gemms = runtime::gemm_count();
  return s;
}

}  // namespace hg_cuda_emu::simt
