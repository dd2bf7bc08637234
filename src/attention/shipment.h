// What crosses from the host to the device for one layer, row by row, and the device buffers it
// lands in: the selected tokens' logits and V rows (--merge logits), a partial result and its
// log-sum-exp (--merge lse, and every prefill chunk), or the K and V rows of a fetch (InfiniGen),
// the last on the copy stream into a staging area per layer. The buffers grow with the host tokens
// (doubling), so no step allocates once warm.
// Beside a GPU over a 16-bit cache the shipment is compact (kernels/device_tokens.h, HostPart): K
// and V rows in the cache's dtype, as the host store holds them, and logits in f16 less their
// head's maximum, half the bytes of fp32 over the bus. On the CPU device nothing crosses a bus, and
// an fp32 cache asks for fp32: both ship fp32.
// Beside a GPU the parts are written into pinned double buffers (one per layer parity, registered
// for DMA) and copied on the compute stream without a host wait; a compute fence recorded after a
// layer's copies guards its buffer's reuse two layers later, a wait that has normally passed
// long before (the host waited for the next layer's query since). A fetch's rows (the copy
// stream) have a pinned buffer per layer, guarded the same way.
#pragma once
#include <span>
#include <vector>

#include "attention/host_selection.h"
#include "device/device.h"

namespace hg {

// A host buffer a device copies from by DMA: page-aligned (so that its registration shares no
// page with other memory) and registered through the device's registrar where it has one.
// reserve() grows it, discarding its contents: no copy from it may be pending.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(mem::DmaRegistrar* registrar = nullptr) : registrar_(registrar) {}
  ~PinnedBuffer() { release(); }
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(PinnedBuffer&&) = delete;
  std::byte* reserve(size_t bytes);
  std::byte* data() const { return ptr_; }

 private:
  void release();
  mem::DmaRegistrar* registrar_;
  std::byte* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class HostShipment {
 public:
  HostShipment(Device& device, const ModelSpec& spec, int n_seqs, DType kv_dtype);
  ~HostShipment();
  HostShipment(const HostShipment&) = delete;
  HostShipment& operator=(const HostShipment&) = delete;

  // A new step of n_rows rows.
  void begin_step(size_t n_rows);
  // Copies layer's host results to the device: row i's from results[i] (decode), or one partial
  // result for the whole prefill chunk (results[0]). Returns the bytes shipped; part(i) says
  // where they are. Waits for a fetch's copies before returning (the attention reads them).
  int64_t ship(int layer, std::span<const HostResult> results, int n_rows, bool prefill, bool lse_merge);
  const HostPart& part(int row) const { return parts_[static_cast<size_t>(row)]; }

 private:
  struct RowBuffers {  // where the host part of a row lands on the device
    float* logits = nullptr;
    float* v = nullptr;
    float* out = nullptr;
    float* lse = nullptr;
    size_t capacity = 0;  // floats each buffer holds
  };
  struct FetchStaging {   // one layer's fetched K and V rows of one row, on the device
    float* k = nullptr;   // [n_kv_heads][K][head_dim]
    float* v = nullptr;   // [n_kv_heads][K][head_dim]
    size_t capacity = 0;  // floats each buffer holds
    PinnedBuffer host;    // the rows as they cross (K, then V), kept until their copy ran
    int64_t fence = -1;   // a compute fence behind the attention that read them
  };
  RowBuffers& row_buffers(int row, size_t floats);
  // Where a compact Logits part's maxima follow its f16 logits (bytes, 4-aligned).
  size_t compact_max_offset(int K) const;
  // Bytes of `floats` row values as they cross: the cache's dtype when compact, else fp32.
  size_t row_bytes(size_t floats) const;
  // Writes row values (compact: in the cache's dtype) to `out`; returns the bytes.
  size_t put_rows(const std::vector<float>& rows, std::byte* out) const;
  // Writes a row's logits (compact: f16 less their head's max, then at compact_max_offset the
  // fp32 maxima) to `out`; returns the bytes.
  size_t put_logits(const HostResult& r, std::byte* out);
  // Bytes a decode row's (or the prefill chunk's) part takes in the layer's pinned buffer.
  size_t staged_bytes(const HostResult& r, int rows_per_part, bool partial) const;

  Device& device_;
  const ModelSpec& spec_;
  int n_seqs_;
  std::vector<RowBuffers> rows_;
  // [layer * n_seqs + row]: one staging area per layer, so that a layer's fetch need not wait for
  // the compute of the layers before it: the step's copies are ordered once, behind the previous
  // step's compute (fetch_ordered_), which read every layer's staging.
  std::vector<FetchStaging> fetched_;
  bool fetch_ordered_ = false;
  std::vector<HostPart> parts_;  // per row
  DType kv_dtype_;
  bool staged_;   // beside a GPU: parts cross from the pinned buffers
  bool compact_;  // see above
  PinnedBuffer layer_parts_[2];  // by layer parity: the layer's parts as they cross
  int64_t layer_fence_[2] = {-1, -1};
  std::vector<float> shifted_;  // logits less their head's max
};

// Grows device buffers that share one capacity (floats) to hold `floats` each; amortized
// (doubles), so that no step allocates once warm.
void grow_device_buffers(Device& device, std::initializer_list<float**> buffers, size_t& capacity, size_t floats);

}  // namespace hg
