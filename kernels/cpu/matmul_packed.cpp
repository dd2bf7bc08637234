// Packing of Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weights for the packed GEMVs (AVX512-VNNI, AVX2), the activation reorder, and the
// scalar twin of the packed kernel (see matmul_packed.h for the layout).
#include "kernels/cpu/matmul_packed.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hybridgen/error.h"
#include "kernels/cpu/quant_blocks.h"

namespace hg::cpu {

namespace {

constexpr int kQuad = 4;  // blocks per quad

// Byte offsets inside a group of `blocks` blocks (a quad or the tail): codes, then d[blocks],
// then c[blocks] (f16).
struct GroupLayout {
  size_t codes, d, c, bytes;
};
GroupLayout group_layout(DType source, int blocks) {
  const size_t codes = PackedWeight::code_bytes(source, blocks);
  return {0, codes, codes + 2 * static_cast<size_t>(blocks), codes + 4 * static_cast<size_t>(blocks)};
}

// Block j of a GGUF row as packed codes (value i at code[i]), d and c; false if c overflows f16.
bool unpack_gguf_block(DType wt, const uint8_t* row, int64_t j, uint8_t code[32], uint16_t& d, uint16_t& c) {
  switch (wt) {
    case DType::Q8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[j];
      for (int i = 0; i < 32; ++i) code[i] = static_cast<uint8_t>(b.qs[i] + 128);
      d = b.d;
      c = fp32_to_f16(-128.0f * f16_to_fp32(b.d));
      break;
    }
    case DType::Q4_0:
    case DType::Q4_1: {
      const uint8_t* qs = wt == DType::Q4_0 ? reinterpret_cast<const BlockQ4_0*>(row)[j].qs
                                            : reinterpret_cast<const BlockQ4_1*>(row)[j].qs;
      unpack_nibbles(qs, code);
      if (wt == DType::Q4_0) {
        d = reinterpret_cast<const BlockQ4_0*>(row)[j].d;
        c = fp32_to_f16(-8.0f * f16_to_fp32(d));
      } else {
        d = reinterpret_cast<const BlockQ4_1*>(row)[j].d;
        c = reinterpret_cast<const BlockQ4_1*>(row)[j].m;
      }
      break;
    }
    case DType::Q5_0: {
      const auto& b = reinterpret_cast<const BlockQ5_0*>(row)[j];
      unpack_q5(b.qs, b.qh, code);
      d = b.d;
      c = fp32_to_f16(-16.0f * f16_to_fp32(b.d));
      break;
    }
    case DType::Q5_1: {
      const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[j];
      unpack_q5(b.qs, b.qh, code);
      d = b.d;
      c = b.m;
      break;
    }
    default:
      return false;
  }
  return std::isfinite(f16_to_fp32(c)) || !std::isfinite(f16_to_fp32(d));  // an infinite d stays as bad
}

// Writes block k (of `blocks`) of a group at `g`.
void put_block(DType source, uint8_t* g, int blocks, int k, const uint8_t code[32], uint16_t d, uint16_t c) {
  const GroupLayout L = group_layout(source, blocks);
  if (source == DType::Q8_0) {
    std::memcpy(g + 16 * k, code, 16);
    std::memcpy(g + 16 * (blocks + k), code + 16, 16);
  } else {
    for (int i = 0; i < 16; ++i) g[16 * k + i] = static_cast<uint8_t>((code[i] & 0xf) | ((code[i + 16] & 0xf) << 4));
  }
  if (PackedWeight::code_bits(source) == 5) {  // block k's 16 + 16 fifth bits into its half's two words
    uint32_t qh = 0;
    for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>((code[i] >> 4) & 1) << i;
    const int shift = 16 * (k % 2);
    for (int w = 0; w < 2; ++w) {
      uint8_t* at = g + 16 * blocks + 4 * (2 * (k / 2) + w);
      uint32_t word;
      std::memcpy(&word, at, 4);
      word = (word & ~(0xffffu << shift)) | (((qh >> (16 * w)) & 0xffffu) << shift);
      std::memcpy(at, &word, 4);
    }
  }
  std::memcpy(g + L.d + 2 * k, &d, 2);
  std::memcpy(g + L.c + 2 * k, &c, 2);
}

// The inverse: block k of a group as codes, d and c (fp32).
void get_block(DType source, const uint8_t* g, int blocks, int k, uint8_t code[32], float& d, float& c) {
  const GroupLayout L = group_layout(source, blocks);
  if (source == DType::Q8_0) {
    std::memcpy(code, g + 16 * k, 16);
    std::memcpy(code + 16, g + 16 * (blocks + k), 16);
  } else {
    unpack_nibbles(g + 16 * k, code);
  }
  if (PackedWeight::code_bits(source) == 5) {
    for (int w = 0; w < 2; ++w) {
      uint32_t word;
      std::memcpy(&word, g + 16 * blocks + 4 * (2 * (k / 2) + w), 4);
      for (int i = 0; i < 16; ++i) code[16 * w + i] |= static_cast<uint8_t>(((word >> (16 * (k % 2) + i)) & 1) << 4);
    }
  }
  uint16_t hd, hc;
  std::memcpy(&hd, g + L.d + 2 * k, 2);
  std::memcpy(&hc, g + L.c + 2 * k, 2);
  d = f16_to_fp32(hd);
  c = f16_to_fp32(hc);
}

// Group (quad index q, or the tail when q == n_quads) start and block count in a packed row.
struct Group {
  size_t offset;
  int blocks;
};
Group group_of(DType source, int64_t cols, int64_t q) {
  const int64_t n_blocks = cols / 32, n_quads = n_blocks / kQuad;
  const size_t quad_bytes = group_layout(source, kQuad).bytes;
  return {quad_bytes * static_cast<size_t>(q), q < n_quads ? kQuad : static_cast<int>(n_blocks % kQuad)};
}

}  // namespace

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kStoreChunk = size_t{32} << 20;

