// fp32 GEMM through oneDNN, callable from any pool thread. Debian's oneDNN is built with OpenMP,
// so an sgemm call from a thread would otherwise start a team of omp_get_max_threads() threads
// per caller and oversubscribe the cores; SingleThreadedOmp pins the calling thread's OpenMP team
// size to 1 around the call (looked up with dlsym, so a oneDNN built with another runtime needs
// nothing).
#pragma once
#include <cstdint>

namespace hg::cpu {

// Row-major C[m, n] = A[m, k] · B[n, k]ᵀ + beta · C
void sgemm(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
           float* C, int64_t ldc);
// Row-major C[m, n] += A[m, k] · B[k, n]
void sgemm_accumulate(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float* C, int64_t ldc);

// Sets this thread's OpenMP team size to 1 for the scope (no-op without an OpenMP runtime).
class SingleThreadedOmp {
 public:
  SingleThreadedOmp();
  ~SingleThreadedOmp();
  SingleThreadedOmp(const SingleThreadedOmp&) = delete;
  SingleThreadedOmp& operator=(const SingleThreadedOmp&) = delete;

 private:
  int saved_ = 1;
};

}  // namespace hg::cpu
