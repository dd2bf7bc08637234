// The emulated CUDA device (`--device cuda-emu`): a test instrument, like Triton's interpreter or
// Numba's CUDA simulator, that runs the real kernels/cuda/*.cu sources and the CUDA device's own
// code (src/device/cuda_device*.cpp) on the CPU, so the CUDA path executes in every test run on
// machines without a GPU. Its timings mean nothing about a GPU.
//
// This is the one header the emulation needs. The shims in kernels/cuda/emu/include/
// (cuda_runtime.h, cublas_v2.h, cuda_fp16.h, cuda_bf16.h) include it, so the same sources compile
// as plain host C++ with no nvcc. It provides:
//   - the part of the CUDA runtime the engine calls (declared here, kernels/cuda/emu/runtime.cpp):
//     device and pinned allocations (bounds-checked copies, NaN-filled fresh memory), memcpy /
//     memcpyAsync / memset, streams that each run on their own worker thread (two streams run at
//     once; only events and waits order them), events, stream waits, synchronizations, the last
//     and the sticky error, and sm_90's limits in cudaDeviceProp;
//   - cuBLAS's GemmEx with its argument semantics (transposes, leading dimensions, data and
//     compute types), served by the project's CPU GEMM (kernels/cuda/emu/cublas.cpp);
//   - the SIMT machinery (kernels/cuda/emu/simt.cpp): each CUDA thread of a block is a fiber
//     (Boost.Context); __syncthreads is a barrier over the whole block, __syncwarp and the
//     __shfl_*_sync / vote family are barriers with a value exchange over the named lanes of a
//     32-lane warp; shared memory is per block, filled with NaN and guarded by canaries; launch
//     configurations are checked against sm_90's limits; a barrier that can never complete (a
//     thread exited or waits elsewhere) aborts with the kernel's name. The fibers' order is a
//     knob (HG_CUDA_EMU_ORDER=forward|reverse|random), so a missing barrier shows as a changed
//     result.
//
// Everything lives in namespace hg_cuda_emu, pulled into the global namespace below as the real
// headers' names are: the emulated and the real backend link into one binary without clashing.
#pragma once
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cpu/half.h"

#ifndef HG_CUDA_EMU
#error "kernels/cuda/emu/cuda_emu.h is for the emulated CUDA device's translation units (HG_CUDA_EMU)"
#endif

