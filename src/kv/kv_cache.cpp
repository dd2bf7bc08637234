#include "kv/kv_cache.h"

#include "hybridgen/error.h"

namespace hg {

size_t KvCache::bytes_per_token(const ModelSpec& spec, DType dtype) {
  return 2ull * spec.n_layers * spec.kv_dim() * dtype_block_bytes(dtype);
}

KvCache::KvCache(Device& device, const ModelSpec& spec, DType dtype, int capacity, int n_seqs)
    : device_(device), n_layers_(spec.n_layers), capacity_(capacity), lengths_(static_cast<size_t>(n_seqs), 0) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw Error("kv cache: dtype " + std::string(dtype_name(dtype)) + " is not supported (f32, f16, bf16)");
  const size_t per_buffer = static_cast<size_t>(spec.kv_dim()) * capacity * dtype_block_bytes(dtype);
  views_.reserve(static_cast<size_t>(n_seqs) * n_layers_);
  for (int s = 0; s < n_seqs; ++s) {
    for (int l = 0; l < n_layers_; ++l) {
      KvView v;
      v.dtype = dtype;
      v.capacity = capacity;
      v.n_kv_heads = spec.n_kv_heads;
      v.head_dim = spec.head_dim;
      v.k = device_.alloc(per_buffer);
      v.v = device_.alloc(per_buffer);
      views_.push_back(v);
      bytes_ += 2 * per_buffer;
    }
  }
}

KvCache::~KvCache() {
  for (auto& v : views_) {
    device_.free(v.k);
    device_.free(v.v);
  }
}

}  // namespace hg
