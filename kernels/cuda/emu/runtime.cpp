// The emulated CUDA runtime (kernels/cuda/emu/cuda_emu.h says what it is for): one device with
// an H100's limits, whose "device memory" is host memory tracked by allocation.
//
//   - Memory: cudaMalloc returns 256-byte aligned host memory filled with 0xFF bytes (NaN as
//     floats, -1 as ints), so reading memory nobody wrote shows. Every copy and memset checks that
//     its device side lies inside one allocation; a copy that does not is an invalid value, as a
//     kernel's stray access would be an illegal address. The capacity is 80 GiB
//     (HG_CUDA_EMU_MEMORY_GIB overrides it), so out-of-memory paths run too.
//   - Streams: each its own worker thread running its queue in order; events mark points in a
//     queue; cudaStreamWaitEvent queues a wait. So two streams really run at once and only events
//     and waits order them, as on the GPU.
//   - Copies follow the runtime's documented host synchronization: from pageable memory a
//     host-to-device copy waits for the stream and copies at once, a device-to-host copy returns
//     when it has run; with pinned (cudaMallocHost) or registered (cudaHostRegister) memory both
//     are asynchronous.
//   - Errors: cudaGetLastError returns and clears the last launch error of the calling thread; a
//     fault while work runs is sticky, and every call after it returns it.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cuda/emu/runtime_internal.h"

namespace hg_cuda_emu {

// A captured or instantiated graph: its nodes in issue order, each a kind and a task.
struct GraphNode {
  std::string kind;
  std::function<void()> task;
};
struct Graph {
  std::vector<GraphNode> nodes;
};
struct GraphExec {
  std::shared_ptr<const std::vector<GraphNode>> nodes;
};

struct Stream {
  std::thread worker;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  uint64_t submitted = 0, finished = 0;
  bool stop = false;
  // Stream capture (only the capturing thread touches these): the graph being built, and whether
  // something refused in a capture has invalidated it.
  std::unique_ptr<Graph> capture;
  bool capture_invalid = false;
};

struct EventState {
  uint64_t recorded = 0, completed = 0;
  bool timing = true;
  std::chrono::steady_clock::time_point when{};
};
struct Event {
  std::shared_ptr<EventState> state;
};

struct BlasHandle;

namespace {

enum class Kind { Device, Pinned, Registered };
struct Alloc {
  size_t bytes;  // as asked for: copies and operands are checked against this
  Kind kind;
  size_t rounded = 0;  // as allocated and counted against the capacity
};

class Runtime {
 public:
  static Runtime& get() {
    if (in_host_function) {
      // The real runtime refuses it (and may deadlock): a host function must not call CUDA.
      std::fprintf(stderr, "cuda-emu: a CUDA call inside a host function (cudaLaunchHostFunc)\n");
      std::abort();
    }
    static Runtime* r = new Runtime();  // never destroyed: streams may outlive static destructors
    return *r;
  }
  static thread_local bool in_host_function;  // a stream worker running a cudaLaunchHostFunc

  size_t capacity() const { return capacity_; }

