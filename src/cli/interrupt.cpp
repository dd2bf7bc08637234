#include "cli/interrupt.h"

#include <csignal>

namespace hg::cli {

namespace {
// The one piece of process-wide state a signal handler can reach; only the handler sets it.
volatile std::sig_atomic_t g_interrupted = 0;
struct sigaction g_previous {};

void on_sigint(int) { g_interrupted = 1; }
}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: the handler runs once, then SIGINT is back to its default (terminate), so a
  // second Ctrl-C stops a run that does not reach its next check soon enough.
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, &g_previous);
  // A process started with SIGINT ignored (nohup, a background job of a non-interactive shell) keeps ignoring it.
  if (g_previous.sa_handler == SIG_IGN) sigaction(SIGINT, &g_previous, nullptr);
}

InterruptScope::~InterruptScope() { sigaction(SIGINT, &g_previous, nullptr); }

bool InterruptScope::interrupted() const { return g_interrupted != 0; }

}  // namespace hg::cli
