// AVX2 int8 quantization of a row (quantize_row_i8; store_kv runs it on each
// head of an INT8 KV cache).
#include "kernels/cpu/common_avx2.h"

namespace rinfer::kernels::cpu::avx2 {

void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 mx = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), mx);  // NaN ignored
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float amax = 0.0f;
  for (float l : lanes) amax = amax < l ? l : amax;
  for (; i < n; ++i) {
    const float a = fabsf(x[i]);
    amax = amax < a ? a : amax;
  }
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);  // NaN -> -127
    const __m256i v = _mm256_cvtps_epi32(t);
    const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(p16, p16));
  }
  for (; i < n; ++i) {
    float t = x[i] * inv;
    t = t > -127.0f ? t : -127.0f;
    t = t < 127.0f ? t : 127.0f;
    q[i] = int8_t(nearbyintf(t));
  }
  *scale = amax / 127.0f;
}

}  // namespace rinfer::kernels::cpu::avx2
