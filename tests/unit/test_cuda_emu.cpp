// The emulated CUDA device itself (kernels/cuda/emu/): its SIMT semantics (warp shuffles and
// votes against their definitions, block barriers, a missing barrier that the fiber order
// exposes, a barrier that can never complete, shared-memory canaries, sm_90's launch limits),
// its runtime (two streams that really run at once, events and waits that order them, bounds-
// checked copies, the sticky error) and its cuBLAS (GemmEx against a float64 reference for every
// transpose, data type, alpha, beta and leading dimension). Compiled against the emulation's
// headers, as kernels/cuda/*.cu are for the emulated device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cuda/backend.h"

namespace {

// ---- kernels (CUDA source, run by the emulation) ----

__global__ void shuffle_kernel(int* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int* o = out + (warp * 32 + lane) * 6;
  o[0] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
  o[1] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
  o[2] = __shfl_up_sync(0xffffffffu, lane * 10, 2);
  o[3] = __shfl_sync(0xffffffffu, lane * 10, 7);
  o[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[5] = __shfl_xor_sync(0xffffffffu, lane, 1, 4);  // width 4: stays within a quad
}

// Each thread writes its slot, then reads its right neighbour's.
template <bool kBarrier>
__global__ void neighbour_kernel(float* out) {
  HG_SHARED(float, s, 256);
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  if (kBarrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

__global__ void early_exit_kernel(float* out) {
  if (threadIdx.x == 5) return;  // exits before the barrier the others wait at
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void overflow_kernel(float* out) {
  HG_SHARED(float, s, 32);
  s[threadIdx.x] = 1.0f;  // 64 threads, 32 slots
  __syncthreads();
  out[threadIdx.x] = s[0];
}

__global__ void dynamic_kernel(float* out, int n) {
  HG_DYNAMIC_SHARED(float, s);
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = static_cast<float>(i);
  __syncthreads();
  if (threadIdx.x == 0) out[0] = s[n - 1];
}

// Spins until *flag is set by another stream's kernel (or 20 s pass), then records whether it was.
__global__ void wait_for_flag_kernel(int* flag, int* saw) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::atomic_ref<int>(*flag).load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  *saw = std::atomic_ref<int>(*flag).load();
}

__global__ void set_flag_kernel(int* flag) { std::atomic_ref<int>(*flag).store(1); }

__global__ void slow_add_kernel(float* x, float v) {
  if (threadIdx.x == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  x[threadIdx.x] += v;
}

template <class T>
std::vector<T> download(const void* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(CudaEmu, WarpShufflesAndVotesFollowTheirDefinitions) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(int) * 64 * 6), cudaSuccess);
  HG_LAUNCH(1, 64, 0, nullptr, shuffle_kernel)(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto h = download<int>(d, 64 * 6);
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    const int* o = &h[static_cast<size_t>(t) * 6];
    EXPECT_EQ(o[0], (lane ^ 5) * 10) << t;
    EXPECT_EQ(o[1], (lane + 3 < 32 ? lane + 3 : lane) * 10) << t;
    EXPECT_EQ(o[2], (lane >= 2 ? lane - 2 : lane) * 10) << t;
    EXPECT_EQ(o[3], 70) << t;
    EXPECT_EQ(static_cast<unsigned>(o[4]), ballot) << t;
    EXPECT_EQ(o[5], lane ^ 1) << t;
  }
  cudaFree(d);
}

TEST(CudaEmu, BarrierOrdersSharedMemoryInEveryFiberOrder) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * 2 * 256), cudaSuccess);
  HG_LAUNCH(2, 256, 0, nullptr, neighbour_kernel<true>)(d);
  const auto h = download<float>(d, 2 * 256);
  for (int i = 0; i < 512; ++i) ASSERT_EQ(h[static_cast<size_t>(i)], static_cast<float>((i % 256 + 1) % 256)) << i;
  cudaFree(d);
}