  // ---- memory ----
  cudaError_t alloc(void** out, size_t bytes, Kind kind) {
    if (!out) return cudaErrorInvalidValue;
    const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    {
      std::lock_guard lock(mem_mutex_);
      if (kind == Kind::Device && device_bytes_ + rounded > capacity_) return cudaErrorMemoryAllocation;
    }
    void* p = std::aligned_alloc(256, rounded);
    if (!p) return cudaErrorMemoryAllocation;
    std::memset(p, kind == Kind::Device ? 0xFF : 0, rounded);
    std::lock_guard lock(mem_mutex_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = {std::max<size_t>(bytes, 1), kind, rounded};
    if (kind == Kind::Device) device_bytes_ += rounded;
    *out = p;
    return cudaSuccess;
  }

  cudaError_t release(void* p, Kind kind) {
    if (!p) return cudaSuccess;
    {
      std::lock_guard lock(mem_mutex_);
      const auto it = allocs_.find(reinterpret_cast<uintptr_t>(p));
      if (it == allocs_.end() || it->second.kind != kind) return cudaErrorInvalidValue;
      if (kind == Kind::Device) device_bytes_ -= it->second.rounded;
      allocs_.erase(it);
    }
    std::free(p);
    return cudaSuccess;
  }

  cudaError_t host_register(void* p, size_t bytes) {
    if (!p || bytes == 0) return cudaErrorInvalidValue;
    std::lock_guard lock(mem_mutex_);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (find_locked(p) || overlaps_locked(a, bytes)) return cudaErrorHostMemoryAlreadyRegistered;
    allocs_[a] = {bytes, Kind::Registered, bytes};
    return cudaSuccess;
  }

  cudaError_t host_unregister(void* p) {
    std::lock_guard lock(mem_mutex_);
    const auto it = allocs_.find(reinterpret_cast<uintptr_t>(p));
    if (it == allocs_.end() || it->second.kind != Kind::Registered) return cudaErrorHostMemoryNotRegistered;
    allocs_.erase(it);
    return cudaSuccess;
  }

  // The allocation holding p, if any: (start, Alloc).
  bool find(const void* p, uintptr_t* start, Alloc* a) {
    std::lock_guard lock(mem_mutex_);
    const auto* hit = find_locked(p);
    if (!hit) return false;
    *start = hit->first;
    *a = hit->second;
    return true;
  }

  bool device_range(const void* p, size_t bytes) {
    uintptr_t start;
    Alloc a;
    if (!find(p, &start, &a) || a.kind != Kind::Device) return false;
    return reinterpret_cast<uintptr_t>(p) + bytes <= start + a.bytes;
  }

  // Pinned or registered host memory covering [p, p + bytes).
  bool pinned_range(const void* p, size_t bytes) {
    uintptr_t start;
    Alloc a;
    if (!find(p, &start, &a) || a.kind == Kind::Device) return false;
    return reinterpret_cast<uintptr_t>(p) + bytes <= start + a.bytes;
  }

  size_t device_bytes() {
    std::lock_guard lock(mem_mutex_);
    return device_bytes_;
  }

  // ---- streams ----
  Stream* create_stream() {
    auto* s = new Stream();
    s->worker = std::thread([s] { run_stream(*s); });
    std::lock_guard lock(streams_mutex_);
    streams_.push_back(s);
    return s;
  }

  Stream* legacy() {
    std::call_once(legacy_once_, [&] { legacy_ = create_stream(); });
    return legacy_;
  }

  Stream* resolve(cudaStream_t s) { return s ? s : legacy(); }

  bool known(cudaStream_t s) {
    if (!s) return true;
    std::lock_guard lock(streams_mutex_);
    return std::find(streams_.begin(), streams_.end(), s) != streams_.end();
  }

  void destroy_stream(Stream* s) {
    sync_stream(s);
    {
      std::lock_guard lock(s->m);
      s->stop = true;
    }
    s->cv.notify_all();
    s->worker.join();
    std::lock_guard lock(streams_mutex_);
    streams_.erase(std::remove(streams_.begin(), streams_.end(), s), streams_.end());
    delete s;
  }

  void enqueue(Stream* s, std::function<void()> task, const char* node = "task") {
    if (s->capture) {
      s->capture->nodes.push_back({node, std::move(task)});
      return;
    }
    {
      std::lock_guard lock(s->m);
      s->queue.push_back(std::move(task));
      ++s->submitted;
    }
    s->cv.notify_all();
  }

  void sync_stream(Stream* s) {
    std::unique_lock lock(s->m);
    const uint64_t target = s->submitted;
    s->cv.wait(lock, [&] { return s->finished >= target; });
  }

  bool stream_idle(Stream* s) {
    std::lock_guard lock(s->m);
    return s->finished == s->submitted;
  }

  void sync_all() {
    std::vector<Stream*> all;
    {
      std::lock_guard lock(streams_mutex_);
      all = streams_;
    }
    for (Stream* s : all) sync_stream(s);
  }

  // ---- events ----
  std::mutex event_mutex;
  std::condition_variable event_cv;

  // ---- errors ----
  void set_sticky(cudaError_t e, const std::string& why) {
    std::fprintf(stderr, "cuda-emu: %s (sticky error %s: every later call fails)\n", why.c_str(), cudaGetErrorName(e));
    cudaError_t expected = cudaSuccess;
    sticky_.compare_exchange_strong(expected, e);
  }
  cudaError_t sticky() const { return sticky_.load(); }

  uint64_t gemms() const { return gemms_.load(); }
  void count_gemm() { gemms_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Runtime() {
    size_t gib = 80;
    if (const char* v = std::getenv("HG_CUDA_EMU_MEMORY_GIB"); v && *v) gib = std::strtoull(v, nullptr, 10);
    capacity_ = gib << 30;
  }

  const std::pair<const uintptr_t, Alloc>* find_locked(const void* p) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = allocs_.upper_bound(a);
    if (it == allocs_.begin()) return nullptr;
    --it;
    return a < it->first + it->second.bytes ? &*it : nullptr;
  }
  bool overlaps_locked(uintptr_t a, size_t bytes) const {
    const auto it = allocs_.lower_bound(a);
    return it != allocs_.end() && it->first < a + bytes;
  }

  static void run_stream(Stream& s) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(s.m);
        s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
        if (s.queue.empty()) return;
        task = std::move(s.queue.front());
        s.queue.pop_front();
      }
      if (get().sticky() == cudaSuccess) {
        try {
          task();
        } catch (const std::exception& e) {
          get().set_sticky(cudaErrorLaunchFailure, std::string("a queued operation failed: ") + e.what());
        }
      }
      task = nullptr;  // release what it captured before the stream counts it finished
      {
        std::lock_guard lock(s.m);
        ++s.finished;
      }
      s.cv.notify_all();
    }
  }

