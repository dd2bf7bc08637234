// The ggml tensor types: block layouts of all of them (so that any valid GGUF file can be
// bounds-checked and its metadata read), and the mapping to the DTypes the engine computes on.
#include <array>
#include <utility>

#include "model/gguf.h"
#include "util/strings.h"

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

// ggml type numbers of the DTypes (the inverse of dtype_from_ggml).
constexpr std::pair<DType, uint32_t> kDTypeGgml[] = {
    {DType::F32, 0},   {DType::F16, 1},   {DType::BF16, 30},   {DType::Q8_0, 8},   {DType::Q4_0, 2},
    {DType::Q4_1, 3},  {DType::Q5_0, 6},  {DType::Q5_1, 7},    {DType::IQ4_NL, 20}, {DType::Q2_K, 10},
    {DType::Q3_K, 11}, {DType::Q4_K, 12}, {DType::Q5_K, 13},   {DType::Q6_K, 14},  {DType::IQ4_XS, 23},
};

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const auto& [t, g] : kDTypeGgml)
    if (g == ggml_type) return t;
  return std::nullopt;
}

uint32_t ggml_type_from_dtype(DType t) {
  for (const auto& [d, g] : kDTypeGgml)
    if (d == t) return g;
  return 0;
}

std::string supported_ggml_types() {
  return join(kDTypeGgml, ", ", [](const auto& dtype_ggml) { return std::string(dtype_name(dtype_ggml.first)); });
}

}  // namespace hg::gguf
