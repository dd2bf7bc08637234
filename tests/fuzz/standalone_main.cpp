// A main() for a libFuzzer target built without libFuzzer (any compiler, the normal build): it
// calls LLVMFuzzerTestOneInput on every file of the corpus, then on pseudo-random mutations of
// them, from a fixed seed and bounded in count and time, like libFuzzer's
// StandaloneFuzzTargetMain plus a mutator. No coverage feedback and no sanitizers: it catches
// what crashes a Release binary (a segfault, a trap, an abort, an exception other than
// hg::Error, an input that runs past -timeout), keeps the corpus passing in every `ctest`, and
// leaves the real fuzzing to `make fuzz-smoke` (clang, libFuzzer, ASan + UBSan).
//
//   fuzz_X_standalone [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N] [-timeout=S]
//                     [-artifact_prefix=P] PATH...
//
// PATH is a corpus directory (every regular file in it, by name) or a file. The flags mean what
// libFuzzer's do; -runs counts the mutated inputs run after the corpus (2000 unless given),
// -max_total_time stops the mutations early (10 s). An input that crashes or runs past -timeout
// (10 s) is written to P + "crash-N" or P + "timeout-N" before the process dies of the signal;
// `fuzz_X_standalone THAT_FILE` runs it again alone.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

struct Options {
  uint64_t runs = 2000;
  double max_total_time = 10.0;
  uint64_t seed = 1;
  size_t max_len = 16384;
  unsigned timeout = 10;
  std::string artifact_prefix = "./";
  std::vector<std::string> paths;
};

// The input under test, for the signal handler: the one place this process keeps global state,
// because a handler can reach nothing else.
struct CurrentInput {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t index = 0;
  char prefix[4096] = {};
};
CurrentInput g_current;

// Async-signal-safe: only write(2) and open(2), no allocation, no stdio.
void write_text(int fd, const char* s) { (void)!::write(fd, s, std::strlen(s)); }
void format_u64(uint64_t v, char* out) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = char('0' + v % 10);
  } while ((v /= 10) != 0);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

void on_fatal_signal(int sig) {
  const char* kind = sig == SIGALRM ? "timeout-" : "crash-";
  char path[4200], number[24];
  format_u64(g_current.index, number);
  path[0] = '\0';
  std::strncat(path, g_current.prefix, sizeof path - 64);
  std::strcat(path, kind);
  std::strcat(path, number);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (g_current.size > 0) (void)!::write(fd, g_current.data, g_current.size);
    ::close(fd);
  }
  char size[24];
  format_u64(g_current.size, size);
  write_text(2, sig == SIGALRM ? "\nfuzz standalone: input " : "\nfuzz standalone: signal on input ");
  write_text(2, number);
  write_text(2, " (");
  write_text(2, size);
  write_text(2, sig == SIGALRM ? " bytes) ran past -timeout; written to " : " bytes); written to ");
  write_text(2, fd >= 0 ? path : "(could not write it)");
  write_text(2, "\n");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// splitmix64: the same sequence from the same seed with every compiler and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }  // [0, n)

 private:
  uint64_t state_;
};

// Values that sit on the edges parsers check: 0, 1, -1, sign bits, powers of two, 2^31 - 1.
constexpr uint64_t kInteresting[] = {0,           1,          0x7F,       0x80,        0xFF,
                                     0x100,       0x7FFF,     0x8000,     0xFFFF,      0x10000,
                                     0x7FFFFFFF,  0x80000000, 0xFFFFFFFF, 0x100000000, 0x7FFFFFFFFFFFFFFF,
                                     ~uint64_t{0}};

