// AVX2 row ops: rmsnorm, rope, silu_mul, add, softmax, argmax, and the
// conversion from f32.
#include "kernels/cpu/common_avx2.h"

namespace rinfer::kernels::cpu::avx2 {

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    s0 = _mm256_fmadd_pd(lo, lo, s0);
    s1 = _mm256_fmadd_pd(hi, hi, s1);
  }
  __m256d s = _mm256_add_pd(s0, s1);
  alignas(32) double sb[4];
  _mm256_store_pd(sb, s);
  double ss = (sb[0] + sb[1]) + (sb[2] + sb[3]);
  for (; i < n; ++i) ss += double(x[i]) * x[i];
  const float invs = float(1.0 / sqrt(ss / double(n) + eps));
  const __m256 inv = _mm256_set1_ps(invs);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv), _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) y[i] = x[i] * invs * weight[i];
}

void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  constexpr int kChunk = 128;
  alignas(32) float cb[2 * kChunk], sb[2 * kChunk];
  const int half = rot_dim / 2;
  for (int i0 = 0; i0 < half; i0 += kChunk) {
    const int cnt = int(imin(kChunk, half - i0));
    for (int i = 0; i < cnt; ++i) {
      const float c = cs[i0 + i], s = cs[half + i0 + i];
      if (style == RopeStyle::RotateHalf) {
        cb[i] = c;
        sb[i] = s;
      } else {
        cb[2 * i] = cb[2 * i + 1] = c;
        sb[2 * i] = -s;
        sb[2 * i + 1] = s;
      }
    }
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + int64_t(h) * head_dim;
      if (style == RopeStyle::RotateHalf) {
        float* pa = v + i0;
        float* pb = v + i0 + half;
        int i = 0;
        for (; i + 8 <= cnt; i += 8) {
          __m256 x0 = _mm256_loadu_ps(pa + i), x1 = _mm256_loadu_ps(pb + i);
          __m256 c = _mm256_load_ps(cb + i), s = _mm256_load_ps(sb + i);
          _mm256_storeu_ps(pa + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
          _mm256_storeu_ps(pb + i, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
        }
        for (; i < cnt; ++i) {
          float x0 = pa[i], x1 = pb[i];
          pa[i] = x0 * cb[i] - x1 * sb[i];
          pb[i] = x0 * sb[i] + x1 * cb[i];
        }
      } else {
        float* base = v + 2 * i0;
        int e = 0;
        for (; e + 8 <= 2 * cnt; e += 8) {
          __m256 xv = _mm256_loadu_ps(base + e);
          __m256 xs = _mm256_permute_ps(xv, 0xB1);
          _mm256_storeu_ps(base + e, _mm256_add_ps(_mm256_mul_ps(xv, _mm256_load_ps(cb + e)),
                                                   _mm256_mul_ps(xs, _mm256_load_ps(sb + e))));
        }
        for (; e < 2 * cnt; e += 2) {
          float x0 = base[e], x1 = base[e + 1];
          base[e] = x0 * cb[e] - x1 * sb[e + 1];
          base[e + 1] = x0 * sb[e + 1] + x1 * cb[e];
        }
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t cnt = imin(8, n - i);
    __m256 g = cnt == 8 ? _mm256_loadu_ps(gate + i) : load_partial_f32(gate + i, cnt);
    __m256 u = cnt == 8 ? _mm256_loadu_ps(up + i) : load_partial_f32(up + i, cnt);
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    __m256 r = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
    if (cnt == 8)
      _mm256_storeu_ps(out + i, r);
    else
      store_partial_f32(out + i, r, cnt);
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void axpy(float* y, float a, const float* x, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) _mm_store_ss(y + i, _mm_fmadd_ss(_mm_set_ss(a), _mm_load_ss(x + i), _mm_load_ss(y + i)));
}

namespace {
// The largest of x[0 .. n), softmax's shift (-inf for n = 0).
float max_of(const float* x, int64_t n) {
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
  alignas(32) float mb[8];
  _mm256_store_ps(mb, mx);
  float m = mb[0];
  for (int j = 1; j < 8; ++j) m = mb[j] > m ? mb[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// x = exp(x - shift) / their sum (the sum in double): softmax once its
// shift is known.
void softmax_shifted(float* x, int64_t n, float shift) {
  const __m256 vmax = _mm256_set1_ps(shift);
  int64_t i;
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  if (i < n) {
    __m256 e = exp256(_mm256_sub_ps(load_partial_f32(x + i, n - i), vmax));
    alignas(32) float eb[8];
    _mm256_store_ps(eb, e);
    for (int64_t j = 0; j < n - i; ++j) x[i + j] = eb[j];
    alignas(32) float zb[8] = {};
    for (int64_t j = 0; j < n - i; ++j) zb[j] = eb[j];
    __m256 ez = _mm256_load_ps(zb);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(ez)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(ez, 1)));
  }
  alignas(32) double sb[4];
  _mm256_store_pd(sb, _mm256_add_pd(s0, s1));
  const float invs = float(1.0 / ((sb[0] + sb[1]) + (sb[2] + sb[3])));
  const __m256 inv = _mm256_set1_ps(invs);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= invs;
}
}  // namespace

void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs) {
  const float m = max_of(logits, n);
  const __m256 mx = _mm256_set1_ps(m), t = _mm256_set1_ps(temperature);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(probs + i, _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(logits + i), mx), t));
  for (; i < n; ++i) probs[i] = (logits[i] - m) / temperature;
  softmax_shifted(probs, n, 0.0f);  // (logits - max) / T is at most 0, and 0 at the max
}