// Without the barrier, a thread reads its neighbour's slot before or after the neighbour wrote it
// depending on the fibers' order: the forward order reads the NaN of fresh shared memory.
TEST(CudaEmu, MissingBarrierShowsInTheForwardOrder) {
  const char* order = std::getenv("HG_CUDA_EMU_ORDER");
  if (order && std::string(order) != "forward") GTEST_SKIP() << "checks the default (forward) order";
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * 256), cudaSuccess);
  HG_LAUNCH(1, 256, 0, nullptr, neighbour_kernel<false>)(d);
  const auto h = download<float>(d, 256);
  EXPECT_TRUE(std::isnan(h[0])) << "thread 0 ran before thread 1 wrote: the shared slot is still NaN";
  EXPECT_EQ(h[255], 0.0f) << "thread 255 reads thread 0's slot, written earlier";
  cudaFree(d);
}

TEST(CudaEmu, DynamicSharedMemoryNeedsTheAttributeAbove48KiB) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float)), cudaSuccess);
  const int n = 100 * 1024 / 4;  // 100 KiB
  HG_LAUNCH(1, 128, sizeof(float) * n, nullptr, dynamic_kernel)(d, n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a launch error is not sticky";
  ASSERT_EQ(cudaFuncSetAttribute(dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sizeof(float) * n),
            cudaSuccess);
  HG_LAUNCH(1, 128, sizeof(float) * n, nullptr, dynamic_kernel)(d, n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(download<float>(d, 1)[0], static_cast<float>(n - 1));
  EXPECT_EQ(cudaFuncSetAttribute(dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
            cudaErrorInvalidValue)
      << "sm_90 allows at most 227 KiB";
  cudaFree(d);
}

TEST(CudaEmu, LaunchConfigurationsOutsideSm90LimitsFail) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * 256), cudaSuccess);
  HG_LAUNCH(1, 2048, 0, nullptr, neighbour_kernel<true>)(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  HG_LAUNCH(dim3(1, 65536), 32, 0, nullptr, neighbour_kernel<true>)(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  HG_LAUNCH(0, 32, 0, nullptr, neighbour_kernel<true>)(d);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cudaDeviceProp p;
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(p.major * 10 + p.minor, 90);
  EXPECT_EQ(p.multiProcessorCount, 132);
  EXPECT_EQ(p.sharedMemPerBlockOptin, size_t{227} * 1024);
  cudaFree(d);
}

TEST(CudaEmuDeathTest, BarrierThatCanNeverCompleteAbortsWithTheKernelsName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* d = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * 64);
        HG_LAUNCH(1, 64, 0, nullptr, early_exit_kernel)(d);
        cudaDeviceSynchronize();
      },
      "kernel early_exit_kernel, block \\(0,0,0\\).*a barrier can never complete: 63 threads wait at __syncthreads, 1 "
      "exited");
}

TEST(CudaEmuDeathTest, WritingPastASharedArrayTripsItsCanary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* d = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * 64);
        HG_LAUNCH(1, 64, 0, nullptr, overflow_kernel)(d);
        cudaDeviceSynchronize();
      },
      "kernel overflow_kernel.*wrote outside shared array 's'");
}

// A kernel on one stream waits for a flag that a kernel on another stream, launched after it,
// sets: it completes only because the two streams run at once.
TEST(CudaEmu, TwoStreamsRunAtOnce) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(int) * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(int) * 2), cudaSuccess);
  HG_LAUNCH(1, 1, 0, a, wait_for_flag_kernel)(d, d + 1);
  HG_LAUNCH(1, 1, 0, b, set_flag_kernel)(d);
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(download<int>(d + 1, 1)[0], 1);
  cudaFree(d);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

