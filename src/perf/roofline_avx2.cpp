// AVX2 probes for roofline.cpp (see roofline_avx512.cpp): f32 FMA, and the
// int8 products of the W4A8 prefill GEMM (qgemm_avx2.cpp: vpmaddubsw, its
// pair sums added in int16). No BF16 dot-product instruction at this level.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace rinfer::perf::avx2 {

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

// 6 chains of vpmaddubsw + vpaddw, the GEMM's inner step (32 multiply-adds
// each). Inline assembly so that the compiler keeps one chain per
// accumulator (it reassociates integer adds: qgemm_avx2.cpp).
double peak_loop_maddubs(int64_t iters) {
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, t0, t1, t2, t3, t4, t5;
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(-1);
#define RINFER_MADDUBS(i) "vpmaddubsw %[b], %[a], %[t" #i "]\n\tvpaddw %[t" #i "], %[c" #i "], %[c" #i "]\n\t"
  for (int64_t i = 0; i < iters; ++i)
    __asm__(RINFER_MADDUBS(0) RINFER_MADDUBS(1) RINFER_MADDUBS(2) RINFER_MADDUBS(3) RINFER_MADDUBS(4)
                RINFER_MADDUBS(5)
            : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
              [t0] "=&x"(t0), [t1] "=&x"(t1), [t2] "=&x"(t2), [t3] "=&x"(t3), [t4] "=&x"(t4), [t5] "=&x"(t5)
            : [a] "x"(a), [b] "x"(b));
#undef RINFER_MADDUBS
  const __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
                                     _mm256_add_epi16(c4, c5));
  alignas(32) int16_t t[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
  return double(t[0]) + double(t[15]);
}

int64_t peak_loop_maddubs_macs() { return 6 * 32; }

// Streams [p, p + bytes) (32-byte aligned, bytes a multiple of 256) once, as
// four concurrent streams (its quarters, one 64-byte line of each per
// iteration), like the AVX-512 probe.
uint64_t read_stream(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m256i*>(p);
  const size_t q = bytes / 128;  // 32-byte vectors per quarter (an even number)
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < q; i += 2) {
    s0 = _mm256_xor_si256(s0, _mm256_xor_si256(_mm256_load_si256(v + i), _mm256_load_si256(v + i + 1)));
    s1 = _mm256_xor_si256(s1, _mm256_xor_si256(_mm256_load_si256(v + q + i), _mm256_load_si256(v + q + i + 1)));
    s2 = _mm256_xor_si256(s2,
                          _mm256_xor_si256(_mm256_load_si256(v + 2 * q + i), _mm256_load_si256(v + 2 * q + i + 1)));
    s3 = _mm256_xor_si256(s3,
                          _mm256_xor_si256(_mm256_load_si256(v + 3 * q + i), _mm256_load_si256(v + 3 * q + i + 1)));
  }
  const __m256i s = _mm256_xor_si256(_mm256_xor_si256(s0, s1), _mm256_xor_si256(s2, s3));
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
  return t[0] ^ t[3];
}

}  // namespace rinfer::perf::avx2
