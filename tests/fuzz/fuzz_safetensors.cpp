// libFuzzer target for the safetensors reader: any byte string must either parse into views that
// lie inside the input or raise hg::Error; the views are then bound against a fixed tiny llama
// spec (the seed corpus's shapes), so the weight table's name/dtype/shape checks run too.
// Run: build-san/bin/fuzz_safetensors -max_len=16384 build-san/corpus/fuzz_safetensors
// tests/fuzz/corpus/fuzz_safetensors
#include <cstddef>
#include <cstdint>
#include <optional>

#include "hybridgen/error.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weight_table.h"

namespace {

// tests/fuzz/corpus/fuzz_safetensors/tiny_llama.safetensors was written for this config.
constexpr const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16,
  "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
  "num_key_value_heads": 1, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": true})";

const hg::ModelSpec& spec() {
  static const hg::ModelSpec s = hg::spec_from_hf_config_text(kConfig, "fuzz/config.json");
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<hg::SafetensorsSet> set;
  try {
    set = hg::SafetensorsSet::from_memory(data, size, "fuzz.safetensors");
  } catch (const hg::Error&) {
    return 0;
  }
  for (const auto& name : set->names()) {
    std::optional<hg::TensorView> t;
    try {
      t = set->find(name);  // throws for a tensor of a dtype we do not compute on
    } catch (const hg::Error&) {
      continue;
    }
    if (!t || t->nbytes == 0) continue;
    const auto* p = static_cast<const uint8_t*>(t->data);
    if (p < data || t->nbytes > size || p + t->nbytes > data + size) __builtin_trap();  // outside the input
    volatile uint8_t sink = p[0] ^ p[t->nbytes - 1];                                    // and let ASan check the bytes
    (void)sink;
  }
  try {
    hg::ModelWeights w;
    hg::bind_weights(spec(), hg::Naming::HF, *set, w);
  } catch (const hg::Error&) {
  }
  return 0;
}
