// Ctrl-C (SIGINT) during long work: while an InterruptScope is alive, the first SIGINT only
// raises a flag that the work polls between steps, so it can stop cleanly (keep what it printed,
// print its statistics) and leave with exit status 130; a second SIGINT ends the process at once.
#pragma once
#include <exception>

namespace hg::cli {

inline constexpr int kInterruptedExitStatus = 130;  // 128 + SIGINT, what shells report

class InterruptScope {
 public:
  InterruptScope();   // installs the handler
  ~InterruptScope();  // restores the previous one
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  bool interrupted() const;
};

// Thrown after a command stopped cleanly on SIGINT; main turns it into exit status 130.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

}  // namespace hg::cli
