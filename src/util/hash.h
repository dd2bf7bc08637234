// Stable 64-bit mixing: the same value on every build and machine (std::hash is not), for what
// must not change between runs (random K/V rows, the shard of a sweep point, file keys).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hg {

// splitmix64's step and finalizer: a well-mixed 64-bit value from any 64-bit input.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A 64-bit key as file names and results write it: 16 lowercase hex digits, zero-padded.
inline std::string hex16(uint64_t v) {
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = "0123456789abcdef"[v & 0xf];
  return s;
}

// FNV-1a (64 bit), fed piece by piece: keys of what is stored on disk (model fingerprints,
// prefill cache entries, sweep points) and seeds (a synthetic model's tensors). A copy carries the
// state on: feed a common prefix once, copy, and feed each copy its own tail.
class Fnv1a {
 public:
  Fnv1a() = default;
  // From another starting value than FNV's offset basis (sweep point keys, points.cpp).
  explicit Fnv1a(uint64_t basis) : h_(basis) {}
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void add(const std::string& s) { add(s.data(), s.size() + 1); }  // with the terminator: "ab"+"c" != "a"+"bc"
  void add(int64_t v) { add(&v, sizeof v); }
  // The characters alone: "ab" then "c" hashes as "abc" (keys written as one string in pieces).
  void add_chars(std::string_view s) { add(s.data(), s.size()); }
  uint64_t value() const { return h_; }
  std::string hex() const { return hex16(h_); }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace hg