// One of libFuzzer's kinds of mutation, chosen at random, applied to `x` (never past max_len).
void mutate_once(Bytes& x, const std::vector<Bytes>& corpus, size_t max_len, Rng& rng) {
  const size_t n = x.size();
  switch (rng.below(n == 0 ? 2 : 11)) {
    case 0: {  // insert a run of one random byte or of 0x00 / 0xFF
      const size_t count = 1 + rng.below(16);
      if (n + count > max_len) break;
      const uint8_t b = rng.below(3) == 0 ? uint8_t(rng.below(2) ? 0xFF : 0x00) : uint8_t(rng.next());
      x.insert(x.begin() + static_cast<ptrdiff_t>(rng.below(n + 1)), count, b);
      break;
    }
    case 1: {  // splice in a piece of another corpus input
      const Bytes& other = corpus[rng.below(corpus.size())];
      if (other.empty()) break;
      const size_t from = rng.below(other.size()), len = 1 + rng.below(std::min<size_t>(other.size() - from, 256));
      if (n + len > max_len) break;
      x.insert(x.begin() + static_cast<ptrdiff_t>(rng.below(n + 1)), other.begin() + static_cast<ptrdiff_t>(from),
               other.begin() + static_cast<ptrdiff_t>(from + len));
      break;
    }
    case 2: {  // erase a range
      const size_t at = rng.below(n), len = 1 + rng.below(std::min<size_t>(n - at, 64));
      x.erase(x.begin() + static_cast<ptrdiff_t>(at), x.begin() + static_cast<ptrdiff_t>(at + len));
      break;
    }
    case 3:  // flip a bit
      x[rng.below(n)] ^= uint8_t(1u << rng.below(8));
      break;
    case 4:  // set a byte
      x[rng.below(n)] = uint8_t(rng.next());
      break;
    case 5: {  // an edge value, 1/2/4/8 bytes, either order
      const size_t width = size_t{1} << rng.below(4);
      if (width > n) break;
      uint64_t v = kInteresting[rng.below(std::size(kInteresting))];
      if (rng.below(2)) v += rng.below(5) - 2;
      const size_t at = rng.below(n - width + 1);
      const bool big_endian = rng.below(2);
      for (size_t i = 0; i < width; ++i) x[at + (big_endian ? width - 1 - i : i)] = uint8_t(v >> (8 * i));
      break;
    }
    case 6: {  // add a small delta to a little-endian 4-byte integer (a count, a size, an offset)
      if (n < 4) break;
      const size_t at = rng.below(n - 3);
      uint32_t v;
      std::memcpy(&v, &x[at], 4);
      v += static_cast<uint32_t>(rng.below(33)) - 16u;
      std::memcpy(&x[at], &v, 4);
      break;
    }
    case 7: {  // change an ASCII number: the text formats' sizes and counts
      size_t at = rng.below(n);
      while (at < n && (x[at] < '0' || x[at] > '9')) ++at;
      if (at == n) break;
      size_t end = at;
      while (end < n && end - at < 19 && x[end] >= '0' && x[end] <= '9') ++end;
      static const char* const kNumbers[] = {
          "0", "1", "-1", "2147483647", "2147483648", "4294967296", "99999999999999999999", "1e308", "-0", "65536"};
      const std::string repl =
          rng.below(3) == 0 ? std::to_string(rng.next() % 100000) : kNumbers[rng.below(std::size(kNumbers))];
      if (n - (end - at) + repl.size() > max_len) break;
      x.erase(x.begin() + static_cast<ptrdiff_t>(at), x.begin() + static_cast<ptrdiff_t>(end));
      x.insert(x.begin() + static_cast<ptrdiff_t>(at), repl.begin(), repl.end());
      break;
    }
    case 8: {  // copy a range of the input over another place in it
      const size_t from = rng.below(n), to = rng.below(n);
      const size_t len = 1 + rng.below(std::min<size_t>({n - from, n - to, 128}));
      std::memmove(&x[to], &x[from], len);
      break;
    }
    case 9:  // truncate: a file cut off at any byte
      x.resize(rng.below(n));
      break;
    case 10: {  // shuffle a few bytes
      const size_t at = rng.below(n), len = 1 + rng.below(std::min<size_t>(n - at, 8));
      for (size_t i = len; i > 1; --i) std::swap(x[at + i - 1], x[at + rng.below(i)]);
      break;
    }
  }
}

