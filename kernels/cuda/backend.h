// Which runtime the CUDA sources are compiled against: nvcc and the CUDA toolkit (the GPU), or
// the emulated device's headers (HG_CUDA_EMU, kernels/cuda/emu/cuda_emu.h). Both builds of the
// same sources link into one binary, so each puts its symbols in its own inline namespace
// (hg::cuda::gpu, hg::cuda::emu; hg::gpu::CudaDevice, hg::emu::CudaDevice), and the few
// constructs host C++ cannot spell go through macros that both define.
#pragma once

#ifdef HG_CUDA_EMU
#define HG_CUDA_BACKEND emu
#include "kernels/cuda/emu/cuda_emu.h"
#else
#define HG_CUDA_BACKEND gpu
// Shared memory: every array 16-byte aligned (the emulated device also guards each with canaries).
#define HG_SHARED(type, name, count) __shared__ __align__(16) type name[count]
#define HG_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
// kernel<<<grid, block, smem, stream>>>: HG_LAUNCH(grid, block, smem, stream, kernel)(args...)
#define HG_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif
