// Packing of Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 and Q4_K / Q5_K / Q6_K / Q3_K weights for the packed GEMVs (AVX512-VNNI, AVX2), the activation reorder, and the
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

// Byte offsets inside a group of `blocks` blocks (a quad or the tail): codes, then the scales
// (block scales: d[blocks], then c[blocks] as f16; K-quants: 12 bytes, see matmul_packed.h).
struct GroupLayout {
  size_t codes, d, c, bytes;
};
GroupLayout group_layout(DType source, int blocks) {
  const size_t codes = PackedWeight::code_bytes(source, blocks);
  const size_t scales = PackedWeight::scale_bytes(PackedWeight::scales_of(source), blocks);
  return {0, codes, codes + 2 * static_cast<size_t>(blocks), codes + scales};
}

// Block j of a GGUF row of a block-scaled format as packed codes (value i at code[i]), d and c;
// false if c overflows f16.
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

// The K-quant scales of one quad (half a super-block): D, C as f16 and 8 scale bytes (see
// matmul_packed.h); codes of the quad's 4 blocks. False if C overflows f16.
struct KQuad {
  uint16_t D, C;
  uint8_t sc[8];
  uint8_t code[kQuad][32];
};
bool unpack_gguf_k_quad(DType wt, const uint8_t* row, int64_t quad, KQuad& o) {
  const int64_t sb = quad / 2;
  const int first = 4 * static_cast<int>(quad % 2);  // the quad's first 32-block in its super-block
  switch (wt) {
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = wt == DType::Q5_K;
      const uint8_t* scales = five ? reinterpret_cast<const BlockQ5_K*>(row)[sb].scales
                                   : reinterpret_cast<const BlockQ4_K*>(row)[sb].scales;
      const uint16_t dmin = five ? reinterpret_cast<const BlockQ5_K*>(row)[sb].dmin
                                 : reinterpret_cast<const BlockQ4_K*>(row)[sb].dmin;
      o.D = five ? reinterpret_cast<const BlockQ5_K*>(row)[sb].d : reinterpret_cast<const BlockQ4_K*>(row)[sb].d;
      o.C = static_cast<uint16_t>(dmin ^ 0x8000u);  // -Dmin
      for (int k = 0; k < kQuad; ++k) {
        int sc, m;
        q4_k_scale_min(scales, first + k, sc, m);
        o.sc[k] = static_cast<uint8_t>(sc);
        o.sc[4 + k] = static_cast<uint8_t>(m);
        if (five) {
          q5_k_codes(reinterpret_cast<const BlockQ5_K*>(row)[sb], first + k, o.code[k]);
        } else {
          const uint8_t* q = reinterpret_cast<const BlockQ4_K*>(row)[sb].qs + 32 * ((first + k) / 2);
          const int shift = 4 * ((first + k) % 2);
          for (int l = 0; l < 32; ++l) o.code[k][l] = static_cast<uint8_t>((q[l] >> shift) & 0xf);
        }
      }
      return true;
    }
    case DType::Q6_K: {
      const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[sb];
      o.D = b.d;
      o.C = fp32_to_f16(-32.0f * f16_to_fp32(b.d));
      for (int k = 0; k < kQuad; ++k) {
        q6_k_codes(b, first + k, o.code[k]);
        o.sc[k] = static_cast<uint8_t>(b.scales[2 * (first + k)]);
        o.sc[4 + k] = static_cast<uint8_t>(b.scales[2 * (first + k) + 1]);
      }
      return std::isfinite(f16_to_fp32(o.C)) || !std::isfinite(f16_to_fp32(o.D));
    }
    case DType::Q3_K: {
      const auto& b = reinterpret_cast<const BlockQ3_K*>(row)[sb];
      int8_t scales[16], signed_code[32];
      q3_k_scales(b.scales, scales);
      o.D = b.d;
      o.C = fp32_to_f16(-4.0f * f16_to_fp32(b.d));
      for (int k = 0; k < kQuad; ++k) {
        q3_k_codes(b, first + k, signed_code);
        for (int l = 0; l < 32; ++l) o.code[k][l] = static_cast<uint8_t>(signed_code[l] + 4);
        o.sc[k] = static_cast<uint8_t>(scales[2 * (first + k)]);
        o.sc[4 + k] = static_cast<uint8_t>(scales[2 * (first + k) + 1]);
      }
      return std::isfinite(f16_to_fp32(o.C)) || !std::isfinite(f16_to_fp32(o.D));
    }
    default:
      return false;
  }
}

// Six-bit codes: byte and shift of value i's two high bits in the quad's 32 bytes of crumbs (see
// matmul_packed.h): byte 16 (k % 2) + i % 16 at bit 4 (k / 2) + 2 (i / 16).
struct Crumb {
  int byte, shift;
};
Crumb crumb_of(int k, int i) { return {16 * (k % 2) + i % 16, 4 * (k / 2) + 2 * (i / 16)}; }