namespace hg_cuda_emu {

// ---------------------------------------------------------------------------------------------
// Vector and index types
// ---------------------------------------------------------------------------------------------

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct float2 {
  float x, y;
};
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// ---------------------------------------------------------------------------------------------
// f16 and bf16 (storage types; arithmetic goes through float, as the kernels do)
// ---------------------------------------------------------------------------------------------

struct __half {
  uint16_t bits = 0;
};
struct __attribute__((aligned(4))) __half2 {
  __half x, y;
};
struct __nv_bfloat16 {
  uint16_t bits = 0;
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline float __half2float(__half h) { return hg::cpu::f16_to_fp32(h.bits); }
inline __half __ushort_as_half(unsigned short bits) { return {bits}; }
inline __half __float2half_rn(float f) { return {hg::cpu::fp32_to_f16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return hg::cpu::bf16_to_fp32(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {hg::cpu::fp32_to_bf16(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }

// ---------------------------------------------------------------------------------------------
// Device math the kernels use (CUDA's overloads of min / max, the single-precision intrinsics)
// ---------------------------------------------------------------------------------------------

#define HG_EMU_MINMAX(T)                           \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
HG_EMU_MINMAX(int)
HG_EMU_MINMAX(unsigned)
HG_EMU_MINMAX(long)
HG_EMU_MINMAX(unsigned long)
HG_EMU_MINMAX(long long)
HG_EMU_MINMAX(unsigned long long)
#undef HG_EMU_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// Rounded products and sums that the compiler may not fuse into an FMA (host C++ built without
// -ffp-contract=fast contracts nothing here either).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
// A load through the read-only data cache.
template <class T>
T __ldg(const T* p) {
  return *p;
}

// ---------------------------------------------------------------------------------------------
// Runtime API: errors, devices, memory, streams, events
// ---------------------------------------------------------------------------------------------

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoDevice = 100,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorIllegalState = 401,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorGraphExecUpdateFailure = 910,
};

// Stream capture and CUDA graphs. The emulation captures what one stream is given (kernels, cuBLAS
// calls, copies and memsets, each a node in issue order) and refuses, invalidating the capture,
// what the real runtime refuses in a capture (a synchronization, a copy from or to pageable
// memory, a wait for an event recorded outside it) and also an event record inside it, which the
// real runtime would turn into a dependency between captured streams: the engine captures one
// stream only. An executable graph replays its nodes in order as one task of the launching stream;
// cudaGraphExecUpdate takes a graph of the same nodes (kinds and kernels) with new parameters.
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaGraphExecUpdateResult {
  cudaGraphExecUpdateSuccess = 0,
  cudaGraphExecUpdateError = 1,
  cudaGraphExecUpdateErrorTopologyChanged = 2,
  cudaGraphExecUpdateErrorNodeTypeChanged = 3,
  cudaGraphExecUpdateErrorFunctionChanged = 4,
};
struct cudaGraphExecUpdateResultInfo {
  cudaGraphExecUpdateResult result = cudaGraphExecUpdateSuccess;
  void* errorNode = nullptr;
  void* errorFromNode = nullptr;
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct cudaPointerAttributes {
  cudaMemoryType type = cudaMemoryTypeUnregistered;
  int device = 0;
  void* devicePointer = nullptr;
  void* hostPointer = nullptr;
};

// The fields the engine reads, with an H100 SXM's values (the emulation checks sm_90's limits).
struct cudaDeviceProp {
  char name[256] = {};
  size_t totalGlobalMem = 0;
  size_t sharedMemPerBlock = 0;       // static + dynamic without opt-in: 48 KiB
  size_t sharedMemPerBlockOptin = 0;  // with cudaFuncAttributeMaxDynamicSharedMemorySize: 227 KiB
  int regsPerBlock = 0;
  int warpSize = 0;
  int maxThreadsPerBlock = 0;
  int maxThreadsDim[3] = {};
  int maxGridSize[3] = {};
  int major = 0;
  int minor = 0;
  int multiProcessorCount = 0;
  size_t l2CacheSize = 0;
};

struct Stream;
struct Event;
struct Graph;
struct GraphExec;
using cudaStream_t = Stream*;
using cudaEvent_t = Event*;
using cudaGraph_t = Graph*;
using cudaGraphExec_t = GraphExec*;

constexpr unsigned cudaStreamDefault = 0;
constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDefault = 0;
constexpr unsigned cudaEventBlockingSync = 1;
constexpr unsigned cudaEventDisableTiming = 2;
constexpr unsigned cudaHostRegisterDefault = 0;
constexpr unsigned cudaHostAllocDefault = 0;

const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned flags);
cudaError_t cudaHostUnregister(void* ptr);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr);

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
// fn(data) on a host thread (the stream's worker) once the work issued before it has run; the
// stream's later work waits for it to return. In a capture it becomes a host node.
using cudaHostFn_t = void (*)(void* data);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// Kernels are registered by address: the attribute raises the kernel's dynamic shared memory
// limit from 48 KiB to at most sharedMemPerBlockOptin, as on the GPU.
namespace simt {
cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value);
}
template <class... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  return simt::func_set_attribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// ---------------------------------------------------------------------------------------------
// cuBLAS (the calls the CUDA device makes)
// ---------------------------------------------------------------------------------------------

struct BlasHandle;
using cublasHandle_t = BlasHandle*;
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_TF32_TENSOR_OP_MATH = 3 };

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* cublasGetStatusName(cublasStatus_t s);
const char* cublasGetStatusString(cublasStatus_t s);
// C(m×n) = alpha · op(A)(m×k) · op(B)(k×n) + beta · C, column-major, alpha and beta on the host.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);

// ---------------------------------------------------------------------------------------------
// SIMT machinery (simt.cpp), in a namespace of its own: not part of the CUDA names below
// ---------------------------------------------------------------------------------------------

constexpr int warpSize = 32;

namespace simt {

// What one CUDA thread (a fiber) and its block see; threadIdx & co. read them.
struct ThreadState {
  uint3 thread_idx;
  int linear = 0;        // index in the block
  int shared_decls = 0;  // the next static shared array this thread declares
};
struct BlockState {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
ThreadState& this_thread();
const BlockState& this_block();

void syncthreads();
void syncwarp(unsigned mask);
// Deposits this lane's 8 bytes, waits for every lane of `mask`, returns the warp's 32 deposits
// (valid until this lane's next warp operation).
const uint64_t* warp_exchange(unsigned mask, uint64_t mine, const char* what);
int lane_id();

// Static shared memory: every thread of the block gets the same `count` elements for the i-th
// array it declares (checked by name), laid out in a per-block arena filled with NaN bytes.
void* shared_array(size_t bytes, size_t align, const char* name);
void* dynamic_shared();
[[noreturn]] void trap(const char* why);

template <class T>
T* shared_alloc(size_t count, const char* name) {
  return static_cast<T*>(shared_array(sizeof(T) * count, alignof(T) < 16 ? 16 : alignof(T), name));
}

template <class T>
T shfl_generic(unsigned mask, T v, int src_of_lane(int lane, int arg, int width), int arg, int width,
               const char* what) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move at most 8 bytes");
  if (width <= 0 || width > warpSize || (width & (width - 1)) != 0) trap("shuffle width is not a power of two <= 32");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const uint64_t* all = warp_exchange(mask, bits, what);
  const int src = src_of_lane(lane_id(), arg, width);
  T out;
  std::memcpy(&out, &all[src], sizeof(T));
  return out;
}

inline int shfl_src_idx(int lane, int src, int width) { return (lane & ~(width - 1)) + (src & (width - 1)); }
inline int shfl_src_xor(int lane, int m, int width) {
  const int s = lane ^ m;
  return (s & ~(width - 1)) == (lane & ~(width - 1)) ? s : lane;
}
inline int shfl_src_down(int lane, int d, int width) {
  const int s = lane + d;
  return (s & ~(width - 1)) == (lane & ~(width - 1)) ? s : lane;
}
inline int shfl_src_up(int lane, int d, int width) {
  const int s = lane - d;
  return s >= (lane & ~(width - 1)) ? s : lane;
}

// A kernel launch: the kernel's parameters copied at the call (as the GPU copies them into its
// parameter space), then the grid run on the stream's worker.
struct LaunchConfig {
  const char* kernel_name;
  const void* kernel;
  dim3 grid;
  dim3 block;
  size_t dynamic_smem;
  cudaStream_t stream;
};
class KernelBody {
 public:
  virtual ~KernelBody() = default;
  virtual void run_thread() = 0;  // called once in each thread's fiber
};
void launch(const LaunchConfig& cfg, KernelBody* body);  // takes ownership

template <class... P>
class Launch {
 public:
  Launch(void (*kernel)(P...), const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream)
      : kernel_(kernel), cfg_{name, reinterpret_cast<const void*>(kernel), grid, block, smem, stream} {}

