// AVX-512 row ops: rmsnorm, rope, silu_mul, add, softmax, argmax, and the
// conversion from f32.
#include "kernels/cpu/common_avx512.h"

namespace rinfer::kernels::cpu::avx512 {

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  // sum of squares in double, like the reference
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i < n; i += 16) {
    __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
    s0 = _mm512_fmadd_pd(lo, lo, s0);
    s1 = _mm512_fmadd_pd(hi, hi, s1);
  }
  double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
  const __m512 inv = _mm512_set1_ps(float(1.0 / sqrt(ss / double(n) + eps)));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv), _mm512_maskz_loadu_ps(m, weight + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  // The angles' cos/sin (rope_angles) in the style's order, then every head.
  constexpr int kChunk = 128;  // pairs per pass
  alignas(64) float cb[2 * kChunk], sb[2 * kChunk];
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
        for (int i = 0; i < cnt; i += 16) {
          const __mmask16 m = tail_mask(cnt - i);
          float* pa = v + i0 + i;
          float* pb = v + i0 + half + i;
          __m512 x0 = _mm512_maskz_loadu_ps(m, pa), x1 = _mm512_maskz_loadu_ps(m, pb);
          __m512 c = _mm512_load_ps(cb + i), s = _mm512_load_ps(sb + i);
          _mm512_mask_storeu_ps(pa, m, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
          _mm512_mask_storeu_ps(pb, m, _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c)));
        }
      } else {
        float* base = v + 2 * i0;
        for (int e = 0; e < 2 * cnt; e += 16) {
          const __mmask16 m = tail_mask(2 * cnt - e);
          __m512 xv = _mm512_maskz_loadu_ps(m, base + e);
          __m512 xs = _mm512_permute_ps(xv, 0xB1);  // swap the two values of each pair
          __m512 r = _mm512_add_ps(_mm512_mul_ps(xv, _mm512_load_ps(cb + e)), _mm512_mul_ps(xs, _mm512_load_ps(sb + e)));
          _mm512_mask_storeu_ps(base + e, m, r);
        }
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, silu_mul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
    _mm512_storeu_ps(y + i + 16, _mm512_add_ps(_mm512_loadu_ps(y + i + 16), _mm512_loadu_ps(x + i + 16)));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

void axpy(float* y, float a, const float* x, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

namespace {
// The largest of x[0 .. n), softmax's shift (-inf for n = 0).
float max_of(const float* x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, tail_mask(n - i), x + i));
  return _mm512_reduce_max_ps(mx);
}

// x = exp(x - shift) / their sum (the sum in double): softmax once its
// shift is known.
void softmax_shifted(float* x, int64_t n, float shift) {
  const __m512 vmax = _mm512_set1_ps(shift);
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vmax)));
    _mm512_mask_storeu_ps(x + i, m, e);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  const __m512 inv = _mm512_set1_ps(float(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1))));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}
}  // namespace

// (logits - max) / T is at most 0, and 0 at the max: softmax's own shift.
void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs) {
  const __m512 mx = _mm512_set1_ps(max_of(logits, n)), t = _mm512_set1_ps(temperature);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(probs + i, m, _mm512_div_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, logits + i), mx), t));
  }
  softmax_shifted(probs, n, 0.0f);
}

// One read of x: each chunk of 512 values' largest (vmaxps keeps its second
// operand when the first is NaN, so NaNs drop out), the first chunk with the
// largest of all, then the first index in that chunk (from L1) that holds it.
// The logits come from the output layer's two threads, half of them from the
// other core's cache: a second pass over them cost as much as the first.
// (A single pass that tracks each lane's index instead is bound by its
// compare-blend chain.)
int64_t argmax(const float* x, int64_t n) {
  if (!(x[0] == x[0])) return 0;  // x[0] NaN: nothing compares greater
  constexpr int64_t kChunk = 512;
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  float best = -INFINITY;
  int64_t best_chunk = 0;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t end = std::min(n, c + kChunk);
    __m512 m0 = neg_inf, m1 = neg_inf, m2 = neg_inf, m3 = neg_inf;  // named: GCC keeps an array of them on the stack
    int64_t i = c;
    for (; i + 64 <= end; i += 64) {
      m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
      m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
      m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
      m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    for (; i < end; i += 16) m0 = _mm512_max_ps(_mm512_mask_loadu_ps(neg_inf, tail_mask(end - i), x + i), m0);
    const float cm = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    if (cm > best) best = cm, best_chunk = c;
  }
  // Every non-NaN x[i] <= best, and x[0] is not NaN: some x[i] == best (with
  // every value -inf, x[0] in chunk 0).
  const __m512 vb = _mm512_set1_ps(best);
  for (int64_t i = best_chunk;; i += 16) {
    const __mmask16 t = tail_mask(n - i);
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(t, _mm512_maskz_loadu_ps(t, x + i), vb, _CMP_EQ_OQ);
    if (eq) return i + __builtin_ctz(eq);
  }
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
  const __m512i sign_mask = _mm512_set1_epi32(int(0x80000000u));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    __m512i u = _mm512_castps_si512(v);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m256i h;
    if (to == DType::F16) {
      // round to nearest even like f32_to_f16; NaN -> sign | 0x7e00 like the scalar code
      h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m256i qnan = _mm512_cvtepi32_epi16(
          _mm512_or_si512(_mm512_srli_epi32(_mm512_and_si512(u, sign_mask), 16), _mm512_set1_epi32(0x7e00)));
      h = _mm256_mask_blend_epi16(nan, h, qnan);
    } else {
      // bf16: round to nearest even; NaN stays NaN (quiet bit set)
      __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
      __m512i qn = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
      h = _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, qn));
    }
    _mm256_mask_storeu_epi16(d + i, m, h);
  }
}

}  // namespace rinfer::kernels::cpu::avx512
