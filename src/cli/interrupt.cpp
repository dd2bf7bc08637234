#include "cli/interrupt.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <thread>

namespace hg::cli {

namespace {
// The one piece of process-wide state the watcher and the handler share with the work's thread:
// a lock-free atomic, which a signal handler may touch too.
std::atomic<int> g_interrupted{0};
static_assert(std::atomic<int>::is_always_lock_free);
struct sigaction g_previous {};

// Runs only on a thread that does not block SIGINT (one some library started before the scope):
// the watcher takes every other delivery.
void on_sigint(int) { g_interrupted = 1; }

sigset_t interrupt_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  return set;
}

// What a SIGINT does without the scope: the process ends, killed by the signal.
[[noreturn]] void die_of_sigint() {
  signal(SIGINT, SIG_DFL);
  const sigset_t set = interrupt_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(SIGINT);
  _exit(128 + SIGINT);  // not reached
}
}  // namespace

struct InterruptScope::Watcher {
  int signal_fd = -1;
  int stop_fd = -1;  // an eventfd the destructor writes
  sigset_t previous_mask{};
  std::thread thread;

  void loop() const {
    for (;;) {
      pollfd fds[2] = {{signal_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      signalfd_siginfo info;
      if ((fds[0].revents & POLLIN) == 0 || read(signal_fd, &info, sizeof info) != sizeof info) continue;
      if (g_interrupted) die_of_sigint();  // the second Ctrl-C: the run did not stop soon enough
      g_interrupted = 1;
    }
  }
};

InterruptScope::InterruptScope() {
  g_interrupted = 0;
  sigaction(SIGINT, nullptr, &g_previous);
  // A process started with SIGINT ignored (nohup, a background job of a non-interactive shell) keeps ignoring it.
  if (g_previous.sa_handler == SIG_IGN) return;

  auto w = std::make_unique<Watcher>();
  const sigset_t set = interrupt_set();
  pthread_sigmask(SIG_BLOCK, &set, &w->previous_mask);
  w->signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
  w->stop_fd = eventfd(0, EFD_CLOEXEC);
  if (w->signal_fd >= 0 && w->stop_fd >= 0) {
    try {
      w->thread = std::thread([raw = w.get()] { raw->loop(); });  // inherits the blocked mask
      watcher_ = std::move(w);
    } catch (const std::system_error&) {
    }
  }
  if (!watcher_) {  // no watcher: SIGINT lands on this thread, as it would without the scope
    if (w->signal_fd >= 0) close(w->signal_fd);
    if (w->stop_fd >= 0) close(w->stop_fd);
    pthread_sigmask(SIG_SETMASK, &w->previous_mask, nullptr);
  }

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: the handler runs once, then SIGINT is back to its default (terminate), so a
  // second Ctrl-C stops a run that does not reach its next check soon enough.
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
}

InterruptScope::~InterruptScope() {
  if (watcher_) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(watcher_->stop_fd, &one, sizeof one);  // an eventfd: cannot fail
    watcher_->thread.join();
    close(watcher_->signal_fd);
    close(watcher_->stop_fd);
  }
  sigaction(SIGINT, &g_previous, nullptr);
  // A SIGINT still pending now meets the restored handler (the default: the process ends).
  if (watcher_) pthread_sigmask(SIG_SETMASK, &watcher_->previous_mask, nullptr);
}

bool InterruptScope::interrupted() const { return g_interrupted != 0; }

}  // namespace hg::cli