  size_t capacity_ = 0;
  std::mutex mem_mutex_;
  std::map<uintptr_t, Alloc> allocs_;
  size_t device_bytes_ = 0;
  std::mutex streams_mutex_;
  std::vector<Stream*> streams_;
  std::once_flag legacy_once_;
  Stream* legacy_ = nullptr;
  std::atomic<cudaError_t> sticky_{cudaSuccess};
  std::atomic<uint64_t> gemms_{0};
};

thread_local bool Runtime::in_host_function = false;

thread_local cudaError_t tl_last_error = cudaSuccess;
thread_local int tl_device = 0;

// A call's result: the sticky error wins; a failure is also the thread's last error.
cudaError_t result(cudaError_t e) {
  const cudaError_t s = Runtime::get().sticky();
  if (s != cudaSuccess) return s;
  if (e != cudaSuccess) tl_last_error = e;
  return e;
}

// Something a capture does not take: the capture is invalidated (cudaStreamEndCapture then fails)
// and the call fails, as the real runtime does.
cudaError_t refuse_in_capture(Stream* s, const std::string& what) {
  std::fprintf(stderr, "cuda-emu: %s during stream capture: the capture is invalidated\n", what.c_str());
  s->capture_invalid = true;
  return result(cudaErrorStreamCaptureUnsupported);
}

cudaError_t invalid(const std::string& why) {
  std::fprintf(stderr, "cuda-emu: %s\n", why.c_str());
  return result(cudaErrorInvalidValue);
}

std::string ptr_str(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Resolves cudaMemcpyDefault and checks that each side of a copy is what its kind says and that
// the device side lies inside one allocation.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind* kind, const char* call) {
  Runtime& r = Runtime::get();
  const bool dst_dev = r.device_range(dst, 1), src_dev = r.device_range(src, 1);
  if (*kind == cudaMemcpyDefault)
    *kind = dst_dev ? (src_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                    : (src_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool want_dst_dev = *kind == cudaMemcpyHostToDevice || *kind == cudaMemcpyDeviceToDevice;
  const bool want_src_dev = *kind == cudaMemcpyDeviceToHost || *kind == cudaMemcpyDeviceToDevice;
  if (*kind < cudaMemcpyHostToHost || *kind > cudaMemcpyDefault) return result(cudaErrorInvalidMemcpyDirection);
  if (want_dst_dev && !r.device_range(dst, bytes))
    return invalid(std::string(call) + ": destination " + ptr_str(dst) + " + " + std::to_string(bytes) +
                   " bytes is not inside one device allocation");
  if (want_src_dev && !r.device_range(src, bytes))
    return invalid(std::string(call) + ": source " + ptr_str(src) + " + " + std::to_string(bytes) +
                   " bytes is not inside one device allocation");
  if (!want_dst_dev && dst_dev) return invalid(std::string(call) + ": the host destination is device memory");
  if (!want_src_dev && src_dev) return invalid(std::string(call) + ": the host source is device memory");
  return cudaSuccess;
}

}  // namespace

// ---- runtime_internal.h ----

namespace runtime {

void enqueue(cudaStream_t stream, std::function<void()> task, const char* node) {
  Runtime& r = Runtime::get();
  r.enqueue(r.resolve(stream), std::move(task), node);
}

void set_launch_error(cudaError_t e, const std::string& why) {
  std::fprintf(stderr, "cuda-emu: %s\n", why.c_str());
  tl_last_error = e;
}

void set_sticky_error(cudaError_t e, const std::string& why) { Runtime::get().set_sticky(e, why); }

bool device_range(const void* p, size_t bytes) { return Runtime::get().device_range(p, bytes); }

uint64_t gemm_count() { return Runtime::get().gemms(); }
void count_gemm() { Runtime::get().count_gemm(); }

}  // namespace runtime

// ---- errors ----

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered:
      return "cudaErrorHostMemoryNotRegistered";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation:
      return "cudaErrorStreamCaptureIsolation";
    case cudaErrorGraphExecUpdateFailure:
      return "cudaErrorGraphExecUpdateFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
      return "pointer does not correspond to a registered memory region";
    case cudaErrorIllegalState:
      return "the resource is not in a valid state for this operation";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorGraphExecUpdateFailure:
      return "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const cudaError_t s = Runtime::get().sticky();
  if (s != cudaSuccess) return s;
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  const cudaError_t s = Runtime::get().sticky();
  return s != cudaSuccess ? s : tl_last_error;
}

