// CpuDevice: the Device ops on a CPU thread pool. Memory is host memory, so copies are memcpy
// and matrices stay zero-copy in the mapped model file; vectors are converted to fp32 once.
// Where the decode GEMV has a packed layout on this CPU (matmul_packed.h: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 with
// AVX512-VNNI or AVX2), a matrix also gets a packed copy at upload, which decode reads instead; prefill
// and embedding lookups keep reading the mapped file. The devices of a process share those copies
// (SharedPacking below).
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "device/cpu_attention.h"
#include "device/device.h"
#include "hybridgen/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/hybrid_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/prefill_attention.h"
#include "kernels/cpu/rope.h"
#include "mem/topology.h"
#include "util/signals.h"
#include "util/thread_pool.h"

namespace hg {

namespace {

// Small ops run on the calling thread: below ~16K values a pool barrier costs more than the work
// (decode has a handful of rows), so the pool synchronizes only for the matmuls and attention.
constexpr int64_t kElementGrain = 16384;  // elementwise ops: values per chunk
constexpr int64_t kSiluGrain = 4096;      // silu's exp costs ~4 times an add: shared from batch 3 on
// Row ops (norms, RoPE, bias): rows per chunk so that a chunk holds about kElementGrain values.
int64_t row_grain(int64_t values_per_row) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, values_per_row));
}
constexpr int kMaxGroup = 8;          // outputs of one matmul_group
constexpr int64_t kSplitChunk = 256;  // context slots per split item (its K and V rows stay in L2)

// The packed copies of the matrices uploaded by this process's CPU devices, shared between them:
// the policies that eval compares (and bench's runs) each own an Engine, and so a device, over one
// mapped Model, and a copy per device held the model's weights once more per policy (~0.5 GB per
// policy for Qwen2.5-0.5B at Q4_K_M: 9.4 GB for RULER's 14 policies at 4K). An entry lives while
// a device that uploaded it lives (a count), so no device is handed the copy of a matrix whose
// model was unmapped, even where a new mapping reuses the address. The copies share one
// PackedStore (huge-page chunks) while any entry lives: a model's slices are reclaimed once no
// device of the process holds any matrix of the store.
class SharedPacking {
 public:
  struct Key {
    const void* data;
    DType dtype;
    int64_t rows, cols;
    bool operator==(const Key&) const = default;
  };

  // Never destroyed: a device that outlives static destruction (one held by a static) still
  // releases its entries.
  static SharedPacking& instance() {
    static SharedPacking* s = new SharedPacking;
    return *s;
  }

  // W's packed copy (null where packing does not pay or does not fit); each call is one use,
  // released by release(key).
  const cpu::PackedWeight* acquire(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      std::shared_ptr<cpu::PackedStore> store = store_.lock();
      if (!store) store_ = store = std::make_shared<cpu::PackedStore>();
      Entry e;
      e.packed = cpu::pack_weight(key.dtype, key.data, key.rows, key.cols, store.get());
      e.store = std::move(store);
      it = entries_.emplace(key, std::move(e)).first;
    }
    ++it->second.users;
    return it->second.packed.get();
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

  void release(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(key);
    if (it != entries_.end() && --it->second.users == 0) entries_.erase(it);
  }

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<const void*>()(k.data) ^ static_cast<size_t>(k.rows); }
  };
  struct Entry {
    std::shared_ptr<cpu::PackedStore> store;  // before packed: outlives the slice it holds
    std::unique_ptr<cpu::PackedWeight> packed;
    int users = 0;
  };
  std::mutex mutex_;
  std::weak_ptr<cpu::PackedStore> store_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
};

class CpuDevice final : public Device {
 public:
  CpuDevice(int n_threads, bool bf16)
      : bf16_(bf16), pool_(n_threads), scratch_(static_cast<size_t>(pool_.size())), copier_([this] {
          block_interrupt_signal();
          copy_loop();
        }) {
    workspace_.bf16 = bf16;
  }
  ~CpuDevice() override {
    {
      std::lock_guard<std::mutex> lock(copy_mutex_);
      copy_stop_ = true;
    }
    copy_cv_.notify_all();
    copier_.join();
    for (const SharedPacking::Key& k : uploaded_) SharedPacking::instance().release(k);
  }

