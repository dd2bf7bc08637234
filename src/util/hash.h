// Stable 64-bit mixing: the same value on every build and machine (std::hash is not), for what
// must not change between runs (random K/V rows, the shard of a sweep point).
#pragma once
#include <cstdint>

namespace hg {

// splitmix64's step and finalizer: a well-mixed 64-bit value from any 64-bit input.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace hg
