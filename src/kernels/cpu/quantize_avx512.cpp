// AVX-512 int8 quantization of a row (quantize_row_i8; store_kv runs it on
// each head of an INT8 KV cache).
#include "kernels/cpu/common_avx512.h"

namespace rinfer::kernels::cpu::avx512 {

// The prefill GEMM quantizes every prompt row with this, so it is worth
// its shape: four max chains, and 64 values at a time narrowed with two
// rounds of packs and one permute (one chain and a vpmovdb per 16 values
// showed in that GEMM's profile).
void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  // NaN in v keeps mx (the second operand of max), like the reference's std::max.
  __m512 mx[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) mx[j] = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + i + 16 * j), abs_mask), mx[j]);
  for (; i < n; i += 16)
    mx[0] = _mm512_max_ps(_mm512_and_ps(_mm512_maskz_loadu_ps(tail_mask(n - i), x + i), abs_mask), mx[0]);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(mx[0], mx[1]), _mm512_max_ps(mx[2], mx[3])));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  auto to_i32 = [&](__m512 v) {  // NaN -> -127; in range, so the packs below never saturate
    return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, vinv), lo), hi));
  };
  // packs work within 128-bit lanes: lane l of the packed vector holds dword
  // l of each input in turn; output dword o comes from dword 4 (o % 4) + o / 4.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i ab = _mm512_packs_epi32(to_i32(_mm512_loadu_ps(x + i)), to_i32(_mm512_loadu_ps(x + i + 16)));
    const __m512i cd = _mm512_packs_epi32(to_i32(_mm512_loadu_ps(x + i + 32)), to_i32(_mm512_loadu_ps(x + i + 48)));
    _mm512_storeu_si512(q + i, _mm512_permutexvar_epi32(order, _mm512_packs_epi16(ab, cd)));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(to_i32(_mm512_maskz_loadu_ps(m, x + i))));
  }
  *scale = amax / 127.0f;
}

}  // namespace rinfer::kernels::cpu::avx512