bool parse_flag(const std::string& arg, Options& o) {
  const size_t eq = arg.find('=');
  if (arg.size() < 2 || arg[0] != '-' || eq == std::string::npos) return false;
  const std::string name = arg.substr(1, eq - 1), value = arg.substr(eq + 1);
  if (name == "runs") {
    o.runs = std::stoull(value);
  } else if (name == "max_total_time") {
    o.max_total_time = std::stod(value);
  } else if (name == "seed") {
    o.seed = std::stoull(value);
  } else if (name == "max_len") {
    o.max_len = std::stoull(value);
  } else if (name == "timeout") {
    o.timeout = static_cast<unsigned>(std::stoul(value));
  } else if (name == "artifact_prefix") {
    o.artifact_prefix = value;
  } else {
    throw std::invalid_argument("unknown flag -" + name);
  }
  return true;
}

Bytes read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<Bytes> read_corpus(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const auto& path : paths) {
    if (fs::is_directory(path)) {
      std::vector<fs::path> in_dir;
      for (const auto& e : fs::directory_iterator(path))
        if (e.is_regular_file()) in_dir.push_back(e.path());
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.emplace_back(path);
    }
  }
  std::vector<Bytes> corpus;
  for (const auto& f : files) corpus.push_back(read_bytes(f));
  return corpus;
}

// Runs one input; returns how long it took, in seconds.
double run_one(const Bytes& x, uint64_t index, unsigned timeout) {
  const auto start = std::chrono::steady_clock::now();
  g_current.data = x.data();
  g_current.size = x.size();
  g_current.index = index;
  ::alarm(timeout);
  // A copy of exactly `size` bytes on the heap, as libFuzzer passes it: reading one byte past the
  // input lands outside the allocation rather than in the vector's spare capacity.
  const std::unique_ptr<uint8_t[]> copy(new uint8_t[std::max<size_t>(x.size(), 1)]);
  if (!x.empty()) std::memcpy(copy.get(), x.data(), x.size());
  LLVMFuzzerTestOneInput(copy.get(), x.size());
  ::alarm(0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i)
      if (!parse_flag(argv[i], o)) o.paths.emplace_back(argv[i]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  if (o.paths.empty()) {
    std::fprintf(stderr,
                 "usage: %s [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N] [-timeout=S] "
                 "[-artifact_prefix=P] CORPUS_DIR_OR_FILE...\n",
                 argv[0]);
    return 2;
  }
  std::vector<Bytes> corpus;
  try {
    corpus = read_corpus(o.paths);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: no inputs in the corpus given: a run over nothing proves nothing\n", argv[0]);
    return 1;
  }
  std::snprintf(g_current.prefix, sizeof g_current.prefix, "%s", o.artifact_prefix.c_str());
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM}) std::signal(sig, on_fatal_signal);

  const auto start = std::chrono::steady_clock::now();
  uint64_t index = 0, slowest_index = 0;
  double slowest = 0.0;
  auto run = [&](const Bytes& x) {
    const double seconds = run_one(x, index, o.timeout);
    if (seconds > slowest) slowest = seconds, slowest_index = index;
    ++index;
  };
  size_t cap = o.max_len;
  for (const Bytes& x : corpus) {
    run(x);
    cap = std::max(cap, x.size());  // a seed longer than -max_len may still be mutated
  }
  Rng rng(o.seed);
  Bytes x;
  uint64_t mutated = 0;
  for (; mutated < o.runs; ++mutated) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= o.max_total_time) break;
    // Half the time start again from a corpus input, else keep mutating the last one (deeper).
    if (mutated == 0 || rng.below(2) == 0) x = corpus[rng.below(corpus.size())];
    for (size_t k = 1 + rng.below(4); k > 0; --k) mutate_once(x, corpus, cap, rng);
    run(x);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu corpus inputs and %llu mutations (seed %llu) in %.1f s, no crash; slowest input %llu, %.1f ms\n",
              fs::path(argv[0]).filename().c_str(), corpus.size(), static_cast<unsigned long long>(mutated),
              static_cast<unsigned long long>(o.seed), seconds, static_cast<unsigned long long>(slowest_index),
              slowest * 1e3);
  return 0;
}
