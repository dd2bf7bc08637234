// Per-architecture weight tables: the list of tensors a model of a given spec must have, under
// HF or GGUF names, with the shape each must have and the field of ModelWeights it fills.
// bind_weights() checks a TensorSource against the table; the synthetic builder fills it.
#pragma once
#include <string>
#include <vector>

#include "hybridgen/model.h"
#include "model/tensor_source.h"

namespace hg {

enum class Naming { HF, GGUF };

enum class WeightKind {
  Linear,     // [out, in], any dtype
  Embedding,  // [rows, dim], any dtype
  Norm,       // [d_model] scale, float dtypes only
  NormBias,   // [d_model] shift, float dtypes only
  Bias,       // [out], float dtypes only
};

struct WeightSlot {
  std::string name;
  std::vector<int64_t> shape;
  WeightKind kind;
  TensorView* dst;  // field of the ModelWeights the table was built for
};

// opt.cpp: model.decoder.* names (HF only; `prefix` is "model.decoder." or "decoder.").
std::vector<WeightSlot> opt_weight_slots(const ModelSpec& spec, const std::string& prefix, ModelWeights& w);
// llama.cpp: Llama and Qwen2 (q/k/v biases), HF or GGUF names.
std::vector<WeightSlot> llama_weight_slots(const ModelSpec& spec, Naming naming, ModelWeights& w);

// The table for spec.arch; resizes w.layers.
std::vector<WeightSlot> weight_slots(const ModelSpec& spec, Naming naming, ModelWeights& w,
                                     const std::string& opt_prefix = "model.decoder.");

// Looks every slot up in `source`, checks presence, dtype and exact shape, fills `w`, and ties
// lm_head to tok_embed when the spec says so. Errors name the file, tensor, expected vs actual.
void bind_weights(const ModelSpec& spec, Naming naming, const TensorSource& source, ModelWeights& w);

std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace hg