// As the AVX-512 level's: each chunk's largest value (NaNs drop out of
// vmaxps as its first operand), the first chunk with the largest of all, then
// the first index in it that holds it; tails in scalar.
int64_t argmax(const float* x, int64_t n) {
  if (!(x[0] == x[0])) return 0;  // x[0] NaN: nothing compares greater
  constexpr int64_t kChunk = 512;
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  float best = -INFINITY;
  int64_t best_chunk = 0;
  alignas(32) float mb[8];
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t end = std::min(n, c + kChunk);
    __m256 m0 = neg_inf, m1 = neg_inf, m2 = neg_inf, m3 = neg_inf;  // named: GCC keeps an array of them on the stack
    int64_t i = c;
    for (; i + 32 <= end; i += 32) {
      m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
      m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
      m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
      m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    _mm256_store_ps(mb, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    float cm = -INFINITY;
    for (int j = 0; j < 8; ++j) cm = mb[j] > cm ? mb[j] : cm;
    for (; i < end; ++i) cm = x[i] > cm ? x[i] : cm;
    if (cm > best) best = cm, best_chunk = c;
  }
  // Every non-NaN x[i] <= best, and x[0] is not NaN: some x[i] == best (with
  // every value -inf, x[0] in chunk 0).
  const __m256 vb = _mm256_set1_ps(best);
  int64_t i = best_chunk;
  for (; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vb, _CMP_EQ_OQ));
    if (eq) return i + __builtin_ctz(unsigned(eq));
  }
  for (;; ++i)
    if (x[i] == best) return i;
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  softmax_shifted(x, n, max_of(x, n));
}

void convert_from_f32(DType to, const float* src, void* dst, int64_t n) {
  if (to == DType::F32) {
    memcpy(dst, src, size_t(n) * sizeof(float));
    return;
  }
  auto* d = static_cast<uint16_t*>(dst);
  const __m256i sign_mask = _mm256_set1_epi32(int(0x80000000u));
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t cnt = imin(8, n - i);
    __m256 v = cnt == 8 ? _mm256_loadu_ps(src + i) : load_partial_f32(src + i, cnt);
    __m256i u = _mm256_castps_si256(v);
    __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    __m128i h;
    if (to == DType::F16) {
      h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m256i q = _mm256_or_si256(_mm256_srli_epi32(_mm256_and_si256(u, sign_mask), 16), _mm256_set1_epi32(0x7e00));
      __m128i q16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      h = _mm_blendv_epi8(h, q16, nan16);
    } else {
      __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
      __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
      __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
      r = _mm256_blendv_epi8(r, qn, nan32);
      h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    }
    if (cnt == 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
    } else {
      alignas(16) uint16_t hb[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(hb), h);
      for (int64_t j = 0; j < cnt; ++j) d[i + j] = hb[j];
    }
  }
}

}  // namespace rinfer::kernels::cpu::avx2