PackedStore::~PackedStore() {
  for (const Chunk& c : chunks_) std::free(c.base);
}

uint8_t* PackedStore::allocate(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!chunks_.empty() && chunks_.back().size - chunks_.back().used >= bytes) {
    Chunk& c = chunks_.back();
    c.used += bytes;
    return c.base + c.used - bytes;
  }
  // A tensor above half a chunk gets its own (the open chunk stays open for small ones).
  const size_t size = bytes > kStoreChunk / 2 ? (bytes + kHugePage - 1) / kHugePage * kHugePage : kStoreChunk;
  auto* base = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, size));
  if (!base) throw Error("matmul: out of memory packing weights (" + std::to_string(size) + " bytes)");
  madvise(base, size, MADV_HUGEPAGE);  // a hint: without THP the pages are small and all still works
  const Chunk c{base, size, bytes};
  if (bytes > kStoreChunk / 2 && !chunks_.empty())
    chunks_.insert(chunks_.end() - 1, c);
  else
    chunks_.push_back(c);
  return base;
}

void PackedWeight::Free::operator()(uint8_t* p) const { std::free(p); }

PackedWeight::PackedWeight(DType source, int64_t rows, int64_t cols, PackedStore* store)
    : source_(source), rows_(rows), cols_(cols) {
  const int64_t n_blocks = cols / 32;
  const int tail = static_cast<int>(n_blocks % kQuad);
  row_bytes_ = group_layout(source, kQuad).bytes * static_cast<size_t>(n_blocks / kQuad) +
               (tail ? group_layout(source, tail).bytes : 0);
  const size_t total = (bytes() + 63) / 64 * 64 + 64;  // + 64: whole-vector loads past the last row stay inside
  if (store) {
    data_ = store->allocate(total);
  } else {
    owned_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, total)));
    if (!owned_) throw Error("matmul: out of memory packing a weight of " + std::to_string(total) + " bytes");
    data_ = owned_.get();
  }
  // put_block writes each block's half of a fifth-bit word, so those words start at zero (a tail
  // with one block in its last half leaves the other half as it found it); other formats write
  // every byte of a row and need only the padding cleared.
  if (code_bits() == 5)
    std::memset(data_, 0, total);
  else
    std::memset(data_ + bytes(), 0, total - bytes());
}

