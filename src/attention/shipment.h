// What crosses from the host to the device for one layer, row by row, and the device buffers it
// lands in: the selected tokens' logits and V rows (--merge logits), a partial result and its
// log-sum-exp (--merge lse, and every prefill chunk), or the K and V rows of a fetch (InfiniGen),
// the last on the copy stream into a staging area per layer. The buffers grow with the host tokens
// (doubling), so no step allocates once warm.
// Beside a GPU over a 16-bit cache the shipment is compact (kernels/device_tokens.h, HostPart): K
// and V rows in the cache's dtype, as the host store holds them, and logits in f16 less their
// head's maximum, half the bytes of fp32 over the bus. On the CPU device nothing crosses a bus, and
// an fp32 cache asks for fp32: both ship fp32.
#pragma once
#include <span>
#include <vector>

#include "attention/host_selection.h"
#include "device/device.h"

namespace hg {

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
    std::vector<std::byte> k_host, v_host;  // a compact fetch's rows, kept until its copy ran
  };
  RowBuffers& row_buffers(int row, size_t floats);
  // Where a compact Logits part's maxima follow its f16 logits (bytes, 4-aligned).
  size_t compact_max_offset(int K) const;
  // The compact form of a row's rows (into `out`) and logits (into logits16_: the f16 logits,
  // then the maxima).
  size_t compact_rows(const std::vector<float>& rows, std::vector<std::byte>& out) const;
  void compact_logits(const HostResult& r);

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
  bool compact_;                          // see above
  std::vector<std::byte> v16_;            // a compact Logits part's V rows
  std::vector<float> shifted_, logit_max_;  // logits less their head's max; the maxes [n_heads]
  std::vector<std::byte> logits16_;       // the shifted logits in f16
};

// Grows device buffers that share one capacity (floats) to hold `floats` each; amortized
// (doubles), so that no step allocates once warm.
void grow_device_buffers(Device& device, std::initializer_list<float**> buffers, size_t& capacity, size_t floats);

}  // namespace hg