// Writes the codes of block k (of `blocks`) of a group at `g`.
void put_codes(DType source, uint8_t* g, int blocks, int k, const uint8_t code[32]) {
  if (source == DType::Q8_0) {
    std::memcpy(g + 16 * k, code, 16);
    std::memcpy(g + 16 * (blocks + k), code + 16, 16);
    return;
  }
  for (int i = 0; i < 16; ++i) g[16 * k + i] = static_cast<uint8_t>((code[i] & 0xf) | ((code[i + 16] & 0xf) << 4));
  if (PackedWeight::code_bits(source) == 6) {
    for (int i = 0; i < 32; ++i) {
      const Crumb c = crumb_of(k, i);
      uint8_t& b = g[16 * blocks + c.byte];
      b = static_cast<uint8_t>((b & ~(3u << c.shift)) | (((code[i] >> 4) & 3u) << c.shift));
    }
  } else if (PackedWeight::code_bits(source) == 5) {  // block k's 16 + 16 fifth bits into its half's two words
    uint32_t bits = 0;
    for (int i = 0; i < 32; ++i) bits |= static_cast<uint32_t>((code[i] >> 4) & 1) << i;
    const int shift = 16 * (k % 2);
    for (int w = 0; w < 2; ++w) {
      uint8_t* at = g + 16 * blocks + 4 * (2 * (k / 2) + w);
      uint32_t word;
      std::memcpy(&word, at, 4);
      word = (word & ~(0xffffu << shift)) | (((bits >> (16 * w)) & 0xffffu) << shift);
      std::memcpy(at, &word, 4);
    }
  }
}

// Writes block k (of `blocks`) of a block-scaled group at `g`.
void put_block(DType source, uint8_t* g, int blocks, int k, const uint8_t code[32], uint16_t d, uint16_t c) {
  const GroupLayout L = group_layout(source, blocks);
  put_codes(source, g, blocks, k, code);
  std::memcpy(g + L.d + 2 * k, &d, 2);
  std::memcpy(g + L.c + 2 * k, &c, 2);
}

// Block k of a group as codes and the d and c of its lo and hi halves (fp32; equal for block
// scales and Super).
void get_block(DType source, const uint8_t* g, int blocks, int k, uint8_t code[32], float d[2], float c[2]) {
  const GroupLayout L = group_layout(source, blocks);
  if (source == DType::Q8_0) {
    std::memcpy(code, g + 16 * k, 16);
    std::memcpy(code + 16, g + 16 * (blocks + k), 16);
  } else {
    unpack_nibbles(g + 16 * k, code);
  }
  if (PackedWeight::code_bits(source) == 6) {
    for (int i = 0; i < 32; ++i) {
      const Crumb c = crumb_of(k, i);
      code[i] |= static_cast<uint8_t>(((g[16 * blocks + c.byte] >> c.shift) & 3) << 4);
    }
  } else if (PackedWeight::code_bits(source) == 5) {
    for (int w = 0; w < 2; ++w) {
      uint32_t word;
      std::memcpy(&word, g + 16 * blocks + 4 * (2 * (k / 2) + w), 4);
      for (int i = 0; i < 16; ++i) code[16 * w + i] |= static_cast<uint8_t>(((word >> (16 * (k % 2) + i)) & 1) << 4);
    }
  }
  uint16_t h0, h1;
  std::memcpy(&h0, g + L.d, 2);
  std::memcpy(&h1, g + L.d + 2, 2);
  const float D = f16_to_fp32(h0), C = f16_to_fp32(h1);
  const uint8_t* sc = g + L.d + 4;
  switch (PackedWeight::scales_of(source)) {
    case PackedScales::Block:
      std::memcpy(&h0, g + L.d + 2 * k, 2);
      std::memcpy(&h1, g + L.c + 2 * k, 2);
      d[0] = d[1] = f16_to_fp32(h0);
      c[0] = c[1] = f16_to_fp32(h1);
      break;
    case PackedScales::Super:
      d[0] = d[1] = D * static_cast<float>(sc[k]);
      c[0] = c[1] = C * static_cast<float>(sc[4 + k]);
      break;
    case PackedScales::SuperHalf:
      for (int h = 0; h < 2; ++h) {
        const auto s = static_cast<float>(static_cast<int8_t>(sc[4 * h + k]));
        d[h] = D * s;
        c[h] = C * s;
      }
      break;
  }
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
  // put_codes writes each block's half of a fifth-bit word or its crumbs of the sixth-bit bytes, so those words start at zero (a tail
  // with one block in its last half leaves the other half as it found it); other formats write
  // every byte of a row and need only the padding cleared.
  if (code_bits() == 5 || code_bits() == 6)
    std::memset(data_, 0, total);
  else
    std::memset(data_ + bytes(), 0, total - bytes());
}

namespace {
bool packed_format(DType wt) {
  switch (wt) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q3_K: return true;
    default: return false;
  }
}
}  // namespace

