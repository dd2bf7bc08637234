// The ggml tensor types: block layouts of all of them (so that any valid GGUF file can be
// bounds-checked and its metadata read), and the mapping to the DTypes the engine computes on.
#include <array>

#include "model/gguf.h"

namespace hg::gguf {

namespace {

struct GgmlType {
  const char* name;      // nullptr: number unused by ggml
  int block_elems;
  int block_bytes;
};

// Indexed by ggml_type; numbers 4, 5 and 31..33, 36..38 were retired by ggml.
constexpr std::array<GgmlType, 40> kGgmlTypes = {{
    {"f32", 1, 4},        {"f16", 1, 2},        {"q4_0", 32, 18},    {"q4_1", 32, 20},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {"q5_0", 32, 22},    {"q5_1", 32, 24},
    {"q8_0", 32, 34},     {"q8_1", 32, 36},     {"q2_k", 256, 84},   {"q3_k", 256, 110},
    {"q4_k", 256, 144},   {"q5_k", 256, 176},   {"q6_k", 256, 210},  {"q8_k", 256, 292},
    {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74},  {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},   {"iq3_s", 256, 110},  {"iq2_s", 256, 82},  {"iq4_xs", 256, 136},
    {"i8", 1, 1},         {"i16", 1, 2},        {"i32", 1, 4},       {"i64", 1, 8},
    {"f64", 1, 8},        {"iq1_m", 256, 56},   {"bf16", 1, 2},      {nullptr, 0, 0},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {"tq1_0", 256, 54},  {"tq2_0", 256, 66},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {nullptr, 0, 0},     {"mxfp4", 32, 17},
}};

}  // namespace

// Used by gguf.cpp for bounds checks; false for numbers ggml does not define.
bool ggml_type_layout(uint32_t ggml_type, int* block_elems, int* block_bytes) {
  if (ggml_type >= kGgmlTypes.size() || kGgmlTypes[ggml_type].name == nullptr) return false;
  *block_elems = kGgmlTypes[ggml_type].block_elems;
  *block_bytes = kGgmlTypes[ggml_type].block_bytes;
  return true;
}

std::string ggml_type_name(uint32_t ggml_type) {
  if (ggml_type >= kGgmlTypes.size() || kGgmlTypes[ggml_type].name == nullptr)
    return "unknown(" + std::to_string(ggml_type) + ")";
  return kGgmlTypes[ggml_type].name;
}

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 30: return DType::BF16;
    case 8: return DType::Q8_0;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 12: return DType::Q4_K;
    case 14: return DType::Q6_K;
    default: return std::nullopt;
  }
}

uint32_t ggml_type_from_dtype(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 30;
    case DType::Q8_0: return 8;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q4_K: return 12;
    case DType::Q6_K: return 14;
  }
  return 0;
}

}  // namespace hg::gguf
