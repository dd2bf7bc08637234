#include "model/weight_table.h"

#include "hybridgen/error.h"
#include "util/strings.h"

namespace hg {

std::string shape_str(const std::vector<int64_t>& shape) {
  return "[" + join(shape, ", ", [](int64_t n) { return std::to_string(n); }) + "]";
}

std::vector<WeightSlot> weight_slots(const ModelSpec& spec, Naming naming, ModelWeights& w,
                                     const std::string& opt_prefix) {
  w.layers.assign(static_cast<size_t>(spec.n_layers), LayerWeights{});
  if (spec.is_opt()) {
    if (naming != Naming::HF) throw Error("OPT weights are only supported in HF safetensors form");
    return opt_weight_slots(spec, opt_prefix, w);
  }
  return llama_weight_slots(spec, naming, w);
}

void bind_weights(const ModelSpec& spec, Naming naming, const TensorSource& source, ModelWeights& w) {
  // OPT checkpoints come with or without the "model." in front of "decoder." depending on the
  // transformers version that saved them.
  std::string opt_prefix = "model.decoder.";
  if (spec.is_opt() && !source.find(opt_prefix + "embed_tokens.weight") && source.find("decoder.embed_tokens.weight"))
    opt_prefix = "decoder.";
  for (const WeightSlot& slot : weight_slots(spec, naming, w, opt_prefix)) {
    std::optional<TensorView> t = source.find(slot.name);
    const std::string where = source.file_of(slot.name) + ": tensor '" + slot.name + "'";
    if (!t) throw Error(where + " is missing (expected shape " + shape_str(slot.shape) + ")");
    bool float_only = slot.kind == WeightKind::Norm || slot.kind == WeightKind::NormBias || slot.kind == WeightKind::Bias;
    if (float_only && dtype_is_quantized(t->dtype))
      throw Error(where + ": dtype " + std::string(dtype_name(t->dtype)) + " is not allowed for a norm or bias (expected f32, f16 or bf16)");
    if (t->shape != slot.shape)
      throw Error(where + ": expected shape " + shape_str(slot.shape) + ", got " + shape_str(t->shape));
    *slot.dst = std::move(*t);
  }
  if (spec.tied_embeddings) {
    w.lm_head = w.tok_embed;
  }
}

}  // namespace hg