  // "cpu (avx512_bf16)" with the fp32 prefill GEMM, "cpu (avx512_bf16, amx, bf16 attention)" where
  // it runs on AMX tiles, "cpu (avx512_bf16, vdpbf16ps, bf16 attention)" with AVX512_BF16's dot
  // product; with either bf16 GEMM the prefill attention's products over a bf16 cache run in bf16
  // too (kernels/cpu/prefill_attention_bf16.h). What keys stored prefill states (the three sum
  // differently; the bf16 GEMMs without the bf16 attention, before it, were named without ", bf16
  // attention") and what result rows say they ran on
  std::string name() const override {
    std::string gemm;
    switch (bf16_ ? cpu::prefill_gemm_for(cpu::active_cpu_isa()) : cpu::PrefillGemm::Sgemm) {
      case cpu::PrefillGemm::Sgemm:
        break;
      case cpu::PrefillGemm::AmxBf16:
        gemm = ", amx, bf16 attention";
        break;
      case cpu::PrefillGemm::Avx512Bf16:
        gemm = ", vdpbf16ps, bf16 attention";
        break;
    }
    return "cpu (" + std::string(cpu::cpu_isa_name()) + gemm + ")";
  }
  int threads() const override { return pool_.size(); }
  ThreadPool* cpu_pool() override { return &pool_; }
  bool bf16_compute() const override { return bf16_; }
  DeviceMemory memory() const override {
    const mem::SystemMemory m = mem::system_memory();
    return {m.available, m.total, /*host=*/true};
  }

  // Large buffers (the KV cache, staging) get transparent huge pages: decode streams them whole
  // every step, and on 4 KiB pages each page is a TLB miss.
  void* alloc(size_t bytes) override {
    constexpr size_t kHuge = size_t{2} << 20;
    const bool huge = bytes >= 2 * kHuge;
    const size_t align = huge ? kHuge : 64;
    const size_t size = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, size);
    if (!p) throw Error("cpu device: out of memory allocating " + std::to_string(bytes) + " bytes");
    if (huge) madvise(p, size, MADV_HUGEPAGE);  // a hint; small pages work too
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void synchronize() override {}

  DeviceTensor upload_weight(const TensorView& t) override {
    DeviceTensor d;
    if (!t.present()) return d;
    d.cols = t.cols();
    d.rows = t.shape.size() >= 2 ? t.numel() / t.cols() : 1;
    if (t.shape.size() >= 2) {
      d.dtype = t.dtype;
      d.data = t.data;
      if (cpu::packing_pays(t.dtype)) {
        const SharedPacking::Key key{t.data, t.dtype, d.rows, d.cols};
        const cpu::PackedWeight* packed = SharedPacking::instance().acquire(key);
        std::lock_guard<std::mutex> lock(owned_mutex_);
        uploaded_.push_back(key);
        if (packed) packed_.emplace(t.data, packed);
      }
      return d;
    }
    // Vector: an fp32 copy owned by the device.
    std::lock_guard<std::mutex> lock(owned_mutex_);
    auto& buf = owned_.emplace_back(static_cast<size_t>(d.cols));
    cpu::dequantize_row(t.dtype, t.data, d.cols, 0, buf.data());
    d.dtype = DType::F32;
    d.data = buf.data();
    return d;
  }

