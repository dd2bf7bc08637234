#include "device/cpu_info.h"

#include <cpuid.h>
#include <sched.h>

#include <cstring>
#include <thread>

#include "kernels/cpu/cpu_isa.h"

namespace hg {

namespace {

std::string brand_string() {
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext < 0x80000004u) return "unknown CPU";
  char brand[49] = {};
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    unsigned r[4] = {};
    __get_cpuid(0x80000002u + leaf, &r[0], &r[1], &r[2], &r[3]);
    std::memcpy(brand + 16 * leaf, r, sizeof r);
  }
  std::string s(brand);
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "unknown CPU" : s.substr(b, e - b + 1);
}

// From CPUID directly (leaves 1 and 7): compilers' __builtin_cpu_supports know different subsets.
std::vector<std::string> vector_features() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  std::vector<std::string> out;
  unsigned c1 = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) c1 = c;
  unsigned b7 = 0, c7 = 0, d7 = 0, a7_1 = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    b7 = b, c7 = c, d7 = d;
    __cpuid_count(7, 1, a, b, c, d);
    a7_1 = a;
  }
  const struct {
    unsigned reg;
    int bit;
    const char* name;
  } bits[] = {{b7, 5, "avx2"},          {c1, 12, "fma"},         {c1, 29, "f16c"},      {b7, 16, "avx512f"},
              {b7, 17, "avx512dq"},     {b7, 30, "avx512bw"},    {b7, 31, "avx512vl"},  {c7, 11, "avx512_vnni"},
              {a7_1, 5, "avx512_bf16"}, {d7, 23, "avx512_fp16"}, {a7_1, 4, "avx_vnni"}, {d7, 25, "amx_int8"},
              {d7, 22, "amx_bf16"}};
  for (const auto& f : bits)
    if ((f.reg >> f.bit) & 1u) out.emplace_back(f.name);
  return out;
}

void identify(CpuInfo& info) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  info.vendor = vendor;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  const int base_family = static_cast<int>((a >> 8) & 0xf);
  info.family = base_family == 0xf ? base_family + static_cast<int>((a >> 20) & 0xff) : base_family;
  info.model_number = static_cast<int>((a >> 4) & 0xf);
  if (base_family == 0x6 || base_family == 0xf) info.model_number += static_cast<int>(((a >> 16) & 0xf) << 4);
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo i;
    i.model = brand_string();
    identify(i);
    i.usable_cpus = usable_cpus();
    i.isa = cpu::cpu_isa_label(cpu::active_cpu_isa());
    i.int8_dot = cpu::dot_int8_label(cpu::dot_int8_for(cpu::active_cpu_isa()));
    i.prefill_gemm = cpu::prefill_gemm_label(cpu::prefill_gemm_for(cpu::active_cpu_isa()));
    i.features = vector_features();
    return i;
  }();
  return info;
}

std::string cpu_summary() {
  const CpuInfo& i = cpu_info();
  return i.model + " (" + i.vendor + " family " + std::to_string(i.family) + " model " +
         std::to_string(i.model_number) + ", " + std::to_string(i.usable_cpus) + " CPUs), kernels " + i.isa +
         ", int8 dot " + i.int8_dot + ", prefill gemm " + i.prefill_gemm;
}

}  // namespace hg
