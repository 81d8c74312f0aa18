#pragma once
// Internal to the *_avx512.cpp files (compiled with the AVX-512 flags, see
// rinfer_simd_flags): the loads, horizontal sums, exp and transposes their
// kernels share. Everything here has internal linkage (an anonymous
// namespace, as impl.h requires of code compiled with SIMD flags): each file
// gets its own copy. The few plain functions one file calls in another are
// declared at the end.
// GCC 12 warns about the deliberately undefined vectors in its own
// _mm512_undefined_ps-based intrinsics (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__) || \
    !defined(__FMA__) || !defined(__F16C__)
#error "the *_avx512.cpp files must be compiled with the AVX-512 flags (see rinfer_simd_flags)"
#endif

namespace rinfer::kernels::cpu::avx512 {

using namespace simd;  // common_simd.h: the names and scalar helpers of every level

namespace {
inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// ---------------------------------------------------------------- loads of 16 weights/KV values as f32
template <DType T> struct Ld;
template <> struct Ld<DType::F32> {
  using E = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
template <> struct Ld<DType::F16> {
  using E = uint16_t;
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
template <> struct Ld<DType::BF16> {
  using E = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <> struct Ld<DType::I8> {  // INT8 KV cache: the integer values (scales applied by the caller)
  using E = int8_t;
  static __m512 load(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static __m512 load(const int8_t* p, __mmask16 m) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p))); }
};

// ---------------------------------------------------------------- horizontal sums
// Lane L (128-bit) of the result holds the partial sums of lane L of a, b, c, d.
inline __m512 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
  __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  __m512 lo = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd)));
  __m512 hi = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd)));
  return _mm512_add_ps(lo, hi);  // per lane: a b c d
}
// Lane L of the result = sum over the 4 lanes of rL: 16 totals of hsum4 outputs.
inline __m512 sum_lanes4(__m512 r0, __m512 r1, __m512 r2, __m512 r3) {
  __m512 t0 = _mm512_add_ps(_mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 t1 = _mm512_add_ps(_mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(t0, t1, _MM_SHUFFLE(3, 1, 3, 1)));
}
// out[i] = horizontal sum of v[i], i < C.
template <int C>
inline void reduce_accs(const __m512* v, float* out) {
  const __m512 z = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < C; i += 16) {
    __m512 r[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const int b = i + 4 * g;
      r[g] = b < C ? hsum4(v[b], b + 1 < C ? v[b + 1] : z, b + 2 < C ? v[b + 2] : z, b + 3 < C ? v[b + 3] : z) : z;
    }
    __m512 s = sum_lanes4(r[0], r[1], r[2], r[3]);
    if (i + 16 <= C)
      _mm512_storeu_ps(out + i, s);
    else
      _mm512_mask_storeu_ps(out + i, tail_mask(C - i), s);
  }
}