bool packing_pays(DType wt) {
  const bool format = packed_format(wt);
  const DotInt8 dot = dot_int8_for(active_cpu_isa());
  return format && dot != DotInt8::Scalar;
}

std::unique_ptr<PackedWeight> pack_weight(DType wt, const void* W, int64_t rows, int64_t cols, PackedStore* store) {
  const bool k_quant = PackedWeight::scales_of(wt) != PackedScales::Block;
  if (!packed_format(wt) || rows <= 0 || cols <= 0 || cols % dtype_block_elems(wt) != 0) return nullptr;
  auto p = std::make_unique<PackedWeight>(wt, rows, cols, store);
  const size_t src_row_bytes = dtype_row_bytes(wt, cols);
  const int64_t n_groups = (cols / 32 + kQuad - 1) / kQuad;
  uint8_t code[32];
  uint16_t d, c;
  KQuad kq;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(W) + src_row_bytes * static_cast<size_t>(r);
    for (int64_t q = 0; q < n_groups; ++q) {
      const Group g = group_of(wt, cols, q);
      uint8_t* dst = p->row(r) + g.offset;
      if (k_quant) {  // whole super-blocks: every group is a quad
        if (!unpack_gguf_k_quad(wt, src, q, kq)) return nullptr;
        for (int k = 0; k < kQuad; ++k) put_codes(wt, dst, kQuad, k, kq.code[k]);
        const GroupLayout L = group_layout(wt, kQuad);
        std::memcpy(dst + L.d, &kq.D, 2);
        std::memcpy(dst + L.d + 2, &kq.C, 2);
        std::memcpy(dst + L.d + 4, kq.sc, 8);
        continue;
      }
      for (int k = 0; k < g.blocks; ++k) {
        if (!unpack_gguf_block(wt, src, q * kQuad + k, code, d, c)) return nullptr;
        put_block(wt, dst, g.blocks, k, code, d, c);
      }
    }
  }
  return p;
}

int64_t act_split_quads(int64_t cols) { return (cols / 32 + kQuad - 1) / kQuad; }

void split_act(const ActQ8& x, int64_t n_tokens, int64_t cols, int8_t* q, float* dx, float* s, float* sh) {
  const int64_t n_blocks = cols / 32, quads = act_split_quads(cols);
  std::memset(q, 0, static_cast<size_t>(n_tokens * quads * 128));
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(n_tokens * quads * 16));
  std::memset(s, 0, sizeof(float) * static_cast<size_t>(n_tokens * quads * 4));
  std::memset(sh, 0, sizeof(float) * static_cast<size_t>(n_tokens * quads * 8));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < n_blocks; ++j) {
      const int64_t quad = j / kQuad, k = j % kQuad, base = quad * n_tokens + t;
      const int8_t* xq = x.q + t * cols + 32 * j;
      const float d = x.d[t * n_blocks + j];
      std::memcpy(q + 128 * base + 16 * k, xq, 16);
      std::memcpy(q + 128 * base + 64 + 16 * k, xq + 16, 16);
      for (int l = 0; l < 4; ++l) dx[16 * base + 4 * k + l] = d;
      s[4 * base + k] = x.s[t * n_blocks + j];
      for (int h = 0; h < 2; ++h) {
        int32_t sum = 0;
        for (int i = 0; i < 16; ++i) sum += xq[16 * h + i];
        sh[8 * base + 4 * h + k] = d * static_cast<float>(sum);
      }
    }
}

void gemv_packed_rows_scalar(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end) {
  const PackedWeight& w = *a.w;
  const bool halves = w.scales() == PackedScales::SuperHalf;
  const int64_t n_groups = act_split_quads(w.cols());
  uint8_t code[32];
  float d[2], c[2];
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      float y = 0.0f;
      for (int64_t q = 0; q < n_groups; ++q) {
        const Group g = group_of(w.source(), w.cols(), q);
        const int64_t base = a.x.entry(t, q);
        for (int k = 0; k < g.blocks; ++k) {
          get_block(w.source(), w.row(r) + g.offset, g.blocks, k, code, d, c);
          int32_t dot[2] = {0, 0};
          for (int i = 0; i < 16; ++i) {
            dot[0] += code[i] * a.x.q[128 * base + 16 * k + i];
            dot[1] += code[i + 16] * a.x.q[128 * base + 64 + 16 * k + i];
          }
          const float dx = a.x.dx[16 * base + 4 * k];
          if (halves)
            y += d[0] * dx * static_cast<float>(dot[0]) + d[1] * dx * static_cast<float>(dot[1]) +
                 c[0] * a.x.sh[8 * base + k] + c[1] * a.x.sh[8 * base + 4 + k];
          else
            y += d[0] * dx * static_cast<float>(dot[0] + dot[1]) + c[0] * a.x.s[4 * base + k];
        }
      }
      float& out = a.Y[t * a.ldy + r];
      out = a.accumulate ? out + y : y;
    }
}

}  // namespace hg::cpu
