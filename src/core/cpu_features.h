#pragma once
// What this CPU can execute, read once with cpuid/xgetbv. Kernels pick their
// implementation from this at run time, so the binary is built without -march.
#include <string>

namespace rinfer {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx_vnni = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  std::string vendor;      // cpuid leaf 0: "AuthenticAMD", "GenuineIntel", ...
  std::string model_name;  // e.g. "Intel(R) Xeon(R) ..." from /proc/cpuinfo or cpuid brand
  // cpuid leaf 1's display family (the extended field folded in): AMD Zen 4
  // is 0x19, Zen 5 0x1A. Kernels tune by it, never choose instructions by it.
  int family = 0;
  // cpuid leaf 1's display model (the extended field folded in for families
  // 6 and 0xF): Intel Ice Lake-SP is 0x6A. Tuning only, as family.
  int model = 0;

  bool has_avx2_fma() const { return avx2 && fma && f16c; }
  bool has_avx512_core() const { return avx512f && avx512bw && avx512vl && avx512dq && has_avx2_fma(); }
  bool has_avx512_bf16() const { return has_avx512_core() && avx512_bf16; }
  bool is_amd() const { return vendor == "AuthenticAMD"; }
  bool is_intel() const { return vendor == "GenuineIntel"; }
  std::string summary() const;  // "avx512 bf16 vnni amx" style list
};

const CpuFeatures& cpu_features();

}  // namespace rinfer
