#pragma once
// Helpers shared by the kernel tests: the ISAs this CPU can run, random data
// in any weight dtype, and an ISA guard that restores the default.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "perf/decode_tuning.h"

namespace rinfer::kernels::cpu::testing {

// A kernel level: an ISA and, at the AVX2 level, whether the int8 prefill
// GEMM takes AVX-VNNI (avx_vnni_active in ops.h). Converts to its Isa.
struct KernelLevel {
  Isa isa;
  bool avx_vnni;
  KernelLevel(Isa i, bool vnni = false) : isa(i), avx_vnni(vnni) {}  // NOLINT: an Isa is a level
  operator Isa() const { return isa; }                                // NOLINT
};
inline const char* isa_name(const KernelLevel& l) { return l.avx_vnni ? "avx2+avxvnni" : cpu::isa_name(l.isa); }

// Every implementation this CPU supports: Scalar, then Avx2 (and Avx2 with
// AVX-VNNI where the CPU has it), Avx512 as available.
inline std::vector<KernelLevel> supported_isas() {
  std::vector<KernelLevel> v;
  for (int i = 0; i <= int(best_isa()); ++i) {
    v.emplace_back(Isa(i));
    if (Isa(i) == Isa::Avx2 && rinfer::cpu_features().avx_vnni) v.emplace_back(Isa::Avx2, true);
  }
  return v;
}

// Pins a kernel level for the scope, then goes back to the best one.
struct IsaScope {
  explicit IsaScope(KernelLevel l) {
    force_isa(l.isa);
    force_avx_vnni(l.avx_vnni ? 1 : 0);
  }
  ~IsaScope() {
    force_isa(best_isa());
    force_avx_vnni(-1);
  }
};

// Pins a decode prefetch profile (perf/decode_tuning.h) for a scope.
struct PrefetchScope {
  explicit PrefetchScope(const char* name) { perf::force_decode_prefetch(name); }
  ~PrefetchScope() { perf::force_decode_prefetch(nullptr); }
};

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Values stored as `dt` (F32, F16, BF16) plus their exact f32 values.
struct TypedData {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // bytes converted back to f32 (exact)
  const void* data() const { return bytes.data(); }
  void* data() { return bytes.data(); }
};

inline TypedData make_typed(DType dt, const std::vector<float>& src) {
  TypedData t;
  t.dtype = dt;
  t.bytes.resize(src.size() * dtype_size(dt));
  convert_from_f32(dt, src.data(), t.bytes.data(), src.size());
  t.values.resize(src.size());
  convert_to_f32(dt, t.bytes.data(), t.values.data(), src.size());
  return t;
}

inline const char* dt_name(DType dt) { return dt == DType::F32 ? "f32" : dt == DType::F16 ? "f16" : "bf16"; }

}  // namespace rinfer::kernels::cpu::testing
