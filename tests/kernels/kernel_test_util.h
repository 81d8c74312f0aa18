#pragma once
// Helpers shared by the kernel tests: the ISAs this CPU can run, random data
// in any weight dtype, and an ISA guard that restores the default.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/prefetch_tuning.h"

namespace rinfer::kernels::cpu::testing {

// Every implementation this CPU supports: Scalar, then Avx2, Avx512 as available.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (int i = 0; i <= int(best_isa()); ++i) v.push_back(Isa(i));
  return v;
}

// Pins an ISA for the scope, then goes back to the best one.
struct IsaScope {
  explicit IsaScope(Isa isa) { force_isa(isa); }
  ~IsaScope() { force_isa(best_isa()); }
};

// Pins a decode prefetch profile (prefetch_tuning.h) for a scope.
struct PrefetchScope {
  explicit PrefetchScope(const char* name) { force_decode_prefetch(name); }
  ~PrefetchScope() { force_decode_prefetch(nullptr); }
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
