#include "attention/shipment.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "hybridgen/error.h"
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

namespace {

constexpr size_t align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

HostShipment::HostShipment(Device& device, const ModelSpec& spec, int n_seqs, DType kv_dtype)
    : device_(device),
      spec_(spec),
      n_seqs_(n_seqs),
      kv_dtype_(kv_dtype),
      staged_(!device.memory().host),
      compact_(staged_ && (kv_dtype == DType::BF16 || kv_dtype == DType::F16)),
      layer_parts_{PinnedBuffer(device.dma_registrar()), PinnedBuffer(device.dma_registrar())} {
  planned_.resize(static_cast<size_t>(spec.n_layers));
  // A buffer the registrar refused would make each queued copy a synchronous one, taken before
  // the host callback filled the buffer: the asynchronous pipeline needs them pinned.
  if (staged_) {
    layer_parts_[0].reserve(1);
    layer_parts_[1].reserve(1);
    stages_async_ = layer_parts_[0].pinned() && layer_parts_[1].pinned();
    counts_ = static_cast<int32_t*>(device.alloc(sizeof(int32_t) * spec.n_layers * n_seqs));
  }
  fetched_.resize(static_cast<size_t>(spec.n_layers) * n_seqs);
}

HostShipment::~HostShipment() {
  // No copy out of the pinned buffers may still run when they are freed.
  if (staged_) device_.synchronize();
  for (auto& b : rows_)
    for (float* p : {b.logits, b.v, b.out, b.lse})
      if (p) device_.free(p);
  for (auto& f : fetched_)
    for (float* p : {f.k, f.v})
      if (p) device_.free(p);
  if (counts_) device_.free(counts_);
}

void HostShipment::begin_step(size_t n_rows) {
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

HostPart HostShipment::logits_part(const RowBuffers& b, int K) const {
  HostPart part{.kind = HostPart::Kind::Logits, .K = K, .logits = b.logits, .v = b.v};
  if (compact_) {  // f16 logits less their head's max, the maxima after them; rows in the cache's dtype
    part.logits_dtype = DType::F16;
    part.logit_max =
        reinterpret_cast<const float*>(reinterpret_cast<const std::byte*>(b.logits) + compact_max_offset(K));
    part.rows_dtype = kv_dtype_;
  }
  return part;
}

size_t HostShipment::row_bytes(size_t floats) const {
  return floats * (compact_ ? dtype_block_bytes(kv_dtype_) : sizeof(float));
}

size_t HostShipment::put_rows(const float* rows, size_t floats, std::byte* out) const {
  if (!compact_) {
    std::memcpy(out, rows, sizeof(float) * floats);
  } else {
    cpu::store_kv_row(kv_dtype_, out, rows, static_cast<int>(floats));
  }
  return row_bytes(floats);
}

void HostShipment::put_rows_spaced(const std::vector<float>& rows, int K, int rows_per_head, std::byte* out) const {
  if (K <= 0) return;
  const size_t block = static_cast<size_t>(K) * spec_.head_dim;
  const size_t spaced = row_bytes(static_cast<size_t>(rows_per_head) * spec_.head_dim);
  for (size_t g = 0; g < static_cast<size_t>(spec_.n_kv_heads); ++g)
    put_rows(rows.data() + g * block, block, out + g * spaced);
}

size_t HostShipment::put_logits(const HostResult& r, std::byte* out) {
  const size_t K = static_cast<size_t>(r.K), heads = static_cast<size_t>(spec_.n_heads);
  if (!compact_) {
    std::memcpy(out, r.logits.data(), sizeof(float) * heads * K);
    return sizeof(float) * heads * K;
  }
  shifted_.resize(heads * K);
  const size_t max_at = compact_max_offset(r.K);
  auto* maxes = reinterpret_cast<float*>(out + max_at);
  for (size_t h = 0; h < heads; ++h) {
    const float* l = r.logits.data() + h * K;
    float m = *std::max_element(l, l + K);
    if (!std::isfinite(m)) m = 0.0f;  // every logit masked: they stay -inf
    maxes[h] = m;
    for (size_t j = 0; j < K; ++j) shifted_[h * K + j] = l[j] - m;
  }
  // One buffer, one copy: the f16 logits, then (4-byte aligned) the maxima.
  cpu::store_kv_row(DType::F16, out, shifted_.data(), static_cast<int>(heads * K));
  return max_at + sizeof(float) * heads;
}

int64_t HostShipment::ship(int layer, std::span<const HostResult> results, int n_rows, bool prefill, bool lse_merge) {
  // The asynchronous pipeline's layout, from the results at hand: a prefill chunk is one partial
  // result for all its rows.
  shapes_.clear();
  for (int i = 0; i < (prefill ? 1 : n_rows); ++i)
    shapes_.push_back({.K = results[static_cast<size_t>(i)].K, .fetch = results[static_cast<size_t>(i)].fetch});
  int64_t bytes = 0;
  const size_t need = lay_out(layer, shapes_, prefill ? n_rows : 1, prefill || lse_merge, bytes);
  if (!staged_) {  // the CPU device: straight from the results
    const auto& planned = planned_[static_cast<size_t>(layer)];
    for (size_t i = 0; i < planned.size(); ++i) {
      const Planned& p = planned[i];
      const HostResult& r = results[i];
      const bool partial = p.part.kind == HostPart::Kind::Partial;
      const bool fetched = p.part.kind == HostPart::Kind::KeyValue;
      const void* first = partial ? r.out.data() : (fetched ? r.k.data() : r.logits.data());
      const void* src[Planned::kPieces] = {first, partial ? r.lse.data() : r.v.data(), nullptr};
      for (int k = 0; k < Planned::kPieces; ++k)
        if (p.bytes[k]) device_.copy_to_device(p.dst[k], src[k], p.bytes[k]);
    }
    return bytes;
  }
  // Beside a GPU the parts cross from this layer parity's pinned buffer without a host wait; the
  // buffer's last copies (two layers ago) have run by now, normally.
  const size_t parity = static_cast<size_t>(layer % 2);
  device_.wait_compute_fence(layer_fence_[parity]);
  layer_parts_[parity].reserve(need);
  fill(layer, results);
  queue(layer);
  layer_fence_[parity] = device_.compute_fence();
  return bytes;
}

// ---- the asynchronous pipeline's shipment ----

size_t HostShipment::Planned::offset(int piece) const {
  size_t o = at;
  for (int k = 0; k < piece; ++k) o += align16(bytes[k]);
  return o;
}

HostShipment::Planned HostShipment::plan_part(int layer, int row, PlannedRow shape, int partial_rows, bool lse_merge) {
  Planned p;
  const int K = shape.K;
  const size_t nv = static_cast<size_t>(spec_.n_kv_heads) * K * spec_.head_dim;
  if (lse_merge && !shape.fetch) {
    const auto rows = static_cast<size_t>(partial_rows);
    RowBuffers& b = row_buffers(row, rows * spec_.q_dim());
    p.part = {.kind = HostPart::Kind::Partial, .out = b.out, .lse = b.lse};
    p.bytes[0] = sizeof(float) * rows * spec_.q_dim();
    p.bytes[1] = sizeof(float) * rows * spec_.n_heads;
    p.dst[0] = b.out;
    p.dst[1] = b.lse;
  } else if (K > 0 && shape.fetch) {
    FetchStaging& f = fetched_[static_cast<size_t>(layer) * n_seqs_ + row];
    grow_device_buffers(device_, {&f.k, &f.v}, f.capacity, nv);
    p.part = {.kind = HostPart::Kind::KeyValue, .K = K, .k = f.k, .v = f.v};
    if (compact_) p.part.rows_dtype = kv_dtype_;
    p.bytes[0] = p.bytes[1] = row_bytes(nv);
    p.dst[0] = f.k;
    p.dst[1] = f.v;
    if (shape.bound) {
      int32_t* count = counts_ + static_cast<size_t>(layer) * n_seqs_ + row;
      p.part.count = count;
      p.bytes[2] = sizeof(int32_t);
      p.dst[2] = count;
    }
  } else if (shape.bound && K > 0) {
    throw Error("layer " + std::to_string(layer) + ": a logits part cannot be planned from a bound on its K");
  } else if (K > 0) {
    const size_t nl = static_cast<size_t>(spec_.n_heads) * K;
    RowBuffers& b = row_buffers(row, std::max(nv, nl + spec_.n_heads));
    p.part = logits_part(b, K);
    p.bytes[0] = compact_ ? compact_max_offset(K) + sizeof(float) * spec_.n_heads : sizeof(float) * nl;
    p.bytes[1] = row_bytes(nv);
    p.dst[0] = b.logits;
    p.dst[1] = b.v;
  }
  return p;
}

size_t HostShipment::lay_out(int layer, std::span<const PlannedRow> rows, int partial_rows, bool lse_merge,
                             int64_t& bytes) {
  auto& planned = planned_[static_cast<size_t>(layer)];
  planned.resize(rows.size());
  size_t need = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Planned& p = planned[i] = plan_part(layer, static_cast<int>(i), rows[i], partial_rows, lse_merge);
    p.at = need;
    need = p.end();
    for (size_t b : p.bytes) bytes += static_cast<int64_t>(b);
    parts_[i] = p.part;
  }
  return need;
}

int64_t HostShipment::plan(int layer, std::span<const PlannedRow> rows, bool lse_merge) {
  int64_t bytes = 0;
  const size_t need = lay_out(layer, rows, 1, lse_merge, bytes);
  // Growing discards the buffer: the callbacks that write it and the copies from it run first.
  grow_pinned(device_, layer_parts_[static_cast<size_t>(layer % 2)], need);
  return bytes;
}

void HostShipment::fill(int layer, std::span<const HostResult> results) {
  const auto& rows = planned_[static_cast<size_t>(layer)];
  std::byte* base = layer_parts_[static_cast<size_t>(layer % 2)].data();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Planned& p = rows[i];
    const HostResult& r = results[i];
    std::byte* first = base + p.offset(0);
    std::byte* second = base + p.offset(1);
    const bool bound = p.part.count != nullptr;
    if (p.part.kind == HostPart::Kind::Partial) {
      std::memcpy(first, r.out.data(), p.bytes[0]);
      std::memcpy(second, r.lse.data(), p.bytes[1]);
    } else if ((bound ? r.K > p.part.K : r.K != p.part.K) ||
               (r.K > 0 && r.fetch != (p.part.kind == HostPart::Kind::KeyValue))) {
      throw Error("layer " + std::to_string(layer) + ": the host selected " + std::to_string(r.K) +
                  " tokens where the pipeline planned " + (bound ? "at most " : "") + std::to_string(p.part.K));
    } else if (bound) {  // the chosen rows spaced as planned, then their count
      put_rows_spaced(r.k, r.K, p.part.K, first);
      put_rows_spaced(r.v, r.K, p.part.K, second);
      const int32_t count = r.K;
      std::memcpy(base + p.offset(2), &count, sizeof count);
    } else if (p.part.kind == HostPart::Kind::KeyValue) {
      put_rows(r.k, first);
      put_rows(r.v, second);
    } else if (p.part.kind == HostPart::Kind::Logits) {
      put_logits(r, first);
      put_rows(r.v, second);
    }
  }
}

void HostShipment::queue(int layer) {
  const std::byte* base = layer_parts_[static_cast<size_t>(layer % 2)].data();
  for (const Planned& p : planned_[static_cast<size_t>(layer)]) {
    if (p.part.kind == HostPart::Kind::None) continue;
    for (int k = 0; k < Planned::kPieces; ++k)
      if (p.bytes[k]) device_.copy_to_device_queued(p.dst[k], base + p.offset(k), p.bytes[k]);
  }
}

}  // namespace hg
