// The emulated CUDA device's stand-in for <cublas_v2.h>: see kernels/cuda/emu/cuda_emu.h.
#pragma once
#include "kernels/cuda/emu/cuda_emu.h"
