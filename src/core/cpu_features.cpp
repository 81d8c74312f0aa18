#include "core/cpu_features.h"

#include <cpuid.h>

#include <cstring>

namespace rinfer {

namespace {
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const int base_family = int((a >> 8) & 0xf);
  f.family = base_family == 0xf ? base_family + int((a >> 20) & 0xff) : base_family;
  const int base_model = int((a >> 4) & 0xf);
  f.model = base_family == 0x6 || base_family == 0xf ? base_model + (int((a >> 16) & 0xf) << 4) : base_model;
  bool osxsave = c & (1u << 27);
  bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool ymm_os = (xcr0 & 0x6) == 0x6;
  bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  bool amx_os = (xcr0 & (3ull << 17)) == (3ull << 17);
  if (!(avx && ymm_os)) f.fma = f.f16c = false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm_os && (b & (1u << 5));
    if (zmm_os) {
      f.avx512f = b & (1u << 16);
      f.avx512dq = b & (1u << 17);
      f.avx512bw = b & (1u << 30);
      f.avx512vl = b & (1u << 31);
      f.avx512_vnni = c & (1u << 11);
    }
    if (amx_os) {
      f.amx_bf16 = d & (1u << 22);
      f.amx_tile = d & (1u << 24);
      f.amx_int8 = d & (1u << 25);
    }
    unsigned a1, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
      f.avx_vnni = ymm_os && (a1 & (1u << 4));
      f.avx512_bf16 = zmm_os && (a1 & (1u << 5));
    }
  }
  char vendor[13] = {0};
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
  }
  f.vendor = vendor;
  char brand[49] = {0};
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002u + i, &a, &b, &c, &d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
  }
  f.model_name = brand;
  while (!f.model_name.empty() && f.model_name.back() == ' ') f.model_name.pop_back();
  while (!f.model_name.empty() && f.model_name.front() == ' ') f.model_name.erase(0, 1);
  return f;
}
}  // namespace

std::string CpuFeatures::summary() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(has_avx2_fma(), "avx2");
  add(has_avx512_core(), "avx512");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vnni, "avx512_vnni");
  add(amx_tile, "amx");
  return s.empty() ? "scalar" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace rinfer
