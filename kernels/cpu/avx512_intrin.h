// <immintrin.h> for AVX-512 translation units. GCC 12's AVX-512 headers spell
// _mm512_undefined_*() as `__m512 __Y = __Y;`, which -Werror turns into an error once inlined;
// those placeholder values are never read, so the two warnings are off from here on.
// (clang has no -Wmaybe-uninitialized and needs neither.)
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
