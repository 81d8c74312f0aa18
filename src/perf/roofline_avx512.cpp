// AVX-512 probes for roofline.cpp: independent accumulator chains (more than
// latency x pipes) so the loop runs at the instruction's throughput; the
// result is returned so the work cannot be optimized away.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace rinfer::perf::avx512 {

namespace {
constexpr int kChains = 12;

// (Not _mm512_reduce_add_*: GCC 12 warns about its uninitialized temporaries.)
double lanes_sum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  double s = 0;
  for (float x : t) s += x;
  return s;
}
}  // namespace

// Returns a value that depends on every iteration; kind: 0 fma, 1 bf16 dot, 2 int8 dot.
double peak_loop(int kind, int64_t iters) {
  if (kind == 0) {
    __m512 acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
    for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
      for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    __m512 s = acc[0];
    for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
    return lanes_sum(s);
  }
  if (kind == 1) {
    __m512 acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(float(j) * 1e-3f);
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // BF16 1.0
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x2f80);  // BF16 2^-32
    for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
      for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
    __m512 s = acc[0];
    for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
    return lanes_sum(s);
  }
  __m512i acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_epi32(j);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(-1);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  __m512i s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_epi32(s, acc[j]);
  alignas(64) int32_t t[16];
  _mm512_store_si512(t, s);
  double sum = 0;
  for (int32_t x : t) sum += x;
  return sum;
}

// Multiply-adds one peak_loop iteration performs.
int64_t peak_loop_macs(int kind) { return kChains * (kind == 0 ? 16 : kind == 1 ? 32 : 64); }

// Streams [p, p + bytes) (64-byte aligned, bytes a multiple of 256) once, as
// four concurrent streams (its quarters, one line of each per iteration):
// a core reads more with several streams in flight than with one (roofline.h).
uint64_t read_stream(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m512i*>(p);
  const size_t q = bytes / 256;  // lines per quarter
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < q; ++i) {
    s0 = _mm512_xor_si512(s0, _mm512_load_si512(v + i));
    s1 = _mm512_xor_si512(s1, _mm512_load_si512(v + q + i));
    s2 = _mm512_xor_si512(s2, _mm512_load_si512(v + 2 * q + i));
    s3 = _mm512_xor_si512(s3, _mm512_load_si512(v + 3 * q + i));
  }
  const __m512i s = _mm512_xor_si512(_mm512_xor_si512(s0, s1), _mm512_xor_si512(s2, s3));
  alignas(64) uint64_t t[8];
  _mm512_store_si512(t, s);
  return t[0] ^ t[3] ^ t[7];
}

}  // namespace rinfer::perf::avx512
