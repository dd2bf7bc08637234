// What crosses from the host to the device for one layer, row by row, and the device buffers it
// lands in: the selected tokens' logits and V rows (--merge logits), a partial result and its
// log-sum-exp (--merge lse, and every prefill chunk), or the K and V rows of a fetch (InfiniGen)
// into a staging area per layer. The buffers grow with the host tokens (doubling), so no step
// allocates once warm.
// Beside a GPU over a 16-bit cache the shipment is compact (kernels/device_tokens.h, HostPart): K
// and V rows in the cache's dtype, as the host store holds them, and logits in f16 less their
// head's maximum, half the bytes of fp32 over the bus. On the CPU device nothing crosses a bus, and
// an fp32 cache asks for fp32: both ship fp32.
// Beside a GPU the parts are written into pinned double buffers (one per layer parity, registered
// for DMA) and copied on the compute stream without a host wait. Both ways of shipping lay a
// layer's parts out alike (lay_out): the synchronous one (ship) writes them from the host thread,
// behind a compute fence recorded after the buffer's copies two layers before, a wait that has
// normally passed long before (the host waited for the next layer's query since); the
// asynchronous one (plan, fill, queue) from a host callback on the compute stream, ordered
// behind those copies by the stream.
#pragma once
#include <span>
#include <vector>

#include "attention/host_selection.h"
#include "device/device.h"
#include "mem/pinned_buffer.h"

namespace hg {

using mem::PinnedBuffer;

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
  // where they are. Beside a GPU the copies are queued on the compute stream, ahead of the
  // attention that reads them; on the CPU device they are done when it returns.
  int64_t ship(int layer, std::span<const HostResult> results, int n_rows, bool prefill, bool lse_merge);
  const HostPart& part(int row) const { return parts_[static_cast<size_t>(row)]; }

  // The asynchronous pipeline's shipment (beside a GPU; HybridAttention's host callbacks), in
  // three calls for a decode layer: plan() lays the parts out from each row's planned K (and
  // whether the row's selector fetches its K and V rows) before the host has computed them, and
  // returns the bytes (growing a buffer first waits for the device: only while K grows); fill(),
  // from the layer's host callback, writes the results there (a row whose K differs from its plan
  // is an error); queue(), issued after that callback, copies them on the compute stream, fetched
  // rows too, so the stream runs the copies once fill() has returned. part(i) then says where row
  // i's part lands. Whether plan() can be used: stages_async(), a GPU beside pinned buffers.
  // A fetching row whose K the host decides from the data (InfiniGen's alpha rule) is planned
  // with the most it may choose (`bound`): its rows are laid out for that many, the host's count
  // crosses with them (HostPart::count), and the device attends over that many.
  struct PlannedRow {
    int K = 0;
    bool fetch = false;
    bool bound = false;  // K is the most the host may choose, not the K it will
  };
  bool stages_async() const { return stages_async_; }
  int64_t plan(int layer, std::span<const PlannedRow> rows, bool lse_merge);
  void fill(int layer, std::span<const HostResult> results);
  void queue(int layer);

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
  };
  // A planned part: its pieces (logits and V rows, K and V rows (and a bound row's count), or
  // partial and LSE) from `at` in the layer parity's pinned buffer, each 16-byte aligned after the
  // one before; a piece of no bytes is absent.
  struct Planned {
    static constexpr int kPieces = 3;
    HostPart part;
    size_t at = 0;
    size_t bytes[kPieces] = {0, 0, 0};
    void* dst[kPieces] = {nullptr, nullptr, nullptr};
    size_t offset(int piece) const;  // of the piece in the pinned buffer
    size_t end() const { return offset(kPieces); }
  };
  RowBuffers& row_buffers(int row, size_t floats);
  // One row's part, not yet placed in the buffer; a partial result holds partial_rows rows (a
  // prefill chunk's, else 1).
  Planned plan_part(int layer, int row, PlannedRow shape, int partial_rows, bool lse_merge);
  // The layer's parts placed one after another (planned_[layer], parts_); returns the bytes of
  // the pinned buffer they take, and adds the bytes that cross to `bytes`.
  size_t lay_out(int layer, std::span<const PlannedRow> rows, int partial_rows, bool lse_merge, int64_t& bytes);
  // A Logits part landing in b, compact or fp32 (part.K = K).
  HostPart logits_part(const RowBuffers& b, int K) const;
  // Where a compact Logits part's maxima follow its f16 logits (bytes, 4-aligned).
  size_t compact_max_offset(int K) const;
  // Bytes of `floats` row values as they cross: the cache's dtype when compact, else fp32.
  size_t row_bytes(size_t floats) const;
  // Writes row values (compact: in the cache's dtype) to `out`; returns the bytes.
  size_t put_rows(const float* rows, size_t floats, std::byte* out) const;
  size_t put_rows(const std::vector<float>& rows, std::byte* out) const {
    return put_rows(rows.data(), rows.size(), out);
  }
  // Writes [n_kv_heads][K][head_dim] rows into a layout of `rows_per_head` rows per kv-head.
  void put_rows_spaced(const std::vector<float>& rows, int K, int rows_per_head, std::byte* out) const;
  // Writes a row's logits (compact: f16 less their head's max, then at compact_max_offset the
  // fp32 maxima) to `out`; returns the bytes.
  size_t put_logits(const HostResult& r, std::byte* out);

  Device& device_;
  const ModelSpec& spec_;
  int n_seqs_;
  std::vector<RowBuffers> rows_;
  // [layer * n_seqs + row]: a staging area per layer and row (every copy into one and the
  // attention that reads it run in order on the compute stream).
  std::vector<FetchStaging> fetched_;
  std::vector<HostPart> parts_;                // per row
  int32_t* counts_ = nullptr;                  // [layer * n_seqs + row] on the device: bound parts' counts (staged)
  std::vector<std::vector<Planned>> planned_;  // [layer][row]: lay_out()'s layout
  std::vector<PlannedRow> shapes_;             // ship()'s rows
  DType kv_dtype_;
  bool staged_;   // beside a GPU: parts cross from the pinned buffers
  bool compact_;  // see above
  bool stages_async_ = false;
  PinnedBuffer layer_parts_[2];  // by layer parity: the layer's parts as they cross
  int64_t layer_fence_[2] = {-1, -1};
  std::vector<float> shifted_;  // logits less their head's max
};

// Grows device buffers that share one capacity (floats) to hold `floats` each; amortized
// (doubles), so that no step allocates once warm.
void grow_device_buffers(Device& device, std::initializer_list<float**> buffers, size_t& capacity, size_t floats);

}  // namespace hg
