// Which threads take SIGINT. A thread that computes never does: oneDNN's JIT f32 GEMM (the
// prefill matmuls; Debian 12 ships oneDNN 2.7) points rsp into a heap workspace while it runs, so
// a signal handled on that thread pushes its frame into the heap and corrupts it (oneDNN issue
// #4845, fixed upstream in 3.11 by PR #4855). Every thread the engine starts blocks SIGINT first,
// and cli::InterruptScope takes Ctrl-C on a thread of its own that computes nothing.
#pragma once

namespace hg {

// Blocks SIGINT in the calling thread (threads it starts inherit the mask).
void block_interrupt_signal();

}  // namespace hg
