// Ctrl-C (SIGINT) during long work: while an InterruptScope is alive, the first SIGINT only
// raises a flag that the work polls between steps, so it can stop cleanly (keep what it printed,
// print its statistics) and leave with exit status 130; a second SIGINT ends the process at once.
//
// The signal is taken by a watcher thread of the scope's (signalfd), never on a thread that
// computes: the scope blocks SIGINT in the thread that makes it, which the engine's threads
// inherit, and they block it themselves too (util/signals.h says why a signal frame on a thread
// inside oneDNN's GEMM corrupts the heap).
#pragma once
#include <exception>
#include <memory>

namespace hg::cli {

inline constexpr int kInterruptedExitStatus = 130;  // 128 + SIGINT, what shells report

class InterruptScope {
 public:
  InterruptScope();   // blocks SIGINT in this thread, starts the watcher, installs the handler
  ~InterruptScope();  // stops the watcher, restores the handler and this thread's signal mask
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  bool interrupted() const;

 private:
  struct Watcher;
  std::unique_ptr<Watcher> watcher_;  // null when SIGINT was ignored (nohup) or no watcher could start
};

// Thrown after a command stopped cleanly on SIGINT; main turns it into exit status 130.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

}  // namespace hg::cli
