#include "attention/layer_attention.h"

namespace hg {

AttentionStage make_attention(const AttentionContext& c, const Policy& policy, const mem::PlacementOptions& placement) {
  if (window_covers_context(policy, c.ctx)) {
    // Nothing would ever leave the device window: that is full attention, without the host stage.
    return {make_full_attention(c), policy.name + ": window " + std::to_string(policy.window) + " + " +
                                        std::to_string(policy.n_sinks) + " sinks cover the context of " +
                                        std::to_string(c.ctx) +
                                        " tokens, so every token stays on the device (as with --policy full)"};
  }
  switch (policy.kv) {
    case KvHome::Device:
      return {make_full_attention(c), ""};
    case KvHome::Host:
      return {make_offload_attention(c, placement), ""};
    case KvHome::Split:
      return {make_hybrid_attention(c, policy, placement), ""};
  }
  return {make_full_attention(c), ""};
}

}  // namespace hg
