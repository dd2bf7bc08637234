// The emulated CUDA device's stand-in for <cuda_fp16.h>: see kernels/cuda/emu/cuda_emu.h.
#pragma once
#include "kernels/cuda/emu/cuda_emu.h"