// ---- devices ----

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return result(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return result(cudaErrorInvalidDevice);
  tl_device = device;
  return result(cudaSuccess);
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return result(cudaErrorInvalidValue);
  *device = tl_device;
  return result(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!p) return result(cudaErrorInvalidValue);
  if (device != 0) return result(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "emulated on the CPU, H100 limits");
  p->totalGlobalMem = Runtime::get().capacity();
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->l2CacheSize = size_t{50} << 20;
  return result(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize() {
  Runtime::get().sync_all();
  return result(cudaSuccess);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return result(cudaErrorInvalidValue);
  Runtime& r = Runtime::get();
  *total_bytes = r.capacity();
  *free_bytes = r.capacity() - std::min(r.capacity(), r.device_bytes());
  return result(cudaSuccess);
}

// ---- memory ----

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (Runtime::get().sticky() != cudaSuccess) return Runtime::get().sticky();
  return result(Runtime::get().alloc(ptr, bytes, Kind::Device));
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return result(cudaSuccess);
  Runtime::get().sync_all();  // cudaFree waits for the device, as the real one does
  return result(Runtime::get().release(ptr, Kind::Device));
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return result(Runtime::get().alloc(ptr, bytes, Kind::Pinned)); }
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned) { return cudaMallocHost(ptr, bytes); }

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return result(cudaSuccess);
  Runtime::get().sync_all();
  return result(Runtime::get().release(ptr, Kind::Pinned));
}

cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned) {
  return result(Runtime::get().host_register(ptr, bytes));
}
cudaError_t cudaHostUnregister(void* ptr) { return result(Runtime::get().host_unregister(ptr)); }

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  if (!attr) return result(cudaErrorInvalidValue);
  *attr = cudaPointerAttributes{};
  uintptr_t start;
  Alloc a;
  if (Runtime::get().find(ptr, &start, &a)) {
    attr->type = a.kind == Kind::Device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attr->devicePointer = const_cast<void*>(ptr);
    if (a.kind != Kind::Device) attr->hostPointer = const_cast<void*>(ptr);
  } else {
    attr->hostPointer = const_cast<void*>(ptr);
  }
  return result(cudaSuccess);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (r.sticky() != cudaSuccess) return r.sticky();
  if (!r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (const cudaError_t e = check_copy(dst, src, bytes, &kind, "cudaMemcpyAsync"); e != cudaSuccess) return e;
  Stream* s = r.resolve(stream);
  const auto copy = [dst, src, bytes] { std::memcpy(dst, src, bytes); };
  if (s->capture) {
    const bool pageable = (kind == cudaMemcpyHostToDevice && !r.pinned_range(src, bytes)) ||
                          (kind == cudaMemcpyDeviceToHost && !r.pinned_range(dst, bytes));
    if (pageable) return refuse_in_capture(s, "cudaMemcpyAsync with pageable host memory");
    r.enqueue(s, copy, "memcpy");
    return cudaSuccess;
  }
  if (kind == cudaMemcpyHostToDevice && !r.pinned_range(src, bytes)) {
    // Pageable source: the runtime synchronizes the stream, then stages the source before it returns.
    r.sync_stream(s);
    copy();
  } else if (kind == cudaMemcpyDeviceToHost && !r.pinned_range(dst, bytes)) {
    // Pageable destination: the call returns once the copy has completed.
    r.enqueue(s, copy);
    r.sync_stream(s);
  } else {
    r.enqueue(s, copy);
  }
  return result(cudaSuccess);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (e != cudaSuccess) return e;
  Runtime::get().sync_stream(Runtime::get().legacy());
  return result(cudaSuccess);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (r.sticky() != cudaSuccess) return r.sticky();
  if (bytes == 0) return cudaSuccess;
  if (!r.device_range(dst, bytes))
    return invalid("cudaMemsetAsync: " + ptr_str(dst) + " + " + std::to_string(bytes) +
                   " bytes is not inside one device allocation");
  r.enqueue(r.resolve(stream), [dst, value, bytes] { std::memset(dst, value, bytes); }, "memset");
  return result(cudaSuccess);
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  const cudaError_t e = cudaMemsetAsync(dst, value, bytes, nullptr);
  if (e != cudaSuccess) return e;
  Runtime::get().sync_stream(Runtime::get().legacy());
  return result(cudaSuccess);
}

