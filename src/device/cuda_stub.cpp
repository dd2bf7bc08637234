// Without a CUDA backend in the build, the CUDA entry points say so clearly.
#ifndef HG_HAVE_CUDA
#include "device/device.h"
#include "hybridgen/error.h"

namespace hg {

std::unique_ptr<Device> make_cuda_device(int) {
  throw Error("--device cuda: this build of hybridgen has no CUDA backend (rebuild with nvcc present, HG_CUDA=ON)");
}

int cuda_device_count() { return 0; }

}  // namespace hg
#endif