  template <class... A>
  void operator()(A&&... args) {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
    launch(cfg_, new Body(kernel_, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)));
  }

 private:
  struct Body final : KernelBody {
    Body(void (*k)(P...), std::tuple<std::decay_t<P>...> p) : kernel(k), params(std::move(p)) {}
    void run_thread() override { std::apply(kernel, params); }  // each thread its own copy
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> params;
  };
  void (*kernel_)(P...);
  LaunchConfig cfg_;
};
template <class... P>
Launch(void (*)(P...), const char*, dim3, dim3, size_t, cudaStream_t) -> Launch<P...>;

// What the emulated device did since the process started (for the emulation's own tests).
struct Stats {
  uint64_t kernel_launches = 0;
  uint64_t blocks = 0;
  uint64_t threads = 0;
  uint64_t gemms = 0;
};
Stats stats();

}  // namespace simt
}  // namespace hg_cuda_emu

// ---- the CUDA names, as the real headers give them ----
using namespace hg_cuda_emu;  // NOLINT: the real runtime's names are global too

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__ static

#define threadIdx (::hg_cuda_emu::simt::this_thread().thread_idx)
#define blockIdx (::hg_cuda_emu::simt::this_block().block_idx)
#define blockDim (::hg_cuda_emu::simt::this_block().block_dim)
#define gridDim (::hg_cuda_emu::simt::this_block().grid_dim)

inline void __syncthreads() { ::hg_cuda_emu::simt::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::hg_cuda_emu::simt::syncwarp(mask); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
[[noreturn]] inline void __trap() { ::hg_cuda_emu::simt::trap("__trap()"); }

template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  return ::hg_cuda_emu::simt::shfl_generic(mask, v, ::hg_cuda_emu::simt::shfl_src_idx, src_lane, width, "__shfl_sync");
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  return ::hg_cuda_emu::simt::shfl_generic(mask, v, ::hg_cuda_emu::simt::shfl_src_xor, lane_mask, width,
                                           "__shfl_xor_sync");
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::hg_cuda_emu::simt::shfl_generic(mask, v, ::hg_cuda_emu::simt::shfl_src_down, static_cast<int>(delta), width,
                                           "__shfl_down_sync");
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::hg_cuda_emu::simt::shfl_generic(mask, v, ::hg_cuda_emu::simt::shfl_src_up, static_cast<int>(delta), width,
                                           "__shfl_up_sync");
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const uint64_t* all = ::hg_cuda_emu::simt::warp_exchange(mask, predicate != 0, "__ballot_sync");
  unsigned out = 0;
  for (int l = 0; l < 32; ++l)
    if (((mask >> l) & 1u) && all[l]) out |= 1u << l;
  return out;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }

template <class T>
T atomicAdd(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_add(v);
}

// Shared memory declarations (common.cuh spells them for nvcc).
#define HG_SHARED(type, name, count) type* const name = ::hg_cuda_emu::simt::shared_alloc<type>((count), #name)
#define HG_DYNAMIC_SHARED(type, name) type* const name = static_cast<type*>(::hg_cuda_emu::simt::dynamic_shared())
// kernel<<<grid, block, smem, stream>>>(args...)
#define HG_LAUNCH(grid, block, smem, stream, ...) \
  ::hg_cuda_emu::simt::Launch(__VA_ARGS__, #__VA_ARGS__, dim3(grid), dim3(block), (smem), (stream))
