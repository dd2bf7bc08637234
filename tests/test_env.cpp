// Linked into every test binary: the process environment the tests run in, set before main.
//
// HG_PREFILL_GEMM=sgemm: on a CPU with AVX512_BF16 (or AMX) the prefill GEMM would round X and W
// to bf16 (kernels/cpu/gemm_bf16.h), and the tests that check the model's arithmetic against fp32
// references (numpy logits, prefill-then-decode against one prefill, hybrid against full) hold
// their tolerances for the fp32 path on every CPU. The hybridgen processes the tests start inherit
// it. The tests of the bf16 paths ask for them themselves (cpu::override_prefill_gemm, or
// HG_PREFILL_GEMM=amx|avx512_bf16 in a command); a value set before the tests run is kept.
#include <cstdlib>

namespace {
[[maybe_unused]] const int kPrefillGemm = ::setenv("HG_PREFILL_GEMM", "sgemm", /*overwrite=*/0);
}  // namespace