  void embed(const DeviceTensor& table, const int32_t* ids, int n, float* out) override {
    for (int i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] >= table.rows)
        throw Error("token id " + std::to_string(ids[i]) + " is outside the vocabulary [0, " +
                    std::to_string(table.rows) + ")");
    }
    pool_.parallel_for(
        n,
        [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i)
            cpu::dequantize_row(table.dtype, table.data, table.cols, ids[i], out + i * table.cols);
        },
        row_grain(table.cols));
  }

  void matmul(const DeviceTensor& w, const DeviceTensor& bias, const float* x, int n, float* y) override {
    const MatmulOut out{&w, &bias, y};
    matmul_group(x, n, &out, 1);
  }

  void matmul_group(const float* x, int n, const MatmulOut* outs, int count) override {
    if (count > kMaxGroup)
      throw Error("matmul_group: " + std::to_string(count) + " outputs > " + std::to_string(kMaxGroup));
    cpu::MatmulTarget targets[kMaxGroup] = {};
    for (int i = 0; i < count; ++i) {
      const DeviceTensor& w = *outs[i].w;
      if (w.cols != outs[0].w->cols)
        throw Error("matmul_group: weights of " + std::to_string(w.cols) + " and " + std::to_string(outs[0].w->cols) +
                    " columns share one input");
      targets[i] = cpu::MatmulTarget{w.dtype, w.data, w.rows, outs[i].y, w.rows, outs[i].accumulate, packed_of(w)};
    }
    cpu::matmul_group(pool_, workspace_, targets, count, outs[0].w->cols, x, n);
    for (int i = 0; i < count; ++i)
      if (outs[i].bias && outs[i].bias->present())
        add_bias(outs[i].y, *outs[i].bias, n, static_cast<int>(outs[i].w->rows));
  }

  void rmsnorm(const float* x, const DeviceTensor& weight, float eps, int n, int dim, float* y) override {
    pool_.parallel_for(
        n, [&](int64_t b, int64_t e, int) { cpu::rmsnorm_rows(x, weight.f32(), eps, dim, y, b, e); }, row_grain(dim));
  }

  void layernorm(const float* x, const DeviceTensor& weight, const DeviceTensor& bias, float eps, int n, int dim,
                 float* y) override {
    pool_.parallel_for(
        n, [&](int64_t b, int64_t e, int) { cpu::layernorm_rows(x, weight.f32(), bias.f32(), eps, dim, y, b, e); },
        row_grain(dim));
  }

  void rope(float* x, const int32_t* pos, int n, int n_heads, const RopeParams& p) override {
    float inv_freq[512];
    if (p.rotary_dim > 1024) throw Error("rope: rotary_dim " + std::to_string(p.rotary_dim) + " > 1024");
    cpu::rope_inv_freq(p.rotary_dim, p.theta, p.scaling.llama3, p.scaling.factor, p.scaling.low_freq_factor,
                       p.scaling.high_freq_factor, p.scaling.original_max_position, p.freq_factors, inv_freq);
    const bool interleaved = p.layout == RopeLayout::Interleaved;
    pool_.parallel_for(
        n,
        [&](int64_t b, int64_t e, int) {
          cpu::rope_rows(x, pos, n_heads, p.head_dim, p.rotary_dim, inv_freq, interleaved, b, e);
        },
        row_grain(static_cast<int64_t>(n_heads) * p.head_dim));
  }

  void silu_mul(float* gate, const float* up, int64_t count) override {
    pool_.parallel_for(
        count, [&](int64_t b, int64_t e, int) { cpu::silu_mul_range(gate, up, b, e); }, kSiluGrain);
  }
  void relu(float* x, int64_t count) override {
    pool_.parallel_for(
        count, [&](int64_t b, int64_t e, int) { cpu::relu_range(x, b, e); }, kElementGrain);
  }
  void add(float* y, const float* x, int64_t count) override {
    pool_.parallel_for(
        count, [&](int64_t b, int64_t e, int) { cpu::add_range(y, x, b, e); }, kElementGrain);
  }
  void add_bias(float* y, const DeviceTensor& b, int n, int dim) override {
    pool_.parallel_for(
        n, [&](int64_t rb, int64_t re, int) { cpu::add_bias_rows(y, b.f32(), dim, rb, re); }, row_grain(dim));
  }

  void kv_store(const KvView& kv, const float* k, const float* v, int n, int pos0) override {
    if (pos0 + n > kv.capacity)
      throw Error("kv cache overflow: position " + std::to_string(pos0 + n) + " > capacity " +
                  std::to_string(kv.capacity));
    cpu::kv_store_rows(kv.dtype, kv.k, kv.v, kv.capacity, kv.n_kv_heads, kv.head_dim, k, v, n, pos0);
  }

  // Decode rows split along the context; prefill's many rows take the tiled kernel. The cache
  // is f32, f16 or bf16 (EngineOptions::kv_dtype), which both take.
  void attention(const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out) override {
    if (n <= kCpuSplitMaxRows) return split_attention(q, n, n_heads, kv, past, scale, out);
    tiled_.causal(pool_, q, n, n_heads, kv, past, scale, out, bf16_);
  }

  // The copy "stream" is a thread that runs queued memcpys in order; a fence is the count of
  // copies queued so far, waited for by blocking the caller (the device thread).
  void copy_to_device_async(void* dst, const void* src, size_t bytes) override {
    const CopyRegion r{dst, src, bytes};
    copy_to_device_async_batch(&r, 1);
  }
  void copy_to_device_async_batch(const CopyRegion* regions, size_t n) override {
    {
      std::lock_guard<std::mutex> lock(copy_mutex_);
      copies_.insert(copies_.end(), regions, regions + n);
      copies_queued_ += static_cast<int64_t>(n);
    }
    copy_cv_.notify_one();
  }
  int64_t copy_fence() override {
    std::lock_guard<std::mutex> lock(copy_mutex_);
    return copies_queued_;
  }
  void wait_copy_fence(int64_t f) override {
    std::unique_lock<std::mutex> lock(copy_mutex_);
    copy_done_cv_.wait(lock, [&] { return copies_done_ >= f; });
  }

  // The CPU device runs every op before returning, so a mark is the steady clock now, for both
  // "streams"; a ring of kTimingMarks handles as on the CUDA device.
  int timing_mark(bool /*copy_stream*/) override {
    const int handle = timing_next_;
    timing_[static_cast<size_t>(handle)] = std::chrono::steady_clock::now();
    timing_next_ = (timing_next_ + 1) % kTimingMarks;
    return handle;
  }
  double timing_elapsed_ms(int begin, int end) override {
    if (begin < 0 || end < 0 || begin >= kTimingMarks || end >= kTimingMarks) return -1.0;
    return std::chrono::duration<double, std::milli>(timing_[static_cast<size_t>(end)] -
                                                     timing_[static_cast<size_t>(begin)])
        .count();
  }

  void hybrid_attention(const HybridAttentionArgs& a) override {
    const int heads = cpu::hybrid_attention_heads_per_item(a, pool_.size());
    const size_t need = static_cast<size_t>(heads * cpu::hybrid_attention_scores_per_head(a));
    for (auto& s : scratch_)
      if (s.size() < need) s.resize(need);
    pool_.parallel_for(static_cast<int64_t>(a.n) * (a.n_heads / heads), [&](int64_t b, int64_t e, int t) {
      cpu::hybrid_attention_items(a, heads, scratch_[static_cast<size_t>(t)].data(), b, e);
    });
  }

 private:
  // Takes every queued copy at once, runs them unlocked and reports them done together: one
  // wake-up of each side per batch (a decode layer of `offload` queues hundreds of block runs).
  void copy_loop() {
    std::vector<CopyRegion> batch;
    std::unique_lock<std::mutex> lock(copy_mutex_);
    for (;;) {
      copy_cv_.wait(lock, [&] { return copy_stop_ || !copies_.empty(); });
      if (copies_.empty()) return;  // stopping, nothing left
      batch.assign(copies_.begin(), copies_.end());
      copies_.clear();
      lock.unlock();
      for (const CopyRegion& c : batch) std::memcpy(c.dst, c.src_host, c.bytes);
      lock.lock();
      copies_done_ += static_cast<int64_t>(batch.size());
      copy_done_cv_.notify_all();
    }
  }

  static constexpr int kTimingMarks = 4096;

  // Decode: the context split in chunks over the pool (one barrier), merged on this thread.
  void split_attention(const float* q, int n, int n_heads, const KvView& kv, int past, float scale, float* out) {
    cpu::SplitAttentionArgs a{q,    n,           n_heads, kv.n_kv_heads, kv.head_dim, kv.dtype, kv.k,
                              kv.v, kv.capacity, past,    scale,         kSplitChunk, nullptr,  out};
    const int64_t items = cpu::split_attention_items(a);
    const size_t group = static_cast<size_t>(n_heads / kv.n_kv_heads);
    const size_t need = static_cast<size_t>(items) * group * static_cast<size_t>(kv.head_dim + 2);
    if (split_partials_.size() < need) split_partials_.resize(need);  // grows with the context
    a.partial = split_partials_.data();
    for (auto& s : scratch_)
      if (s.size() < static_cast<size_t>(kSplitChunk) * group) s.resize(static_cast<size_t>(kSplitChunk) * group);
    pool_.parallel_for(items, [&](int64_t b, int64_t e, int t) {
      cpu::split_attention_partials(a, scratch_[static_cast<size_t>(t)].data(), b, e);
    });
    cpu::split_attention_combine(a, 0, static_cast<int64_t>(n) * n_heads);
  }

  // The packed copy of a matrix uploaded from `w.data`, or null.
  const cpu::PackedWeight* packed_of(const DeviceTensor& w) {
    std::lock_guard<std::mutex> lock(owned_mutex_);
    const auto it = packed_.find(w.data);
    return it == packed_.end() ? nullptr : it->second;
  }

  bool bf16_;  // Device::bf16_compute
  ThreadPool pool_;
  cpu::MatmulWorkspace workspace_;                          // the device thread's matmul scratch
  std::vector<std::vector<float>> scratch_;                 // per-thread attention scores (split, hybrid)
  std::vector<float> split_partials_;                       // split attention: per item and head, o, m, l
  CpuTiledAttention tiled_;                                 // prefill attention
  std::array<std::chrono::steady_clock::time_point, kTimingMarks> timing_{};
  int timing_next_ = 0;
  std::mutex copy_mutex_;
  std::condition_variable copy_cv_, copy_done_cv_;
  std::deque<CopyRegion> copies_;
  int64_t copies_queued_ = 0, copies_done_ = 0;
  bool copy_stop_ = false;
  std::mutex owned_mutex_;
  std::vector<std::vector<float>> owned_;  // fp32 copies of vectors
  std::vector<SharedPacking::Key> uploaded_;                          // the matrices it holds in SharedPacking
  std::unordered_map<const void*, const cpu::PackedWeight*> packed_;  // their packed copies, by the mapped data
  std::thread copier_;  // last: starts once every member it could touch exists
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(int n_threads, bool bf16) { return std::make_unique<CpuDevice>(n_threads, bf16); }

size_t cpu_packed_matrices() { return SharedPacking::instance().size(); }

}  // namespace hg
