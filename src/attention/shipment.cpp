#include "attention/shipment.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention.h"

namespace hg {

void grow_device_buffers(Device& device, std::initializer_list<float**> buffers, size_t& capacity, size_t floats) {
  if (capacity >= floats) return;
  capacity = std::max(floats, capacity * 2);
  for (float** p : buffers) {
    if (*p) device.free(*p);
    *p = static_cast<float*>(device.alloc(sizeof(float) * capacity));
  }
}

HostShipment::HostShipment(Device& device, const ModelSpec& spec, int n_seqs, DType kv_dtype)
    : device_(device),
      spec_(spec),
      n_seqs_(n_seqs),
      fetched_(static_cast<size_t>(spec.n_layers) * n_seqs),
      kv_dtype_(kv_dtype),
      compact_(!device.memory().host && (kv_dtype == DType::BF16 || kv_dtype == DType::F16)) {}

HostShipment::~HostShipment() {
  for (auto& b : rows_)
    for (float* p : {b.logits, b.v, b.out, b.lse})
      if (p) device_.free(p);
  for (auto& f : fetched_)
    for (float* p : {f.k, f.v})
      if (p) device_.free(p);
}

void HostShipment::begin_step(size_t n_rows) {
  fetch_ordered_ = false;
  if (rows_.size() < n_rows) rows_.resize(n_rows);
  if (parts_.size() < n_rows) parts_.resize(n_rows);
}

HostShipment::RowBuffers& HostShipment::row_buffers(int row, size_t floats) {
  RowBuffers& b = rows_[static_cast<size_t>(row)];
  grow_device_buffers(device_, {&b.logits, &b.v, &b.out, &b.lse}, b.capacity, floats);
  return b;
}

size_t HostShipment::compact_max_offset(int K) const {
  const size_t logits_bytes = sizeof(uint16_t) * static_cast<size_t>(spec_.n_heads) * K;
  return (logits_bytes + 3) / 4 * 4;
}

size_t HostShipment::compact_rows(const std::vector<float>& rows, std::vector<std::byte>& out) const {
  const size_t bytes = rows.size() * dtype_block_bytes(kv_dtype_);
  out.resize(bytes);
  cpu::store_kv_row(kv_dtype_, out.data(), rows.data(), static_cast<int>(rows.size()));
  return bytes;
}

void HostShipment::compact_logits(const HostResult& r) {
  const size_t K = static_cast<size_t>(r.K), heads = static_cast<size_t>(spec_.n_heads);
  shifted_.resize(heads * K);
  logit_max_.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    const float* l = r.logits.data() + h * K;
    float m = *std::max_element(l, l + K);
    if (!std::isfinite(m)) m = 0.0f;  // every logit masked: they stay -inf
    logit_max_[h] = m;
    for (size_t j = 0; j < K; ++j) shifted_[h * K + j] = l[j] - m;
  }
  // One buffer, one copy: the f16 logits, then (4-byte aligned) the maxima.
  const size_t max_at = compact_max_offset(K);
  logits16_.resize(max_at + sizeof(float) * heads);
  cpu::store_kv_row(DType::F16, logits16_.data(), shifted_.data(), static_cast<int>(heads * K));
  std::memcpy(logits16_.data() + max_at, logit_max_.data(), sizeof(float) * heads);
}

int64_t HostShipment::ship(int layer, std::span<const HostResult> results, int n_rows, bool prefill, bool lse_merge) {
  const int rows_per_part = prefill ? n_rows : 1;
  int64_t bytes = 0;
  bool fetching = false;
  for (int i = 0; i < n_rows; i += rows_per_part) {
    const HostResult& r = results[static_cast<size_t>(prefill ? 0 : i)];
    HostPart& part = parts_[static_cast<size_t>(i)];
    part = HostPart{};
    if (prefill || (lse_merge && !r.fetch)) {
      const size_t outs = static_cast<size_t>(rows_per_part) * spec_.q_dim();
      const size_t lses = static_cast<size_t>(rows_per_part) * spec_.n_heads;
      RowBuffers& b = row_buffers(i, outs);
      device_.copy_to_device(b.out, r.out.data(), sizeof(float) * outs);
      device_.copy_to_device(b.lse, r.lse.data(), sizeof(float) * lses);
      part = {.kind = HostPart::Kind::Partial, .out = b.out, .lse = b.lse};
      bytes += static_cast<int64_t>(sizeof(float) * (outs + lses));
    } else if (r.K > 0 && r.fetch) {
      // InfiniGen's fetch: the chosen K and V rows into this layer's staging, on the copy stream
      const size_t floats = static_cast<size_t>(spec_.n_kv_heads) * r.K * spec_.head_dim;
      FetchStaging& f = fetched_[static_cast<size_t>(layer) * n_seqs_ + i];
      grow_device_buffers(device_, {&f.k, &f.v}, f.capacity, floats);
      if (!fetch_ordered_) device_.copies_after_compute();  // behind the previous step's reads of every staging
      fetch_ordered_ = fetching = true;
      part = {.kind = HostPart::Kind::KeyValue, .K = r.K, .k = f.k, .v = f.v};
      if (compact_) {
        const size_t row_bytes = compact_rows(r.k, f.k_host);
        compact_rows(r.v, f.v_host);
        device_.copy_to_device_async(f.k, f.k_host.data(), row_bytes);
        device_.copy_to_device_async(f.v, f.v_host.data(), row_bytes);
        part.rows_dtype = kv_dtype_;
        bytes += static_cast<int64_t>(2 * row_bytes);
      } else {
        device_.copy_to_device_async(f.k, r.k.data(), sizeof(float) * floats);
        device_.copy_to_device_async(f.v, r.v.data(), sizeof(float) * floats);
        bytes += static_cast<int64_t>(2 * sizeof(float) * floats);
      }
    } else if (r.K > 0) {
      const size_t nv = static_cast<size_t>(spec_.n_kv_heads) * r.K * spec_.head_dim;
      const size_t nl = static_cast<size_t>(spec_.n_heads) * r.K;
      RowBuffers& b = row_buffers(i, std::max(nv, nl + spec_.n_heads));
      part = {.kind = HostPart::Kind::Logits, .K = r.K, .logits = b.logits, .v = b.v};
      if (compact_) {
        compact_logits(r);
        const size_t v_bytes = compact_rows(r.v, v16_);
        device_.copy_to_device(b.logits, logits16_.data(), logits16_.size());
        device_.copy_to_device(b.v, v16_.data(), v_bytes);
        part.logits_dtype = DType::F16;
        part.logit_max =
            reinterpret_cast<const float*>(reinterpret_cast<const std::byte*>(b.logits) + compact_max_offset(r.K));
        part.rows_dtype = kv_dtype_;
        bytes += static_cast<int64_t>(logits16_.size() + v_bytes);
      } else {
        device_.copy_to_device(b.logits, r.logits.data(), sizeof(float) * nl);
        device_.copy_to_device(b.v, r.v.data(), sizeof(float) * nv);
        bytes += static_cast<int64_t>(sizeof(float) * (nl + nv));
      }
    }
  }
  if (fetching) device_.wait_copy_fence(device_.copy_fence());  // the attention reads the fetched rows
  return bytes;
}

}  // namespace hg
