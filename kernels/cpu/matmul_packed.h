// Weights repacked once at load for the decode GEMV (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
// K-quants Q4_K, Q5_K, Q6_K, Q3_K), read by the AVX512-VNNI, AVX-VNNI and AVX2 kernels.
//
// Why: in GGUF's layout every 32-block carries its own f16 scale (and Q4_1 its minimum) in front
// of its codes, so a GEMV that reads the blocks as stored spends most of its instructions on one
// block at a time: two scalar f16 conversions, broadcasts, a 256-bit dot and a scalar FMA per 32
// weights. Decode of a small model is then bound by those instructions, not by memory. Repacked,
// four blocks ("a quad") are one 512-bit dot with their four scales converted by one instruction,
// about a third of the instructions per weight, at the same bytes per weight. The K-quants are
// worse as stored (6-bit scales packed in 12 bytes, codes spread over two or three arrays) and
// gain the most.
//
// Every format is read as `value = code * d + c`, code unsigned, d and c constant over a block of
// 32 values ("block" scales) or over each 16-value half of it ("half" scales):
//   Q4_1: code = nibble, c = m;   Q4_0: code = nibble, c = -8 d;   Q8_0: code = q + 128, c = -128 d;
//   Q5_1: code = q5, c = m;       Q5_0: code = q5, c = -16 d;
//   Q4_K, Q5_K: code = q4 / q5, d = D sc, c = -Dmin m per 32-block (sc, m: its 6-bit scale and min);
//   Q6_K: code = q6, d = D sc, c = -32 D sc per half (sc: the half's int8 scale);
//   Q3_K: code = q3 (the two low bits plus 4 where the high bit is set), d = D sc, c = -4 D sc per
//         half (sc: the half's 6-bit scale minus 32).
// With x ~ dx * qx (ActQ8), block b of a row adds d_b dx_b Σ code·qx + c_b s_b, one vpdpbusd
// (u8 x s8) per half-quad and one FMA of the c's with the activation block sums s; with half
// scales each half's dot takes its own d, and its c meets the half's activation sum.
//
// Layout of a row (cols / 32 = 4 n_quads + tail blocks), rows back to back at row_bytes:
//   each quad:  codes of blocks 0..3 (see below), then the scales:
//     block scales (Q4_0 .. Q8_0): d[4] and c[4] as f16;
//     K-quants (12 bytes; a quad is half a super-block of 256): the super-block's D and C as f16
//       (C = -Dmin for Q4_K / Q5_K, -32 D for Q6_K, -4 D for Q3_K), then Q4_K / Q5_K: u8 sc[4],
//       u8 m[4] (d_b = D sc_b, c_b = C m_b); Q6_K / Q3_K: int8 sc[8], the lo halves' of blocks
//       0..3 then the hi halves' (d_h = D sc_h, c_h = C sc_h). The products are formed in fp32,
//       where they are exact, so a packed K-quant computes what its GGUF blocks hold;
//   the tail (1..3 blocks, when cols / 32 is not a multiple of 4; never for K-quants, whose rows
//   are whole super-blocks): the same with `tail` blocks.
// Codes: lane order "lo, hi": the first half holds values 0..15 of each block in turn, the second
// values 16..31. Nibble formats keep GGUF's bytes (byte i of a block = value i low, value i + 16
// high), so one 64-byte load is both halves: lo = bytes & 15, hi = bytes >> 4. Q8_0 stores the
// two halves as 64 bytes each (a tail: 16 tail bytes per half). Five-bit formats (Q5_0, Q5_1,
// Q5_K) keep the low four bits as nibbles and add a plane of the fifth bits after them: per half
// of the quad (blocks 2h, 2h+1) two 32-bit words, one per 32-byte lane register the kernel builds:
// word "lo" has bit i = value i of block 2h and bit 16 + i = value i of block 2h + 1 (i < 16); word
// "hi" the same for values 16 + i. A tail has the words of the halves it has. Six-bit codes (Q6_K,
// whole quads only) keep the nibbles and add their two high bits as 32 bytes of crumbs, one byte
// per byte of the four 32-byte lane registers an AVX2 kernel builds (lo and hi of blocks 0-1, lo
// and hi of blocks 2-3): byte 16 (k % 2) + i % 16 holds value i of block k at bit 4 (k / 2) +
// 2 (i / 16), so each register takes its crumbs with one shift and one mask (GGUF's Q6_K keeps
// crumbs too, in an order no register wants). Q3_K's three-bit codes are nibbles.
// The activations take the same order once per matmul (ActSplit), padded with zeros to whole quads.
//
// c = -8 d, -16 d and -128 d (and C = -32 D, -4 D) are exact in f16 (a power-of-two scaling)
// unless they overflow; a tensor with a scale that large is not packed and keeps the GGUF path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "hybridgen/dtype.h"
#include "kernels/cpu/matmul_internal.h"

namespace hg::cpu {

// How a packed group stores its scales (see the layout above).
enum class PackedScales {
  Block,      // f16 d[n], c[n]: one d and c per 32-block
  Super,      // Q4_K, Q5_K: f16 D, C, u8 sc[4], m[4]: d = D sc, c = C m per 32-block
  SuperHalf,  // Q6_K, Q3_K: f16 D, C, int8 sc[8]: d = D sc, c = C sc per half-block of 16
};

// Memory for packed weights: chunks of 32 MiB (or a tensor's own size), 2 MiB-aligned with
// transparent huge pages asked for (madvise), handed out in 64-byte slices. Decode streams every
// packed byte per token; on 4 KiB pages each page is a TLB miss on the way (SmolLM2 on Zen 4:
// 12-20% more tokens/s with huge pages). Thread-safe; slices live as long as the store.
class PackedStore {
 public:
  PackedStore() = default;
  ~PackedStore();
  PackedStore(const PackedStore&) = delete;
  PackedStore& operator=(const PackedStore&) = delete;
  uint8_t* allocate(size_t bytes);

