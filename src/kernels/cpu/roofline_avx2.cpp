// AVX2 probes for roofline.cpp (see roofline_avx512.cpp). Only f32 FMA: the
// AVX2 matmul paths have no BF16 or INT8 dot-product instruction.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace rinfer::kernels::cpu::avx2 {

namespace {
constexpr int kChains = 12;
}

double peak_loop_fma(int64_t iters) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(float(j) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float t[8];
  _mm256_store_ps(t, s);
  return double(t[0] + t[7]);
}

int64_t peak_loop_fma_macs() { return kChains * 8; }

uint64_t read_stream(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m256i*>(p);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < bytes / 32; i += 8) {
    s0 = _mm256_xor_si256(s0, _mm256_xor_si256(_mm256_load_si256(v + i), _mm256_load_si256(v + i + 1)));
    s1 = _mm256_xor_si256(s1, _mm256_xor_si256(_mm256_load_si256(v + i + 2), _mm256_load_si256(v + i + 3)));
    s2 = _mm256_xor_si256(s2, _mm256_xor_si256(_mm256_load_si256(v + i + 4), _mm256_load_si256(v + i + 5)));
    s3 = _mm256_xor_si256(s3, _mm256_xor_si256(_mm256_load_si256(v + i + 6), _mm256_load_si256(v + i + 7)));
  }
  const __m256i s = _mm256_xor_si256(_mm256_xor_si256(s0, s1), _mm256_xor_si256(s2, s3));
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
  return t[0] ^ t[3];
}

}  // namespace rinfer::kernels::cpu::avx2