// Stream b's add runs after stream a's only through the event: without the wait it would read x
// before a's slow add landed.
TEST(CudaEmu, EventsAndStreamWaitsOrderStreams) {
  cudaStream_t a, b;
  cudaEvent_t e;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  float* x = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float) * 32), cudaSuccess);
  ASSERT_EQ(cudaMemset(x, 0, sizeof(float) * 32), cudaSuccess);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float) * 32), cudaSuccess);
  HG_LAUNCH(1, 32, 0, a, slow_add_kernel)(x, 1.0f);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady) << "the slow kernel is still running";
  ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
  HG_LAUNCH(1, 32, 0, b, slow_add_kernel)(x, 2.0f);
  ASSERT_EQ(cudaMemcpyAsync(pinned, x, sizeof(float) * 32, cudaMemcpyDeviceToHost, b), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(pinned[i], 3.0f) << i;
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  float ms = -1;
  cudaEvent_t e2;
  ASSERT_EQ(cudaEventCreate(&e2), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e2, a), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e2), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, e, e2), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaFreeHost(pinned);
  cudaFree(x);
  cudaEventDestroy(e);
  cudaEventDestroy(e2);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST(CudaEmu, CopiesAreBoundsCheckedAndFreshMemoryIsNaN) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * 100), cudaSuccess);
  EXPECT_TRUE(std::isnan(download<float>(d, 1)[0])) << "cudaMalloc's memory reads as NaN until written";
  std::vector<float> h(200, 1.0f);
  EXPECT_EQ(cudaMemcpy(d, h.data(), sizeof(float) * 200, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d + 50, h.data(), sizeof(float) * 50, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(h.data(), d, sizeof(float) * 50, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "the direction says the source is host memory";
  EXPECT_EQ(cudaMemset(d + 99, 0, 8), cudaErrorInvalidValue);
  cudaGetLastError();
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, d + 10), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h.data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
  ASSERT_EQ(cudaHostRegister(h.data(), sizeof(float) * h.size(), 0), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h.data() + 3), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  EXPECT_EQ(cudaHostUnregister(h.data()), cudaSuccess);
  EXPECT_EQ(cudaFree(h.data()), cudaErrorInvalidValue) << "not a device allocation";
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  void* huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, total_b), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  cudaFree(d);
}

// An out-of-bounds GEMM, then whether every later call reports its fault; exits 0 if so.
[[noreturn]] void fault_then_check_sticky() {
  cublasHandle_t h;
  cublasCreate(&h);
  float* a = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&a), sizeof(float) * 16);
  const float one = 1.0f, zero = 0.0f;
  // 8 × 8 operands in a 16-float allocation: an illegal address.
  const cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, a, CUDA_R_32F, 8, a, CUDA_R_32F, 8,
                                        &zero, a, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  void* p = nullptr;
  const bool sticky = s == CUBLAS_STATUS_EXECUTION_FAILED && cudaMalloc(&p, 16) == cudaErrorIllegalAddress &&
                      cudaDeviceSynchronize() == cudaErrorIllegalAddress &&
                      cudaGetLastError() == cudaErrorIllegalAddress && cudaGetLastError() == cudaErrorIllegalAddress;
  std::exit(sticky ? 0 : 1);
}

TEST(CudaEmuDeathTest, AFaultIsStickyForEveryLaterCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(fault_then_check_sticky(), ::testing::ExitedWithCode(0),
              "an operand reaches outside its device allocation");
}

