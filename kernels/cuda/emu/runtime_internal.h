// Between the emulated runtime (runtime.cpp), its SIMT machinery (simt.cpp) and its cuBLAS
// (cublas.cpp): queueing work on a stream, the errors a launch or a task leaves, and where a
// device pointer's allocation ends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda/emu/cuda_emu.h"

namespace hg_cuda_emu::runtime {

// Runs `task` on the stream's worker after everything queued before it (nullptr: the legacy
// default stream). Tasks after a sticky error are dropped, as a faulted context runs nothing.
// On a capturing stream the task becomes a node of the graph instead; `node` names its kind (a
// kernel's name, "cublasGemmEx", "memcpy", "memset"), which cudaGraphExecUpdate compares.
void enqueue(cudaStream_t stream, std::function<void()> task, const char* node = "task");

// A launch that never started (bad configuration): cudaGetLastError's next answer.
void set_launch_error(cudaError_t e, const std::string& why);
// A fault while work ran (an illegal address, a failed task): every later call returns it.
void set_sticky_error(cudaError_t e, const std::string& why);

// Whether [p, p + bytes) lies inside one device allocation.
bool device_range(const void* p, size_t bytes);

uint64_t gemm_count();
void count_gemm();

}  // namespace hg_cuda_emu::runtime