// ---- streams ----

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  if (!stream) return result(cudaErrorInvalidValue);
  *stream = Runtime::get().create_stream();
  return result(cudaSuccess);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (!stream || !r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  r.destroy_stream(stream);
  return result(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (!r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (r.resolve(stream)->capture) return refuse_in_capture(r.resolve(stream), "cudaStreamSynchronize");
  r.sync_stream(r.resolve(stream));
  return result(cudaSuccess);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (!r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (r.resolve(stream)->capture) return refuse_in_capture(r.resolve(stream), "cudaStreamQuery");
  if (r.sticky() != cudaSuccess) return r.sticky();
  return r.stream_idle(r.resolve(stream)) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  Runtime& r = Runtime::get();
  if (!fn) return result(cudaErrorInvalidValue);
  if (!r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (r.sticky() != cudaSuccess) return r.sticky();
  r.enqueue(r.resolve(stream), [fn, data] {
    Runtime::in_host_function = true;
    fn(data);
    Runtime::in_host_function = false;
  }, "host");
  return result(cudaSuccess);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  Runtime& r = Runtime::get();
  if (!event || !r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (Stream* s = r.resolve(stream); s->capture) {
    s->capture_invalid = true;  // an event recorded outside the capture
    std::fprintf(stderr, "cuda-emu: cudaStreamWaitEvent on a capturing stream: the capture is invalidated\n");
    return result(cudaErrorStreamCaptureIsolation);
  }
  std::shared_ptr<EventState> e = event->state;
  uint64_t target;
  {
    std::lock_guard lock(r.event_mutex);
    target = e->recorded;
  }
  if (target == 0) return result(cudaSuccess);  // never recorded: nothing to wait for
  r.enqueue(r.resolve(stream), [e, target] {
    Runtime& rt = Runtime::get();
    std::unique_lock lock(rt.event_mutex);
    rt.event_cv.wait(lock, [&] { return e->completed >= target || rt.sticky() != cudaSuccess; });
  });
  return result(cudaSuccess);
}

// ---- events ----

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event) return result(cudaErrorInvalidValue);
  auto* e = new Event{std::make_shared<EventState>()};
  e->state->timing = (flags & cudaEventDisableTiming) == 0;
  *event = e;
  return result(cudaSuccess);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return result(cudaErrorInvalidResourceHandle);
  delete event;  // queued records and waits keep the state alive until they have run
  return result(cudaSuccess);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (!event || !r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (r.sticky() != cudaSuccess) return r.sticky();
  if (r.resolve(stream)->capture) return refuse_in_capture(r.resolve(stream), "cudaEventRecord (one-stream capture)");
  std::shared_ptr<EventState> e = event->state;
  uint64_t id;
  {
    std::lock_guard lock(r.event_mutex);
    id = ++e->recorded;
  }
  r.enqueue(r.resolve(stream), [e, id] {
    Runtime& rt = Runtime::get();
    {
      std::lock_guard lock(rt.event_mutex);
      e->completed = std::max(e->completed, id);
      e->when = std::chrono::steady_clock::now();
    }
    rt.event_cv.notify_all();
  });
  return result(cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  Runtime& r = Runtime::get();
  if (!event) return result(cudaErrorInvalidResourceHandle);
  if (r.sticky() != cudaSuccess) return r.sticky();
  std::lock_guard lock(r.event_mutex);
  return event->state->completed >= event->state->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Runtime& r = Runtime::get();
  if (!event) return result(cudaErrorInvalidResourceHandle);
  std::shared_ptr<EventState> e = event->state;
  std::unique_lock lock(r.event_mutex);
  const uint64_t target = e->recorded;
  r.event_cv.wait(lock, [&] { return e->completed >= target || r.sticky() != cudaSuccess; });
  lock.unlock();
  return result(cudaSuccess);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Runtime& r = Runtime::get();
  if (!ms || !start || !end) return result(cudaErrorInvalidValue);
  std::lock_guard lock(r.event_mutex);
  const EventState &a = *start->state, &b = *end->state;
  if (!a.timing || !b.timing) return result(cudaErrorInvalidResourceHandle);
  if (a.recorded == 0 || b.recorded == 0) return result(cudaErrorInvalidResourceHandle);
  if (a.completed < a.recorded || b.completed < b.recorded) return result(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b.when - a.when).count();
  return result(cudaSuccess);
}

// ---- stream capture and graphs ----

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  Runtime& r = Runtime::get();
  if (!stream || !r.known(stream)) return result(cudaErrorInvalidResourceHandle);  // not the legacy stream
  if (stream->capture) return result(cudaErrorIllegalState);
  stream->capture = std::make_unique<Graph>();
  stream->capture_invalid = false;
  return result(cudaSuccess);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Runtime& r = Runtime::get();
  if (!graph) return result(cudaErrorInvalidValue);
  *graph = nullptr;
  if (!stream || !r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (!stream->capture) return result(cudaErrorIllegalState);
  std::unique_ptr<Graph> g = std::move(stream->capture);
  if (stream->capture_invalid) {
    stream->capture_invalid = false;
    return result(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g.release();
  return result(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Runtime& r = Runtime::get();
  if (!status) return result(cudaErrorInvalidValue);
  if (!r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  const Stream* s = r.resolve(stream);
  *status = !s->capture ? cudaStreamCaptureStatusNone
                        : (s->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive);
  return result(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return result(cudaErrorInvalidValue);
  *exec = new GraphExec{std::make_shared<const std::vector<GraphNode>>(graph->nodes)};
  return result(cudaSuccess);
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  if (!exec || !graph) return result(cudaErrorInvalidValue);
  cudaGraphExecUpdateResult why = cudaGraphExecUpdateSuccess;
  if (graph->nodes.size() != exec->nodes->size()) {
    why = cudaGraphExecUpdateErrorTopologyChanged;
  } else {
    for (size_t i = 0; i < graph->nodes.size() && why == cudaGraphExecUpdateSuccess; ++i)
      if (graph->nodes[i].kind != (*exec->nodes)[i].kind) why = cudaGraphExecUpdateErrorFunctionChanged;
  }
  if (info) *info = cudaGraphExecUpdateResultInfo{why, nullptr, nullptr};
  if (why != cudaGraphExecUpdateSuccess) return result(cudaErrorGraphExecUpdateFailure);
  // A launch already queued keeps the nodes it was given (shared_ptr), as on the GPU.
  exec->nodes = std::make_shared<const std::vector<GraphNode>>(graph->nodes);
  return result(cudaSuccess);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Runtime& r = Runtime::get();
  if (!exec || !r.known(stream)) return result(cudaErrorInvalidResourceHandle);
  if (r.sticky() != cudaSuccess) return r.sticky();
  Stream* s = r.resolve(stream);
  if (s->capture) return refuse_in_capture(s, "cudaGraphLaunch");
  std::shared_ptr<const std::vector<GraphNode>> nodes = exec->nodes;
  r.enqueue(s, [nodes] {
    for (const GraphNode& n : *nodes) {
      if (Runtime::get().sticky() != cudaSuccess) return;  // a faulted context runs nothing more
      n.task();
    }
  });
  return result(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return result(cudaSuccess);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return result(cudaSuccess);
}

}  // namespace hg_cuda_emu