// cublasGemmEx against a float64 reference: column-major op(A)(m×k) · op(B)(k×n), every
// transpose, leading dimensions past the rows, alpha and beta, f32 / f16 / bf16 operands.
TEST(CudaEmu, GemmExFollowsCublasSemantics) {
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int m = 13, n = 7, k = 9;
  for (cudaDataType_t type : {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF})
    for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T})
        for (float alpha : {1.0f, -0.5f})
          for (float beta : {0.0f, 2.0f}) {
            const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
            const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
            const int lda = a_rows + 3, ldb = b_rows + 1, ldc = m + 2;
            std::vector<float> af(static_cast<size_t>(lda * a_cols)), bf(static_cast<size_t>(ldb * b_cols)),
                c(static_cast<size_t>(ldc * n));
            for (auto& v : af) v = u(rng);
            for (auto& v : bf) v = u(rng);
            for (auto& v : c) v = u(rng);
            // Operands as stored (16-bit types rounded), and their exact values for the reference.
            const size_t esize = type == CUDA_R_32F ? 4 : 2;
            auto store = [&](std::vector<float>& f) {
              std::vector<uint8_t> bytes(f.size() * esize);
              for (size_t i = 0; i < f.size(); ++i) {
                if (type == CUDA_R_32F) {
                  std::memcpy(&bytes[i * 4], &f[i], 4);
                  continue;
                }
                const uint16_t b16 = type == CUDA_R_16F ? hg::cpu::fp32_to_f16(f[i]) : hg::cpu::fp32_to_bf16(f[i]);
                f[i] = type == CUDA_R_16F ? hg::cpu::f16_to_fp32(b16) : hg::cpu::bf16_to_fp32(b16);
                std::memcpy(&bytes[i * 2], &b16, 2);
              }
              return bytes;
            };
            const auto ab = store(af), bb = store(bf);
            void *da, *db, *dc;
            ASSERT_EQ(cudaMalloc(&da, ab.size()), cudaSuccess);
            ASSERT_EQ(cudaMalloc(&db, bb.size()), cudaSuccess);
            ASSERT_EQ(cudaMalloc(&dc, sizeof(float) * c.size()), cudaSuccess);
            cudaMemcpy(da, ab.data(), ab.size(), cudaMemcpyHostToDevice);
            cudaMemcpy(db, bb.data(), bb.size(), cudaMemcpyHostToDevice);
            cudaMemcpy(dc, c.data(), sizeof(float) * c.size(), cudaMemcpyHostToDevice);
            ASSERT_EQ(cublasGemmEx(h, ta, tb, m, n, k, &alpha, da, type, lda, db, type, ldb, &beta, dc, CUDA_R_32F, ldc,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      CUBLAS_STATUS_SUCCESS);
            const auto got = download<float>(dc, c.size());
            for (int j = 0; j < n; ++j)
              for (int i = 0; i < m; ++i) {
                double want = 0;
                for (int kk = 0; kk < k; ++kk) {
                  const double av =
                      ta == CUBLAS_OP_N ? af[static_cast<size_t>(i + kk * lda)] : af[static_cast<size_t>(kk + i * lda)];
                  const double bv =
                      tb == CUBLAS_OP_N ? bf[static_cast<size_t>(kk + j * ldb)] : bf[static_cast<size_t>(j + kk * ldb)];
                  want += av * bv;
                }
                want = alpha * want + beta * c[static_cast<size_t>(i + j * ldc)];
                ASSERT_NEAR(got[static_cast<size_t>(i + j * ldc)], want, 1e-5)
                    << "type " << type << " ta " << ta << " tb " << tb << " alpha " << alpha << " beta " << beta;
              }
            for (int j = 0; j < n; ++j)  // rows past m in each column are not touched
              for (int i = m; i < ldc; ++i)
                ASSERT_EQ(got[static_cast<size_t>(i + j * ldc)], c[static_cast<size_t>(i + j * ldc)]);
            cudaFree(da);
            cudaFree(db);
            cudaFree(dc);
          }
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, nullptr, nullptr, CUDA_R_32F, 2, nullptr, CUDA_R_32F, 4,
                         nullptr, nullptr, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasDestroy(h);
}

// A non-blocking stream, 32 floats of device memory and 32 of pinned host memory.
struct StreamAndBuffers {
  cudaStream_t s = nullptr;
  float* x = nullptr;
  float* pinned = nullptr;
  StreamAndBuffers() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float) * 32), cudaSuccess);
    EXPECT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float) * 32), cudaSuccess);
  }
  ~StreamAndBuffers() {
    cudaFreeHost(pinned);
    cudaFree(x);
    cudaStreamDestroy(s);
  }
};

