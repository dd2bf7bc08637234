#include "util/signals.h"

#include <signal.h>

namespace hg {

void block_interrupt_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace hg