// ---------------------------------------------------------------- exp
// Cephes-style expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial,
// scaled by 2^n with vscalefps (correct overflow to inf and underflow).
// Max relative error about 2 ulp on [-87, 88]; NaN propagates.
inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // NaN in x is kept (second operand)
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), x);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// silu(g) * u per lane: silu_mul's arithmetic, shared with the gated GEMM's
// epilogue so that both give the same bits.
inline __m512 silu_mul16(__m512 g, __m512 u) {
  const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

// Decode GEMVs on BF16 (blocked) and Q8: the T2 prefetch (DecodePrefetch::
// bf16_t2, q8_t2) is issued once per kSparsePrefetchLines 64-byte lines. The
// loops do enough work per byte that fewer loads are in flight than in a
// plain read, so the hardware prefetcher alone can fall behind; one prefetch
// per line is too many.
constexpr int kSparsePrefetchLines = 4;

// Several weights times the same x (q/k/v, gate/up) in a prefill GEMM: x
// is packed (quantized) once and all the matrices' tasks run as one pool
// job, one barrier per group of matrices instead of one per matrix. Matrix
// i's tasks are [first_task[i], first_task[i + 1]) of the job, each run by
// Task on ctx[i]. (The quantized GEMM's QGemmMulti and the BF16 / f32
// gemm_multi.)
template <typename Ctx, void (*Task)(void*, int64_t, int)>
struct MultiJob {
  Ctx ctx[kMatmulQMultiMax];
  int64_t first_task[kMatmulQMultiMax + 1] = {0};
  static void task(void* p, int64_t t, int thread) {
    auto& m = *static_cast<MultiJob*>(p);
    const int i = part_of(m.first_task, t);
    Task(&m.ctx[i], t - m.first_task[i], thread);
  }
};

// 16x16 transpose: r[i] = row i in, r[j] = column j out.
__attribute__((always_inline)) inline void transpose16(__m512 r[16]) {
  __m512 a[16], b[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512d a0 = _mm512_castps_pd(a[4 * j]), a1 = _mm512_castps_pd(a[4 * j + 1]);
    const __m512d a2 = _mm512_castps_pd(a[4 * j + 2]), a3 = _mm512_castps_pd(a[4 * j + 3]);
    b[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));  // lane L: rows 4j..4j+3 of column 4L
    b[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));  // column 4L + 1
    b[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));  // column 4L + 2
    b[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));  // column 4L + 3
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 e0 = _mm512_shuffle_f32x4(b[c], b[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 e1 = _mm512_shuffle_f32x4(b[c], b[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 e2 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 e3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
    r[c] = _mm512_shuffle_f32x4(e0, e2, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + c] = _mm512_shuffle_f32x4(e0, e2, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + c] = _mm512_shuffle_f32x4(e1, e3, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + c] = _mm512_shuffle_f32x4(e1, e3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// Quantized weights (QuantizedWeight in ops.h): u = q + off is stored
// unsigned (off = 128 for Q8, 8 for Q4), so per group
//   sum_k x_k q_k = sum_k x_k u_k - off * sum_k x_k,
// and the second term is a per-(row of x, group) constant.
// The 16 row scales of one group at p (QuantAddr::group_scales) as f32.
inline __m512 load_scales16(const uint8_t* p, DType scale_dtype) {
  if (scale_dtype == DType::F16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}

// 16 f32 lanes, for the algorithms written once for both levels over a
// vector-traits type (attention_lanes.h): each operation is the one
// instruction this level used where they were written per level.
struct Zmm {
  using F = __m512;
  using D = __m512d;
  static constexpr int kLanes = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_load_ps(p); }  // aligned
  static void store(float* p, F v) { _mm512_store_ps(p, v); }  // aligned
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F bcast(const float* p) { return _mm512_set1_ps(*p); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F exp(F x) { return exp512(x); }
  // a where x < y (ordered), else b.
  static F lt_select(F x, F y, F a, F b) { return _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(x, y, _CMP_LT_OQ), a); }
  // x, 0 where x == v.
  static F zero_where_eq(F x, F v) { return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, v, _CMP_EQ_OQ), _mm512_setzero_ps()); }
  // e where x != v (or unordered), else 0.
  static F keep_where_neq(F x, F v, F e) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, v, _CMP_NEQ_UQ), e); }
  static D zero_pd() { return _mm512_setzero_pd(); }
  // s0 += the low half of v in double, s1 += the high half.
  static void add_halves_pd(D& s0, D& s1, F v) {
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  }
  static void store_pd(double* p, D v) { _mm512_store_pd(p, v); }  // aligned
};

}  // namespace

// Between the files of this level: plain functions (impl.h).
// The decode GEMV on row-major F32 / F16 / BF16 weights (gemv_avx512.cpp).
void gemv(const MatmulArgs& a, const Runner& runner);
// The decode GEMV on blocked BF16 weights, as[0 .. n) of one x (gemv_avx512.cpp).
void gemv_blocked(const MatmulArgs* as, int n, const Runner& runner);
// Blocked BF16 weights times kGemvMaxM < M <= kBlockedDotMaxM rows (batched
// decode), as[0 .. n) of one x, vdpbf16ps on the layout as stored
// (gemm_bf16_blocked_avx512.cpp); applies() says whether a call qualifies.
using detail::kBlockedDotMaxM;
bool bf16_blocked_small_m_applies(const MatmulArgs& a);
void gemm_bf16_blocked_small_m(const MatmulArgs* as, int n, const Runner& runner);

}  // namespace rinfer::kernels::cpu::avx512