// Stream capture: the captured kernels and copies run only when the graph is launched, in issue
// order; an update with new arguments changes what the next launch does; a capture refuses a
// synchronization and a copy from pageable memory (the capture is then invalidated), and an
// update with other nodes fails, as on the GPU.
TEST(CudaEmu, StreamCaptureAndGraphs) {
  StreamAndBuffers sb;
  cudaStream_t s = sb.s;
  float* x = sb.x;
  float* pinned = sb.pinned;
  for (int i = 0; i < 32; ++i) pinned[i] = 1.0f;
  const auto capture = [&](float v) {
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    cudaStreamCaptureStatus status;
    EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusActive);
    EXPECT_EQ(cudaMemcpyAsync(x, pinned, sizeof(float) * 32, cudaMemcpyHostToDevice, s), cudaSuccess);
    HG_LAUNCH(1, 32, 0, s, slow_add_kernel)(x, v);
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    return g;
  };
  cudaGraph_t g = capture(2.0f);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(std::isnan(download<float>(x, 32)[0])) << "nothing ran during the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(download<float>(x, 32), std::vector<float>(32, 3.0f));
  // The same nodes with a new argument: an update, then the launch adds 5.
  g = capture(5.0f);
  cudaGraphExecUpdateResultInfo info{};
  ASSERT_EQ(cudaGraphExecUpdate(exec, g, &info), cudaSuccess);
  cudaGraphDestroy(g);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(download<float>(x, 32), std::vector<float>(32, 6.0f));
  // Other nodes: the update fails and says why.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  HG_LAUNCH(1, 32, 0, s, slow_add_kernel)(x, 1.0f);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphExecUpdate(exec, g, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  cudaGetLastError();
  cudaGraphDestroy(g);
  // Refused inside a capture: a synchronization, a copy from pageable memory.
  std::vector<float> pageable(32, 0.0f);
  for (int refused = 0; refused < 2; ++refused) {
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    if (refused == 0)
      EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    else
      EXPECT_EQ(cudaMemcpyAsync(x, pageable.data(), sizeof(float) * 32, cudaMemcpyHostToDevice, s),
                cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status;
    EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(g, nullptr);
    cudaGetLastError();
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// Host functions run in the stream's order: after the work before them, and the work after them
// waits until they return, though the host thread never waits. Captured, a host function is a
// node of the graph and runs at each launch. Inside one, a CUDA call aborts (the real runtime
// refuses it).
struct HostFnProbe {
  const float* seen_from = nullptr;  // pinned: what the kernel before it wrote, copied back
  float seen = 0;
  std::atomic<bool> release{false};
  std::atomic<int> calls{0};
};

void probe_host_fn(void* arg) {
  auto& p = *static_cast<HostFnProbe*>(arg);
  p.seen = p.seen_from[0];
  while (!p.release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ++p.calls;
}

void cuda_call_host_fn(void*) {
  void* p = nullptr;
  cudaMalloc(&p, 16);
}

TEST(CudaEmu, HostFunctionsRunInStreamOrder) {
  StreamAndBuffers sb;
  cudaStream_t s = sb.s;
  float* x = sb.x;
  float* pinned = sb.pinned;
  ASSERT_EQ(cudaMemsetAsync(x, 0, sizeof(float) * 32, s), cudaSuccess);
  HostFnProbe probe;
  probe.seen_from = pinned;
  HG_LAUNCH(1, 32, 0, s, slow_add_kernel)(x, 2.0f);
  ASSERT_EQ(cudaMemcpyAsync(pinned, x, sizeof(float) * 32, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, probe_host_fn, &probe), cudaSuccess);
  HG_LAUNCH(1, 32, 0, s, slow_add_kernel)(x, 3.0f);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady) << "the work after the host function waits for it";
  probe.release = true;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(probe.seen, 2.0f) << "it ran after the kernel and the copy before it";
  EXPECT_EQ(download<float>(x, 32), std::vector<float>(32, 5.0f));
  // Captured: a node of the graph, run at each launch.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, probe_host_fn, &probe), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  EXPECT_EQ(probe.calls.load(), 1) << "capturing runs nothing";
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(probe.calls.load(), 3);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
}

TEST(CudaEmuDeathTest, ACudaCallInsideAHostFunctionAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaLaunchHostFunc(s, cuda_call_host_fn, nullptr);
        cudaStreamSynchronize(s);
      },
      "a CUDA call inside a host function");
}

}  // namespace