namespace {
bool packed_format(DType wt) {
  return wt == DType::Q4_0 || wt == DType::Q4_1 || wt == DType::Q5_0 || wt == DType::Q5_1 || wt == DType::Q8_0;
}
}  // namespace

bool packing_pays(DType wt) {
  const bool format = packed_format(wt);
  const DotInt8 dot = dot_int8_for(active_cpu_isa());
  return format && dot != DotInt8::Scalar;
}

std::unique_ptr<PackedWeight> pack_weight(DType wt, const void* W, int64_t rows, int64_t cols, PackedStore* store) {
  if (!packed_format(wt) || rows <= 0 || cols <= 0 || cols % 32 != 0) return nullptr;
  auto p = std::make_unique<PackedWeight>(wt, rows, cols, store);
  const size_t src_row_bytes = dtype_row_bytes(wt, cols);
  const int64_t n_groups = (cols / 32 + kQuad - 1) / kQuad;
  uint8_t code[32];
  uint16_t d, c;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(W) + src_row_bytes * static_cast<size_t>(r);
    for (int64_t q = 0; q < n_groups; ++q) {
      const Group g = group_of(wt, cols, q);
      for (int k = 0; k < g.blocks; ++k) {
        if (!unpack_gguf_block(wt, src, q * kQuad + k, code, d, c)) return nullptr;
        put_block(wt, p->row(r) + g.offset, g.blocks, k, code, d, c);
      }
    }
  }
  return p;
}

int64_t act_split_quads(int64_t cols) { return (cols / 32 + kQuad - 1) / kQuad; }

void split_act(const ActQ8& x, int64_t n_tokens, int64_t cols, int8_t* q, float* dx, float* s) {
  const int64_t n_blocks = cols / 32, quads = act_split_quads(cols);
  std::memset(q, 0, static_cast<size_t>(n_tokens * quads * 128));
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(n_tokens * quads * 16));
  std::memset(s, 0, sizeof(float) * static_cast<size_t>(n_tokens * quads * 4));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < n_blocks; ++j) {
      const int64_t quad = j / kQuad, k = j % kQuad, base = t * quads + quad;
      std::memcpy(q + 128 * base + 16 * k, x.q + t * cols + 32 * j, 16);
      std::memcpy(q + 128 * base + 64 + 16 * k, x.q + t * cols + 32 * j + 16, 16);
      for (int l = 0; l < 4; ++l) dx[16 * base + 4 * k + l] = x.d[t * n_blocks + j];
      s[4 * base + k] = x.s[t * n_blocks + j];
    }
}

void gemv_packed_rows_scalar(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedWeight& w = *a.w;
  const int64_t n_groups = act_split_quads(w.cols());
  uint8_t code[32];
  float d, c;
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      float y = 0.0f;
      for (int64_t q = 0; q < n_groups; ++q) {
        const Group g = group_of(w.source(), w.cols(), q);
        const int64_t base = t * a.x.quads + q;
        for (int k = 0; k < g.blocks; ++k) {
          get_block(w.source(), w.row(r) + g.offset, g.blocks, k, code, d, c);
          int32_t dot = 0;
          for (int i = 0; i < 16; ++i) {
            dot += code[i] * a.x.q[128 * base + 16 * k + i];
            dot += code[i + 16] * a.x.q[128 * base + 64 + 16 * k + i];
          }
          y += d * a.x.dx[16 * base + 4 * k] * static_cast<float>(dot) + c * a.x.s[4 * base + k];
        }
      }
      float& out = a.Y[t * a.ldy + r];
      out = a.accumulate ? out + y : y;
    }
}

}  // namespace hg::cpu
