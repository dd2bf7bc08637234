// libFuzzer target for the GGUF reader and the GGUF model path: any byte string must either
// parse into views that lie inside the input or raise hg::Error; never crash, hang or overread.
// Build: cmake -DHG_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ...; run: build/fuzz_gguf -max_len=4096
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <vector>

#include "hybridgen/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"
#include "model/gguf.h"
#include "model/loaders.h"
#include "util/thread_pool.h"

namespace {

void touch(const hg::TensorView& t, const uint8_t* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  if (t.nbytes == 0) return;
  // The reader promised the range lies inside the input: check it, and let ASan check the bytes.
  if (p < data || p + t.nbytes > data + size || t.nbytes > size) __builtin_trap();
  volatile uint8_t sink = p[0] ^ p[t.nbytes - 1];
  (void)sink;
}

// Decodes the first row of a tensor with every kernel that reads its blocks as stored (scalar and
// SIMD dequantizers, the decode GEMV) and, where the type packs (matmul_packed.h: the block
// formats and the K-quants), repacks it and runs the packed GEMV: any bytes, NaN / Inf scales
// included, must be read inside the tensor and never trap.
void decode(const hg::TensorView& t) {
  if (t.shape.empty() || t.nbytes == 0) return;
  const int64_t cols = t.shape.back();
  if (cols <= 0 || cols > 4096 || cols % hg::dtype_block_elems(t.dtype) != 0) return;
  std::vector<float> row(static_cast<size_t>(cols)), x(static_cast<size_t>(cols), 0.5f);
  hg::cpu::dequantize_row_scalar(t.dtype, t.data, cols, 0, row.data());
  hg::cpu::dequantize_row(t.dtype, t.data, cols, 0, row.data());
  float y = 0.0f;
  hg::cpu::matmul_rows(t.dtype, t.data, cols, x.data(), 1, &y, 1, 0, 1);
  if (const auto packed = hg::cpu::pack_weight(t.dtype, t.data, 1, cols)) {
    static hg::ThreadPool pool(1);
    static hg::cpu::MatmulWorkspace ws;
    const hg::cpu::MatmulTarget target{t.dtype, t.data, 1, &y, 1, false, packed.get()};
    hg::cpu::matmul_group(pool, ws, &target, 1, cols, x.data(), 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<hg::gguf::File> f;
  try {
    f = hg::gguf::File::from_memory(data, size, "fuzz.gguf");
  } catch (const hg::Error&) {
    return 0;
  }
  for (const auto& [key, value] : f->metadata()) {
    try {
      (void)f->get_string(key);
    } catch (const hg::Error&) {
    }
    try {
      (void)f->get_float(key);
    } catch (const hg::Error&) {
    }
    try {
      (void)f->get_string_array(key);
    } catch (const hg::Error&) {
    }
  }
  for (const auto& info : f->tensors()) {
    try {
      const hg::TensorView t = f->tensor(info.name);
      touch(t, data, size);
      decode(t);
    } catch (const hg::Error&) {
    }
  }
  try {
    auto model = hg::model_from_gguf(f);
    (void)model->n_params();
    (void)model->weight_bytes();
  } catch (const hg::Error&) {
  }
  return 0;
}
