#pragma once
// Internal to the *_avx2.cpp files (compiled with the AVX2 + FMA + F16C flags,
// see rinfer_simd_flags): the loads, horizontal sums, exp and transposes
// their kernels share, with 8-float vectors and 16 registers; tails that
// AVX2 cannot mask go through small stack buffers or scalar loops.
// Everything here has internal linkage (an anonymous namespace, as impl.h
// requires of code compiled with SIMD flags): each file gets its own copy.
// The one plain function one file calls in another is declared at the end.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/common_simd.h"
#include "kernels/cpu/impl.h"
#include "kernels/cpu/owned_ranges.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/qgemv_dispatch.h"
#include "kernels/cpu/quant_layout.h"

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "the *_avx2.cpp files must be compiled with the AVX2 flags (see rinfer_simd_flags)"
#endif

namespace rinfer::kernels::cpu::avx2 {

using namespace simd;  // common_simd.h: the names and scalar helpers of every level

namespace {

inline float bf16_scalar(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// ---------------------------------------------------------------- loads of 8 values as f32
template <DType T> struct Ld;
template <> struct Ld<DType::F32> {
  using E = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float scalar(const float* p) { return *p; }
};
template <> struct Ld<DType::F16> {
  using E = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float scalar(const uint16_t* p) { return rinfer::f16_to_f32(*p); }  // out-of-line in core: safe to call
};
template <> struct Ld<DType::BF16> {
  using E = uint16_t;
  static __m256 load(const uint16_t* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static float scalar(const uint16_t* p) { return bf16_scalar(*p); }
};
template <> struct Ld<DType::I8> {  // INT8 KV cache: the integer values (scales applied by the caller)
  using E = int8_t;
  static __m256 load(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static float scalar(const int8_t* p) { return float(*p); }
};
// n < 8 values, the rest zero
template <DType T>
inline __m256 load_partial(const typename Ld<T>::E* p, int64_t n) {
  alignas(32) typename Ld<T>::E buf[8] = {};
  for (int64_t i = 0; i < n; ++i) buf[i] = p[i];
  return Ld<T>::load(buf);
}
inline __m256 load_partial_f32(const float* p, int64_t n) { return load_partial<DType::F32>(p, n); }
inline void store_partial_f32(float* p, __m256 v, int64_t n) {
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  for (int64_t i = 0; i < n; ++i) p[i] = buf[i];
}

// ---------------------------------------------------------------- horizontal sums
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));  // per lane: a b c d
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
template <int C>
inline void reduce_accs(const __m256* v, float* out) {
  const __m256 z = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < C; i += 4) {
    __m128 s = hsum4(v[i], i + 1 < C ? v[i + 1] : z, i + 2 < C ? v[i + 2] : z, i + 3 < C ? v[i + 3] : z);
    if (i + 4 <= C) {
      _mm_storeu_ps(out + i, s);
    } else {
      alignas(16) float buf[4];
      _mm_store_ps(buf, s);
      for (int j = 0; j < C - i; ++j) out[i + j] = buf[j];
    }
  }
}

// ---------------------------------------------------------------- exp
// Cephes-style expf as in the AVX-512 file; 2^n applied in two halves so that
// overflow gives inf and underflow gives denormals / 0 without vscalefps.
inline __m256 exp256(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);  // NaN in x is kept (second operand)
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), x);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i ni = _mm256_cvtps_epi32(n);  // NaN -> INT_MIN, harmless: p is NaN
  __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);  // both in [-75, 64]
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// 8x8 transpose: r[i] = row i in, r[j] = column j out.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    s[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}

// 8 row scales at p (a group's QuantAddr::group_scales, + 8 for rows 8-15) as f32.
inline __m256 load_scales8(const uint8_t* p, DType scale_dtype) {
  if (scale_dtype == DType::F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
inline int64_t half_scale_bytes(const QuantizedWeight& w) { return w.scale_dtype == DType::F16 ? 16 : 32; }

// 8 f32 lanes, for the algorithms written once for both levels over a
// vector-traits type (attention_lanes.h): each operation is the one
// instruction this level used where they were written per level.
struct Ymm {
  using F = __m256;
  using D = __m256d;
  static constexpr int kLanes = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_load_ps(p); }  // aligned
  static void store(float* p, F v) { _mm256_store_ps(p, v); }  // aligned
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F exp(F x) { return exp256(x); }
  // a where x < y (ordered), else b.
  static F lt_select(F x, F y, F a, F b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, y, _CMP_LT_OQ)); }
  // x, 0 where x == v.
  static F zero_where_eq(F x, F v) { return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, v, _CMP_EQ_OQ)); }
  // e where x != v (or unordered), else 0.
  static F keep_where_neq(F x, F v, F e) { return _mm256_and_ps(_mm256_cmp_ps(x, v, _CMP_NEQ_UQ), e); }
  static D zero_pd() { return _mm256_setzero_pd(); }
  // s0 += the low half of v in double, s1 += the high half.
  static void add_halves_pd(D& s0, D& s1, F v) {
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static void store_pd(double* p, D v) { _mm256_store_pd(p, v); }  // aligned
};

}  // namespace

// Between the files of this level: a plain function (impl.h).
// The decode GEMV on row-major F32 / F16 / BF16 weights (gemv_avx2.cpp).
void gemv(const MatmulArgs& a, const Runner& runner);

}  // namespace rinfer::kernels::cpu::avx2
