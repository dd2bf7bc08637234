// For tests and tools that look inside the attention stage of an Engine (the token map of the
// split KV cache), instead of casting the public interface to a concrete stage.
#pragma once
#include "attention/layer_attention.h"
#include "hybridgen/engine.h"
#include "hybridgen/error.h"
#include "kv/hybrid_kv.h"

namespace hg {

// The split KV cache of the engine's attention stage; hg::Error when the policy keeps none.
inline HybridKv& split_kv(Engine& engine) {
  HybridKv* kv = engine.attention().split_kv();
  if (!kv) throw Error("the attention stage (" + engine.describe_attention() + ") keeps no split KV cache");
  return *kv;
}

}  // namespace hg
