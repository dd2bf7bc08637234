#include "kernels/cpu/sgemm.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "hybridgen/error.h"

namespace hg::cpu {

namespace {

struct OmpApi {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
};

const OmpApi& omp_api() {
  static const OmpApi a = [] {
    OmpApi r;
    r.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    r.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (!r.get) r.set = nullptr;
    return r;
  }();
  return a;
}

void check(dnnl_status_t st) {
  if (st != dnnl_success) throw Error("sgemm: dnnl_sgemm failed with status " + std::to_string(st));
}

}  // namespace

SingleThreadedOmp::SingleThreadedOmp() {
  if (omp_api().set) {
    saved_ = omp_api().get();
    omp_api().set(1);
  }
}

SingleThreadedOmp::~SingleThreadedOmp() {
  if (omp_api().set) omp_api().set(saved_);
}

void sgemm(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
           float* C, int64_t ldc) {
  check(dnnl_sgemm('N', 'T', m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc));
}

void sgemm_accumulate(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float* C, int64_t ldc) {
  check(dnnl_sgemm('N', 'N', m, n, k, 1.0f, A, lda, B, ldb, 1.0f, C, ldc));
}

}  // namespace hg::cpu