 private:
  struct Chunk {
    uint8_t* base;
    size_t size, used;
  };
  std::mutex mutex_;
  std::vector<Chunk> chunks_;  // the last one takes small slices
};

class PackedWeight {
 public:
  // Memory from `store` when given (it must outlive this), else owned.
  PackedWeight(DType source, int64_t rows, int64_t cols, PackedStore* store = nullptr);

  DType source() const { return source_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int code_bits() const { return code_bits(source_); }  // 4, 5, 6 or 8
  PackedScales scales() const { return scales_of(source_); }
  size_t row_bytes() const { return row_bytes_; }
  size_t bytes() const { return row_bytes_ * static_cast<size_t>(rows_); }
  const uint8_t* row(int64_t r) const { return data_ + row_bytes_ * static_cast<size_t>(r); }
  uint8_t* row(int64_t r) { return data_ + row_bytes_ * static_cast<size_t>(r); }

  static constexpr int code_bits(DType source) {
    switch (source) {
      case DType::Q8_0: return 8;
      case DType::Q6_K: return 6;
      case DType::Q5_0:
      case DType::Q5_1:
      case DType::Q5_K: return 5;
      default: return 4;
    }
  }
  static constexpr PackedScales scales_of(DType source) {
    switch (source) {
      case DType::Q4_K:
      case DType::Q5_K: return PackedScales::Super;
      case DType::Q6_K:
      case DType::Q3_K: return PackedScales::SuperHalf;
      default: return PackedScales::Block;
    }
  }
  // Bytes of the codes of `blocks` blocks (a quad: 4) of a format with codes of `bits` bits, the
  // fifth-bit plane or the sixth bits' crumbs included.
  static constexpr size_t code_bytes_of_width(int bits, int blocks) {
    const auto n = static_cast<size_t>(blocks);
    switch (bits) {
      case 8: return 32 * n;
      case 6: return 24 * n;
      case 5: return 16 * n + 8 * ((n + 1) / 2);
      default: return 16 * n;
    }
  }
  static constexpr size_t code_bytes(DType source, int blocks) { return code_bytes_of_width(code_bits(source), blocks); }
  // Bytes of the scales after the codes of a group of `blocks` blocks.
  static constexpr size_t scale_bytes(PackedScales scales, int blocks) {
    return scales == PackedScales::Block ? 4 * static_cast<size_t>(blocks) : 12;
  }
  // Bytes of a whole quad of a format with codes of `bits` bits.
  static constexpr size_t quad_bytes(int bits, PackedScales scales) {
    return code_bytes_of_width(bits, 4) + scale_bytes(scales, 4);
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  DType source_;
  int64_t rows_, cols_;
  size_t row_bytes_;
  std::unique_ptr<uint8_t, Free> owned_;
  uint8_t* data_;
};

// Whether the decode GEMV of `wt` should take a packed copy on this CPU: a format above, and a
// vector int8 dot (AVX2, AVX-VNNI or AVX512-VNNI) at the active ISA level.
bool packing_pays(DType wt);
// The packed copy of W[rows, cols] (GGUF blocks of `wt`), or null for another format or when a
// scale would overflow (see above). Independent of the CPU (the scalar twin reads it anywhere).
std::unique_ptr<PackedWeight> pack_weight(DType wt, const void* W, int64_t rows, int64_t cols,
                                          PackedStore* store = nullptr);

// Activations in the packed order, quad by quad and within a quad token by token (entry
// quad * tokens + t), so that a tile of T tokens reads its tokens' parts of a quad at constant
// offsets from one pointer: q [128 per entry] (lo half, hi half of the quad), dx [16] (each block's
// scale repeated over its four int32 lanes), s [4] (block sums) and sh [8] (half-block sums: the lo
// halves of blocks 0..3, then the hi halves; for the half scales), zero past the last block.
struct ActSplit {
  const int8_t* q;
  const float* dx;
  const float* s;
  const float* sh;
  int64_t tokens;  // entries per quad (act_split_quads(cols) quads)
  int64_t entry(int64_t t, int64_t quad) const { return quad * tokens + t; }
};
int64_t act_split_quads(int64_t cols);
// Reorders X quantized to int8 (ActQ8 of [n_tokens, cols]) into ActSplit's buffers (tokens =
// n_tokens), which hold n_tokens * act_split_quads(cols) * {128, 16, 4, 8} elements.
void split_act(const ActQ8& x, int64_t n_tokens, int64_t cols, int8_t* q, float* dx, float* s, float* sh);

// One packed GEMV call: Y[t, r] (+)= W[r, :] · dequant(x[t]), r in [row_begin, row_end).
struct GemvPackedArgs {
  const PackedWeight* w;
  ActSplit x;
  int64_t n_tokens;
  float* Y;  // Y[t * ldy + r]
  int64_t ldy;
  bool accumulate;
};
// Scalar twin (test oracle, and the path when a packed weight meets a lower ISA level in tests).
void gemv_packed_rows_scalar(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end);
void gemv_packed_rows_avx512vnni(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end);
void gemv_packed_rows_avx2(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end);
void gemv_packed_rows_avxvnni(const GemvPackedArgs& a, int64_t row_begin, int64_t row_end);

}  // namespace hg::cpu
