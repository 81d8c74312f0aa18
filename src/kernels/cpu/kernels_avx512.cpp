// AVX-512 kernels (F, BW, VL, DQ; compiled with the flags of *_avx512.cpp
// files). Only called when best_isa() is Avx512. Everything here except the
// entry points declared in impl.h has internal linkage, and only intrinsics
// and C library functions are used, so no code compiled with these flags can
// be picked by the linker for another file (see impl.h).
//
// matmul has two regimes:
//  - decode, M <= kGemvMaxM (8): a GEMV that streams W exactly once. Each
//    output y[m, n] is a dot product kept as 16 f32 partial sums (one zmm) for
//    a register tile of M x-rows by NR (3-4) W-rows; W rows are converted to
//    f32 in registers (F16: vcvtph2ps, BF16: zero-extend + shift), each loaded
//    W vector serves all M rows, and the tile is reduced at the end with a
//    transposing shuffle tree (~2 ops per accumulator). Each thread streams
//    one contiguous range of W rows and then helps the others (OwnedRanges).
//  - prefill: BLIS-style GEMM. x is packed once per call into k-major panels
//    of kFmaMR rows; every task converts + transposes a block of W rows into
//    f32 slivers [k][64] (once per k-block, amortised over all M rows), and a
//    6 x 64 micro-kernel (24 zmm accumulators, x broadcast from an
//    L1-resident panel, W slivers from L2) accumulates into y. No horizontal sums.
// Accumulation is f32 throughout (GEMV: K/16 terms per lane; GEMM: K terms
// per output, in k-blocks of 512). See tests/kernels/test_matmul.cpp for the
// error bound checked against the double reference.
// GCC 12 warns about the deliberately undefined vectors in its own
// _mm512_undefined_ps-based intrinsics (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/impl.h"
#include "kernels/cpu/owned_ranges.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/qgemv_dispatch.h"
#include "kernels/cpu/quant_layout.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__) || \
    !defined(__FMA__) || !defined(__F16C__)
#error "kernels_avx512.cpp must be compiled with the AVX-512 flags (see rinfer_simd_flags)"
#endif

namespace rinfer::kernels::cpu::avx512 {

using detail::MatmulArgs;
using detail::QMatmulArgs;
using detail::Runner;
using detail::OwnedRanges;  // owned_ranges.h
using detail::kGemvClaimBytes;
using detail::part_of;

namespace {

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
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

// ================================================================= matmul
constexpr int64_t kGemvMaxM = 8;  // above this, the packed GEMM path
// Prefill GEMM register tiles: MR x-rows (broadcast) by NC = 16 * NW W-rows
// (vectors), MR * NW zmm accumulators.
//  - f32 FMA (F32/F16 weights, and BF16 where vdpbf16ps is not used): 6 x 64,
//    4 W vectors and 6 broadcasts per 24 FMAs. Each m-tile's x panel
//    (6 * kFmaKC * 4 = 12 KiB) stays in L1 while the task's W slivers (L2)
//    stream past it; the long k-block halves the passes over y. On Ice
//    Lake-SP (docs/performance.md) this ran 0.77 of the FMA peak where the
//    earlier 12 x 32 tile with W in L1 and k-blocks of 256 ran 0.61 (a model
//    of the task loop, one process, 21 alternated rounds); on Zen 4/5 tiles
//    of 12 x 32 .. 6 x 64 were within noise.
//  - BF16 dot products (vdpbf16ps, Zen 4/5): 12 x 32 in k-pairs, unchanged.
constexpr int kFmaMR = 6;
constexpr int kFmaNW = 4;
constexpr int64_t kFmaNC = 16 * kFmaNW;  // W rows per sliver
constexpr int64_t kFmaKC = 512;
constexpr int kMR = 12;               // dot path
constexpr int kNW = 2;                // zmm vectors of W per k in the dot tile
constexpr int64_t kNC = 16 * kNW;     // W rows per dot sliver
constexpr int64_t kNB = 256;          // W rows per task (a multiple of both slivers)
// Few x rows: the W panel is reused only a few times, so packing dominates;
// take whole rows (up to kKCSmallM values) so that packing reads W in long
// sequential runs, and fewer rows per task.
constexpr int64_t kSmallMRows = 48;
constexpr int64_t kKCSmallM = 4096;
constexpr int64_t kNBSmallM = 64;
static_assert(kNB % kFmaNC == 0 && kNB % kNC == 0 && kNBSmallM % kFmaNC == 0 && kNBSmallM % kNC == 0);

// ---------------------------------------------------------------- decode GEMV
// out[m * NR + r] = sum_{k < kl} x[m * ldx + k] * w[r * ldw + k] for an MR x NR tile.
template <DType T, int MR, int NR>
inline void gemv_tile(const float* x, int64_t ldx, int64_t kl, const typename Ld<T>::E* w, int64_t ldw, float* out) {
  __m512 acc[MR * NR];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NR; ++i) acc[i] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= kl; k += 16) {
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) wv[r] = Ld<T>::load(w + r * ldw + k);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      __m512 xv = _mm512_loadu_ps(x + m * ldx + k);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) acc[m * NR + r] = _mm512_fmadd_ps(xv, wv[r], acc[m * NR + r]);
    }
  }
  if (k < kl) {
    const __mmask16 msk = tail_mask(kl - k);
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) wv[r] = Ld<T>::load(w + r * ldw + k, msk);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      __m512 xv = _mm512_maskz_loadu_ps(msk, x + m * ldx + k);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) acc[m * NR + r] = _mm512_fmadd_ps(xv, wv[r], acc[m * NR + r]);
    }
  }
  reduce_accs<MR * NR>(acc, out);
}

// y rows [n0, n1) for all M (<= 8) rows of x. K is cut into blocks only when
// the M x-rows would not fit in L2 (blocking for L1 measured slower: it splits
// the W row streams).
constexpr int64_t kGemvXBlockFloats = 65536;  // 256 KiB of x per k-block
template <DType T, int MR>
void gemv_rows(const MatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int NR = MR <= 4 ? 4 : 3;
  const auto* w = static_cast<const typename Ld<T>::E*>(a.w);
  const int64_t K = a.K;
  const int64_t kc = MR * K <= kGemvXBlockFloats ? K : imax(256, kGemvXBlockFloats / MR / 16 * 16);
  float out[MR * NR];
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const int64_t kl = imin(kc, K - k0);
    const bool first = k0 == 0;
    auto emit = [&](int64_t nn, int nr) {
      for (int m = 0; m < MR; ++m)
        for (int r = 0; r < nr; ++r) {
          float* yp = a.y + m * a.ldy + nn + r;
          const float v = out[m * nr + r];
          *yp = first ? v + (a.bias ? a.bias[nn + r] : 0.0f) : *yp + v;
        }
    };
    int64_t n = n0;
    for (; n + NR <= n1; n += NR) {
      gemv_tile<T, MR, NR>(a.x + k0, a.ldx, kl, w + n * K + k0, K, out);
      emit(n, NR);
    }
    for (; n < n1; ++n) {
      gemv_tile<T, MR, 1>(a.x + k0, a.ldx, kl, w + n * K + k0, K, out);
      emit(n, 1);
    }
  }
}

template <DType T>
void gemv_dispatch_m(const MatmulArgs& a, int64_t n0, int64_t n1) {
  static_assert(kGemvMaxM <= 8);
  switch (a.M) {
    case 1: return gemv_rows<T, 1>(a, n0, n1);
    case 2: return gemv_rows<T, 2>(a, n0, n1);
    case 3: return gemv_rows<T, 3>(a, n0, n1);
    case 4: return gemv_rows<T, 4>(a, n0, n1);
    case 5: return gemv_rows<T, 5>(a, n0, n1);
    case 6: return gemv_rows<T, 6>(a, n0, n1);
    case 7: return gemv_rows<T, 7>(a, n0, n1);
    default: return gemv_rows<T, 8>(a, n0, n1);
  }
}



// y rows [n0, n1) of the row-major GEMV, by weight dtype.
void gemv_rows_any(const MatmulArgs& a, int64_t n0, int64_t n1) {
  switch (a.wdt) {
    case DType::F16: return gemv_dispatch_m<DType::F16>(a, n0, n1);
    case DType::BF16: return gemv_dispatch_m<DType::BF16>(a, n0, n1);
    default: return gemv_dispatch_m<DType::F32>(a, n0, n1);
  }
}

struct GemvCtx {
  const MatmulArgs* a;
  OwnedRanges ranges;  // of 4-row groups
};

void gemv_task(void* p, int64_t task, int) {
  auto& c = *static_cast<GemvCtx*>(p);
  c.ranges.work(int(task), [&](int64_t g0, int64_t g1) { gemv_rows_any(*c.a, 4 * g0, imin(c.a->N, 4 * g1)); });
}

void gemv(const MatmulArgs& in, const Runner& runner) {
  MatmulArgs a = in;
  if (a.M > 1) {
    // Copy x with a row stride that is not a multiple of 4 KiB: rows 4/8 KiB
    // apart (K = 1024, 2048, ...) all map to the same L1 sets and evict each
    // other together with the W rows.
    const int64_t ld = round_up(a.K, 16) + 16;
    float* xc = detail::scratch(detail::kScratchShared, a.M * ld);
    for (int64_t m = 0; m < a.M; ++m) memcpy(xc + m * ld, a.x + m * a.ldx, size_t(a.K) * sizeof(float));
    a.x = xc;
    a.ldx = ld;
  }
  const int64_t groups = (a.N + 3) / 4;  // of 4 rows (the register tiles' unit)
  if (runner.n_threads == 1 || groups < 4) return gemv_rows_any(a, 0, a.N);
  GemvCtx c;  // not value-initialized: init() sets what is used
  c.a = &a;
  c.ranges.init(groups, runner.n_threads, kGemvClaimBytes / (4 * a.K * (a.wdt == DType::F32 ? 4 : 2)));
  runner.run(runner.pool, c.ranges.n_ranges, &gemv_task, &c);
}

// ---------------------------------------------------------------- decode GEMV, blocked BF16
// W in the blocked layout [N/8][K/32][8 rows][32 k] (ops.h) is one sequential
// stream: the whole matrix is read front to back, which is what keeps the
// hardware prefetchers at full bandwidth (four or more row streams at once
// measured 0.6-0.7 of a plain read on AMD Zen 4; this 0.95-1.0).
// Per 32-k tile and W row: one 64-byte load, BF16 -> f32 without shuffles
// (even k: << 16, odd k: & 0xffff0000) against x split once per call into
// [k/32][16 even | 16 odd] (xeo), two FMAs into one accumulator per (x row,
// W row). Up to 3 x rows share a pass over a block (24 accumulators); more
// rows take further passes over the same block (then L1/L2 resident).
constexpr int kBlkRows = 8;
// Decode GEMVs on BF16 (blocked) and Q8: one software prefetch into L2 (T2)
// per kSparsePrefetchLines 64-byte lines, kSparsePrefetch bytes ahead. The
// loops do enough work per byte that fewer loads are in flight than in a
// plain read, and the hardware prefetcher alone falls behind; one prefetch
// per line is too many (bf16 slower than none: 20.1 -> 17.9-18.5 GB/s on 1
// thread). Interleaved with a read probe at millisecond granularity
// (docs/performance.md, medians of 80-250 pairs): bf16 [1536 x 2048] on 1
// thread 23.6 -> 27.4 GB/s (plain read 27.2), 2 threads 37.5 -> 41.4 (plain
// 45.2) in the host's fast phase; Q8 g128 [2816 x 2048] 2 threads 38.9 ->
// 43.9 (another run: 29.6-30.0 -> 33.0-33.1), 1 thread 0.73 -> 0.87 of the
// plain read. 8 and 16 KB ahead measured alike; 24 KB and one per 8 lines
// alike for bf16, slower for Q8. (Q4's heavier loop wants one per line:
// kQ4NtaPrefetch.) All this on Zen 4; Zen 5 reads faster with none
// (DecodePrefetch, prefetch_tuning.h, holds the distance per CPU).
constexpr int kSparsePrefetchLines = 4;
// MG x rows against NB blocks side by side (wb[0 .. NB): NB streams of
// weight lines, OwnedRanges::work_streams says why; NB = 2 or 4 only with MG
// = 1).
// pf: DecodePrefetch::bf16_t2 (on Zen 4 kSparsePrefetch = 12288, the distance
// measured above), 0: no prefetch; nta: DecodePrefetch::bf16_nta, a
// prefetch that far ahead on every line, 0: none; it is a prefetchnta (Zen
// 5), or a prefetcht0 where t0 (DecodePrefetch::line_t0, Ice Lake).
template <int MG, int NB>
void gemv_blk_group(const float* xeo, int64_t K, const uint16_t* const* wb, int64_t pf, int64_t nta, bool t0,
                    float* out /* [NB][MG][8] */) {
  const __m512i hi_mask = _mm512_set1_epi32(int(0xffff0000u));
  __m512 acc[NB][MG][kBlkRows];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 3
    for (int m = 0; m < MG; ++m)
#pragma GCC unroll 8
      for (int r = 0; r < kBlkRows; ++r) acc[j][m][r] = _mm512_setzero_ps();
  const uint16_t* p[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) p[j] = wb[j];
  for (int64_t k = 0; k < K; k += 32) {
    __m512 xe[MG], xo[MG];
#pragma GCC unroll 3
    for (int m = 0; m < MG; ++m) {
      xe[m] = _mm512_load_ps(xeo + m * K + k);
      xo[m] = _mm512_load_ps(xeo + m * K + k + 16);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kBlkRows; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        const __m512i v = _mm512_loadu_si512(p[j] + 32 * r);
        if (pf && r % kSparsePrefetchLines == 0)
          _mm_prefetch(reinterpret_cast<const char*>(p[j] + 32 * r) + pf, _MM_HINT_T2);
        if (nta) prefetch_line(reinterpret_cast<const char*>(p[j] + 32 * r) + nta, t0);
        const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(v, hi_mask));
#pragma GCC unroll 3
        for (int m = 0; m < MG; ++m)
          acc[j][m][r] = _mm512_fmadd_ps(xo[m], hi, _mm512_fmadd_ps(xe[m], lo, acc[j][m][r]));
      }
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) p[j] += 32 * kBlkRows;
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 3
    for (int m = 0; m < MG; ++m) reduce_accs<kBlkRows>(acc[j][m], out + (j * MG + m) * kBlkRows);
}

// y[m, the 8 rows of block b] = out (+ bias).
inline void store_blk_row(const MatmulArgs& a, const float* out, int64_t m, int64_t b) {
  const int64_t n0 = b * kBlkRows;
  __m256 v = _mm256_load_ps(out);
  if (a.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(a.bias + n0));
  _mm256_storeu_ps(a.y + m * a.ldy + n0, v);
}

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

// The blocked GEMV over as[0 .. n) (one x; each matrix's own N, bias and
// y): the 8-row blocks of all the matrices, one after the other, are one
// sequence split over the threads as OwnedRanges (BlockJob), so q/k/v or
// gate/up are one pool job (gate on one thread and up on the other, say)
// instead of a job, a barrier and a ramp of the prefetchers per matrix.
struct GemvBlkCtx {
  const MatmulArgs* a;
  const float* xeo;  // x in the even/odd order, [M][K]
  int64_t pf, nta;   // DecodePrefetch::bf16_t2, bf16_nta
  bool t0;           // DecodePrefetch::line_t0
};
using GemvBlk = detail::BlockOf<GemvBlkCtx>;
// y rows of one 8-row block, every x row, up to 3 rows per pass.
void gemv_blk_one(const GemvBlk* blk) {
  const GemvBlkCtx& c = *blk[0].c;
  const MatmulArgs& a = *c.a;
  const int64_t K = a.K, b = blk[0].b;
  const uint16_t* wb = static_cast<const uint16_t*>(a.w) + b * kBlkRows * K;
  alignas(64) float out[3 * kBlkRows];
  for (int64_t m0 = 0; m0 < a.M; m0 += 3) {
    const int64_t mg = imin(3, a.M - m0);
    const float* xg = c.xeo + m0 * K;
    if (mg == 3)
      gemv_blk_group<3, 1>(xg, K, &wb, c.pf, c.nta, c.t0, out);
    else if (mg == 2)
      gemv_blk_group<2, 1>(xg, K, &wb, c.pf, c.nta, c.t0, out);
    else
      gemv_blk_group<1, 1>(xg, K, &wb, c.pf, c.nta, c.t0, out);
    for (int64_t m = 0; m < mg; ++m) store_blk_row(a, out + m * kBlkRows, m0 + m, b);
  }
}
// NB blocks side by side (NB streams of weight lines), one x row (M = 1;
// the blocks may be of different matrices). Three keep 24 accumulators,
// which fit in registers next to x's two vectors, the mask and the two
// halves of a line; four keep 32, so GCC keeps some on the stack (L1), a
// load and a store per k-tile each. (Four streams read faster than two on
// Zen 5, and three faster than four: prefetch_tuning.cpp.)
template <int NB>
void gemv_blk_side(const GemvBlk* blk) {
  const int64_t K = blk[0].c->a->K;
  const uint16_t* wb[NB];
  for (int j = 0; j < NB; ++j) wb[j] = static_cast<const uint16_t*>(blk[j].c->a->w) + blk[j].b * kBlkRows * K;
  alignas(64) float out[NB * kBlkRows];
  gemv_blk_group<1, NB>(blk[0].c->xeo, K, wb, blk[0].c->pf, blk[0].c->nta, blk[0].c->t0, out);
  for (int j = 0; j < NB; ++j) store_blk_row(*blk[j].c->a, out + j * kBlkRows, 0, blk[j].b);
}
using GemvBlkJob = detail::BlockJob<GemvBlkCtx, kMatmulQMultiMax, &gemv_blk_one, &gemv_blk_side<2>, &gemv_blk_side<4>,
                                    &gemv_blk_side<3>>;

void gemv_blocked(const MatmulArgs* as, int n, const Runner& runner) {
  const MatmulArgs& a = as[0];
  const int64_t K = a.K;
  float* xeo = detail::scratch(detail::kScratchShared, a.M * K);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t k = 0; k < K; k += 32) {
      const __m512 lo = _mm512_loadu_ps(a.x + m * a.ldx + k), hi = _mm512_loadu_ps(a.x + m * a.ldx + k + 16);
      _mm512_store_ps(xeo + m * K + k, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_store_ps(xeo + m * K + k + 16, _mm512_permutex2var_ps(lo, odd, hi));
    }
  const DecodePrefetch& prof = decode_prefetch();
  GemvBlkJob j;
  for (int i = 0; i < n; ++i) j.add(GemvBlkCtx{&as[i], xeo, prof.bf16_t2, prof.bf16_nta, prof.line_t0}, as[i].N / kBlkRows);
  const int streams = a.M == 1 && j.n_blocks() >= prof.bf16_streams * runner.n_threads ? prof.bf16_streams : 1;
  j.run(runner, streams, kGemvClaimBytes / (kBlkRows * K * 2));
}

// ---------------------------------------------------------------- prefill GEMM
// BLIS-style: C[6 x 64] += xpanel[k][6] (broadcast) * wpanel[k][64] (four
// zmm), 24 accumulators live for a whole k-block, no horizontal sums.
//  - x is packed once per call into [m-tile][k-block][k][kFmaMR] (shared).
//  - each task owns a block of kNB W rows: per k-block it converts and
//    transposes them into [64-row sliver][k][64] f32 (L2 resident), then for
//    each of its m-tiles (x panel L1 resident) runs over all the slivers.
//  - with at most kSmallMRows x rows the k-block is the whole row (up to
//    kKCSmallM) and tasks are smaller: packing, which then dominates, reads
//    W in long runs straight from memory.
template <int MR>
void gemm_micro(const float* xp, const float* wp, int64_t kcl, float* c, int64_t ldc, int64_t ncols, bool first,
                const float* bias) {
  constexpr int NW = kFmaNW;
  constexpr int64_t NC = kFmaNC, XS = kFmaMR;  // XS: the x panel's row count (MR <= XS on the tail)
  // The C tile is read back at the end (after the first k-block): start its
  // lines on their way now, behind the FMAs.
  if (!first)
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NW; ++v) prefetch_l1(c + i * ldc + 16 * v);
  __m512 acc[MR][NW];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NW; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kcl; ++k) {
    __m512 wv[NW];
#pragma GCC unroll 8
    for (int v = 0; v < NW; ++v) wv[v] = _mm512_load_ps(wp + NC * k + 16 * v);
    // The first sliver of an m-tile brings its x panel in from L2/L3 (the
    // later ones find it in L1); 16 k ahead.
    prefetch_l1(xp + (k + 16) * XS);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 b = _mm512_set1_ps(xp[k * XS + i]);
#pragma GCC unroll 8
      for (int v = 0; v < NW; ++v) acc[i][v] = _mm512_fmadd_ps(b, wv[v], acc[i][v]);
    }
  }
  __mmask16 msk[NW];
  __m512 bv[NW];
#pragma GCC unroll 8
  for (int v = 0; v < NW; ++v) {
    msk[v] = tail_mask(imax(0, ncols - 16 * v));
    bv[v] = first && bias ? _mm512_maskz_loadu_ps(msk[v], bias + 16 * v) : _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 8
    for (int v = 0; v < NW; ++v) {
      __m512 s = first ? bv[v] : _mm512_maskz_loadu_ps(msk[v], row + 16 * v);
      _mm512_mask_storeu_ps(row + 16 * v, msk[v], _mm512_add_ps(s, acc[i][v]));
    }
  }
}

using MicroFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool, const float*);
static_assert(kFmaMR == 6);
MicroFn micro_for_rows(int64_t mr) {
  switch (mr) {
    case 1: return &gemm_micro<1>;
    case 2: return &gemm_micro<2>;
    case 3: return &gemm_micro<3>;
    case 4: return &gemm_micro<4>;
    case 5: return &gemm_micro<5>;
    default: return &gemm_micro<kFmaMR>;
  }
}

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

// Address of W[n, k] in the row-major or the blocked BF16 layout (ops.h:
// [N/8][K/32][8][32]). Runs of 16 (or 32, from k % 32 == 0) consecutive k are
// contiguous in both, which is all the GEMM packers below read at once.
template <typename E>
inline const E* w_at(const E* w, int64_t K, bool blocked, int64_t n, int64_t k) {
  if (!blocked) return w + n * K + k;
  return w + ((n >> 3) * (K >> 5) + (k >> 5)) * 256 + (n & 7) * 32 + (k & 31);
}

// dst[k][kFmaNC] (k < kcl) = W[n0 + j, k0 + k] as f32 for j < kFmaNC, zero for rows >= nrows.
template <DType T>
void pack_w_sliver(const typename Ld<T>::E* w, int64_t K, bool blocked, int64_t n0, int64_t nrows, int64_t k0,
                   int64_t kcl, float* dst) {
  for (int64_t kk = 0; kk < kcl; kk += 16) {
    const __mmask16 km = tail_mask(kcl - kk);
    const int64_t kn = imin(16, kcl - kk);
    for (int quarter = 0; quarter < kFmaNW; ++quarter) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const int64_t row = quarter * 16 + j;
        r[j] = row < nrows ? Ld<T>::load(w_at(w, K, blocked, n0 + row, k0 + kk), km) : _mm512_setzero_ps();
      }
      transpose16(r);
      float* d = dst + kk * kFmaNC + quarter * 16;
      for (int64_t c = 0; c < kn; ++c) _mm512_store_ps(d + c * kFmaNC, r[c]);
    }
  }
}

struct GemmCtx {
  const MatmulArgs* a;
  float* xp;  // packed x: [m-tile][k-block][kc][MR] (the path's MR)
  int64_t kc;     // k-block length
  int64_t n_kb, n_mt;
  int64_t nb;                     // W rows per task (a multiple of the path's sliver)
  int64_t n_ntasks, mt_per_task;  // task grid: n-blocks x m-chunks
};

void gemm_pack_x_task(void* p, int64_t mt, int) {
  const auto& c = *static_cast<const GemmCtx*>(p);
  const MatmulArgs& a = *c.a;
  const int64_t m0 = mt * kFmaMR, mr = imin(kFmaMR, a.M - m0);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    float* dst = c.xp + (mt * c.n_kb + kb) * c.kc * kFmaMR;
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t i = 0; i < mr; ++i) {
      const float* src = a.x + (m0 + i) * a.ldx + k0;
      for (int64_t k = 0; k < kcl; ++k) dst[k * kFmaMR + i] = src[k];
    }
  }
}

template <DType T>
void gemm_block(const GemmCtx& c, int64_t n0, int64_t n1, int64_t mt0, int64_t mt1) {
  const MatmulArgs& a = *c.a;
  const auto* w = static_cast<const typename Ld<T>::E*>(a.w);
  const int64_t nrows = n1 - n0, n_sl = (nrows + kFmaNC - 1) / kFmaNC;
  float* panel = detail::scratch(detail::kScratchPanel, n_sl * c.kc * kFmaNC);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t s = 0; s < n_sl; ++s)
      pack_w_sliver<T>(w, a.K, a.bf16_blocked, n0 + kFmaNC * s, imin(kFmaNC, nrows - kFmaNC * s), k0, kcl,
                       panel + s * c.kc * kFmaNC);
    for (int64_t mt = mt0; mt < mt1; ++mt) {
      const int64_t m0 = mt * kFmaMR, mr = imin(kFmaMR, a.M - m0);
      const MicroFn micro = micro_for_rows(mr);
      const float* xp = c.xp + (mt * c.n_kb + kb) * c.kc * kFmaMR;
      for (int64_t s = 0; s < n_sl; ++s) {
        const int64_t ncols = imin(kFmaNC, nrows - kFmaNC * s), nn = n0 + kFmaNC * s;
        micro(xp, panel + s * c.kc * kFmaNC, kcl, a.y + m0 * a.ldy + nn, a.ldy, ncols, kb == 0,
              a.bias ? a.bias + nn : nullptr);
      }
    }
  }
}

void gemm_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const GemmCtx*>(p);
  const int64_t nt = task % c.n_ntasks, mc = task / c.n_ntasks;
  const int64_t n0 = nt * c.nb, n1 = imin(c.a->N, n0 + c.nb);
  const int64_t mt0 = mc * c.mt_per_task, mt1 = imin(c.n_mt, mt0 + c.mt_per_task);
  if (n0 >= n1 || mt0 >= mt1) return;
  switch (c.a->wdt) {
    case DType::F16: return gemm_block<DType::F16>(c, n0, n1, mt0, mt1);
    case DType::BF16: return gemm_block<DType::BF16>(c, n0, n1, mt0, mt1);
    default: return gemm_block<DType::F32>(c, n0, n1, mt0, mt1);
  }
}

// ---------------------------------------------------------------- prefill GEMM, BF16 dot products
// For BF16 weights on CPUs where vdpbf16ps has twice the fp32 FMA rate (AMD
// Zen 4 and later; see bf16_gemm in ops.h): x is rounded to BF16 (round to
// nearest even) and each vdpbf16ps adds two exact products per lane into
// f32 accumulators. Same blocking as the f32 GEMM above, in k-pairs:
//  - x panel [m-tile][k-block][kc/2][kMR] of u32 (the BF16 pair k, k + 1);
//  - W sliver [kc/2][32 rows] of u32: a 16 x 16 transpose of u32 pairs taken
//    straight from the BF16 rows (no conversion);
//  - micro-kernel kMR x 32: per pair, two W vectors and one broadcast per row.
// A sliver of kKCDot k values is kKCDot / 2 * 128 bytes = 32 KiB (L1).
constexpr int64_t kKCDot = 512;

template <int MR>
void gemm_dot_micro(const uint32_t* xp, const uint32_t* wp, int64_t npairs, float* c, int64_t ldc, int64_t ncols,
                    bool first, const float* bias) {
  __m512 acc[MR][kNW];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kNW; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < npairs; ++p) {
    __m512bh wv[kNW];
#pragma GCC unroll 4
    for (int v = 0; v < kNW; ++v) wv[v] = (__m512bh)_mm512_load_si512(wp + kNC * p + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(int(xp[p * kMR + i]));
#pragma GCC unroll 4
      for (int v = 0; v < kNW; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], b, wv[v]);
    }
  }
  __mmask16 msk[kNW];
  __m512 bv[kNW];
#pragma GCC unroll 4
  for (int v = 0; v < kNW; ++v) {
    msk[v] = tail_mask(imax(0, ncols - 16 * v));
    bv[v] = first && bias ? _mm512_maskz_loadu_ps(msk[v], bias + 16 * v) : _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kNW; ++v) {
      __m512 s = first ? bv[v] : _mm512_maskz_loadu_ps(msk[v], row + 16 * v);
      _mm512_mask_storeu_ps(row + 16 * v, msk[v], _mm512_add_ps(s, acc[i][v]));
    }
  }
}

using DotMicroFn = void (*)(const uint32_t*, const uint32_t*, int64_t, float*, int64_t, int64_t, bool, const float*);
DotMicroFn dot_micro_for_rows(int64_t mr) {
  switch (mr) {
    case 1: return &gemm_dot_micro<1>;
    case 2: return &gemm_dot_micro<2>;
    case 3: return &gemm_dot_micro<3>;
    case 4: return &gemm_dot_micro<4>;
    case 5: return &gemm_dot_micro<5>;
    case 6: return &gemm_dot_micro<6>;
    case 7: return &gemm_dot_micro<7>;
    case 8: return &gemm_dot_micro<8>;
    case 9: return &gemm_dot_micro<9>;
    case 10: return &gemm_dot_micro<10>;
    case 11: return &gemm_dot_micro<11>;
    default: return &gemm_dot_micro<kMR>;
  }
}
static_assert(kMR == 12);

// dst[p][kNC] (p < kcl/2 rounded up) = the BF16 pair (k0 + 2p, k0 + 2p + 1) of
// rows n0 + j as one u32, zero beyond K and for rows >= nrows.
void pack_w_sliver_pairs(const uint16_t* w, int64_t K, bool blocked, int64_t n0, int64_t nrows, int64_t k0,
                         int64_t kcl, uint32_t* dst) {
  for (int64_t kk = 0; kk < kcl; kk += 32) {  // 32 k = 16 pairs per 16 x 16 transpose
    const int64_t kn = imin(32, kcl - kk);
    const __mmask32 km = kn >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << kn) - 1);
    const int64_t np = (kn + 1) / 2;
    for (int half = 0; half < kNW; ++half) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const int64_t row = half * 16 + j;
        r[j] = row < nrows ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(km, w_at(w, K, blocked, n0 + row, k0 + kk)))
                           : _mm512_setzero_ps();
      }
      transpose16(r);
      uint32_t* d = dst + (kk / 2) * kNC + half * 16;
      for (int64_t c = 0; c < np; ++c) _mm512_store_ps(reinterpret_cast<float*>(d + c * kNC), r[c]);
    }
  }
}

void gemm_dot_pack_x_task(void* p, int64_t mt, int) {
  const auto& c = *static_cast<const GemmCtx*>(p);
  const MatmulArgs& a = *c.a;
  const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0), kp = c.kc / 2;
  uint32_t* xp = reinterpret_cast<uint32_t*>(c.xp);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    uint32_t* dst = xp + (mt * c.n_kb + kb) * kp * kMR;
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t i = 0; i < mr; ++i) {
      const float* src = a.x + (m0 + i) * a.ldx + k0;
      for (int64_t kk = 0; kk < kcl; kk += 32) {
        const int64_t kn = imin(32, kcl - kk);
        const __m512 lo = _mm512_maskz_loadu_ps(tail_mask(kn), src + kk);
        const __m512 hi = _mm512_maskz_loadu_ps(tail_mask(imax(0, kn - 16)), src + kk + 16);
        // element j of the result is x[kk + j] (round to nearest even)
        const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        alignas(64) uint32_t tmp[16];
        _mm512_store_si512(tmp, pairs);
        const int64_t np = (kn + 1) / 2;
        for (int64_t q = 0; q < np; ++q) dst[(kk / 2 + q) * kMR + i] = tmp[q];
      }
    }
  }
}

void gemm_dot_block(const GemmCtx& c, int64_t n0, int64_t n1, int64_t mt0, int64_t mt1) {
  const MatmulArgs& a = *c.a;
  const auto* w = static_cast<const uint16_t*>(a.w);
  const int64_t nrows = n1 - n0, n_sl = (nrows + kNC - 1) / kNC, kp = c.kc / 2;
  uint32_t* panel = reinterpret_cast<uint32_t*>(detail::scratch(detail::kScratchPanel, n_sl * kp * kNC));
  const uint32_t* xp = reinterpret_cast<const uint32_t*>(c.xp);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0), npairs = (kcl + 1) / 2;
    for (int64_t s = 0; s < n_sl; ++s)
      pack_w_sliver_pairs(w, a.K, a.bf16_blocked, n0 + kNC * s, imin(kNC, nrows - kNC * s), k0, kcl,
                          panel + s * kp * kNC);
    for (int64_t s = 0; s < n_sl; ++s) {
      const int64_t ncols = imin(kNC, nrows - kNC * s), nn = n0 + kNC * s;
      const uint32_t* wp = panel + s * kp * kNC;
      const float* bias = a.bias ? a.bias + nn : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
        dot_micro_for_rows(mr)(xp + (mt * c.n_kb + kb) * kp * kMR, wp, npairs, a.y + m0 * a.ldy + nn, a.ldy, ncols,
                               kb == 0, bias);
      }
    }
  }
}

void gemm_dot_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const GemmCtx*>(p);
  const int64_t nt = task % c.n_ntasks, mc = task / c.n_ntasks;
  const int64_t n0 = nt * c.nb, n1 = imin(c.a->N, n0 + c.nb);
  const int64_t mt0 = mc * c.mt_per_task, mt1 = imin(c.n_mt, mt0 + c.mt_per_task);
  if (n0 >= n1 || mt0 >= mt1) return;
  gemm_dot_block(c, n0, n1, mt0, mt1);
}

// The GEMM over as[0 .. n) (one x: x, M, K, ldx of as[0]; each matrix its
// own W, N, bias and y), dot: BF16 weights with vdpbf16ps (gemm_dot_*
// above), else f32 FMA. x is packed once, and the tasks of all the matrices
// (each matrix's own grid, as a call of its own would make it) are one pool
// job: q/k/v or gate/up cost two jobs instead of two per matrix.
template <detail::TaskFn Task, detail::TaskFn Pack, bool dot>
void gemm_multi(const MatmulArgs* as, int n, const Runner& runner) {
  const MatmulArgs& a = as[0];
  MultiJob<GemmCtx, Task> j;
  GemmCtx& c0 = j.ctx[0];
  c0 = GemmCtx{};
  c0.a = &a;
  constexpr int64_t MR = dot ? kMR : kFmaMR, NC = dot ? kNC : kFmaNC;
  c0.n_mt = (a.M + MR - 1) / MR;
  const bool small_m = a.M <= kSmallMRows;
  const int64_t step = dot ? 2 : 1;  // the dot path works in k-pairs
  c0.kc = imin(small_m ? kKCSmallM : (dot ? kKCDot : kFmaKC), round_up(a.K, step));
  c0.n_kb = (a.K + c0.kc - 1) / c0.kc;
  c0.xp = detail::scratch(detail::kScratchShared, c0.n_mt * c0.n_kb * c0.kc / step * MR);
  const int64_t T = runner.n_threads;
  for (int i = 0; i < n; ++i) {
    GemmCtx& c = j.ctx[i];
    if (i > 0) c = c0;  // the packed x and its blocking
    c.a = &as[i];
    const int64_t N = as[i].N;
    // W rows per task, fewer when N is small so every thread has work.
    c.nb = imin(small_m ? kNBSmallM : kNB, imax(NC, round_up((N + 2 * T - 1) / (2 * T), NC)));
    c.n_ntasks = (N + c.nb - 1) / c.nb;
    // Split M as well when there are not enough W blocks for the threads.
    int64_t m_chunks = c.n_ntasks >= 2 * T ? 1 : imin(c.n_mt, (2 * T + c.n_ntasks - 1) / c.n_ntasks);
    c.mt_per_task = (c.n_mt + m_chunks - 1) / m_chunks;
    m_chunks = (c.n_mt + c.mt_per_task - 1) / c.mt_per_task;
    j.first_task[i + 1] = j.first_task[i] + c.n_ntasks * m_chunks;
  }
  if (T == 1) {
    for (int64_t mt = 0; mt < c0.n_mt; ++mt) Pack(&c0, mt, 0);
    for (int64_t t = 0; t < j.first_task[n]; ++t) j.task(&j, t, 0);
    return;
  }
  runner.run(runner.pool, c0.n_mt, Pack, &c0);
  runner.run(runner.pool, j.first_task[n], &decltype(j)::task, &j);
}

void gemm(const MatmulArgs* as, int n, const Runner& runner, bool dot) {
  if (dot)
    gemm_multi<&gemm_dot_task, &gemm_dot_pack_x_task, true>(as, n, runner);
  else
    gemm_multi<&gemm_task, &gemm_pack_x_task, false>(as, n, runner);
}

// ================================================================= attention

// ---------------------------------------------------------------- rows sharing one K/V head
// attention_rows (ops.h): the query rows of a GQA group (and the tokens of a
// prompt) read the same keys and values, so each chunk of cache blocks is
// widened to contiguous f32 once (I8: times its per-slot scales; F32: copied,
// so that rows stream one contiguous buffer) into an L2-resident buffer, and
// every row's dot products / value sums run over the whole chunk from there.
// Scores of all rows are kept ([row][n_ctx]) between the two passes.

// dst[t][0 .. hd) = block token t of kv_head as f32, t < nt (I8: times its scale).
template <DType T>
void widen_block(const typename Ld<T>::E* src, int64_t token_stride, int hd, int64_t nt, const float* scales,
                 int64_t scale_stride, float* dst) {
  for (int64_t t = 0; t < nt; ++t) {
    const typename Ld<T>::E* s = src + t * token_stride;
    float* d = dst + t * hd;
    __m512 sc = _mm512_set1_ps(1.0f);
    if constexpr (T == DType::I8) sc = _mm512_set1_ps(scales[t * scale_stride]);
    int i = 0;
    for (; i + 16 <= hd; i += 16) {
      __m512 v = Ld<T>::load(s + i);
      if constexpr (T == DType::I8) v = _mm512_mul_ps(v, sc);
      _mm512_storeu_ps(d + i, v);
    }
    if (i < hd) {
      const __mmask16 m = tail_mask(hd - i);
      __m512 v = Ld<T>::load(s + i, m);
      if constexpr (T == DType::I8) v = _mm512_mul_ps(v, sc);
      _mm512_mask_storeu_ps(d + i, m, v);
    }
  }
}

// The 4 keys tg .. tg + 3 of nt at base (stride hd) as pointers; past the
// last key they repeat key tg (those lanes are never stored). False when no
// key is left.
template <typename E>
inline bool keys4(const E* base, int64_t tg, int64_t nt, int64_t hd, const E* (&kp)[4]) {
  const int nk = int(imax(0, imin(4, nt - tg)));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) kp[i] = base + (tg + (i < nk ? i : 0)) * hd;
  return nk > 0;
}

// The score loop of the row kernels, for R rows of one context length:
// out_r[t] = scale * q_r . K_t + slope_r * (j0 + t - (n_ctx - 1)), t < nt,
// K_t = kb + t * hd. Keys go 16 at a time, in 4 groups of 4: dot4(kp, acc)
// leaves in acc[r][i] row r's 16 lanes of partial products with key kp[i],
// which hsum4 and sum_lanes4 fold into the 16 totals (no per-key
// horizontal sum).
template <int R, typename E, typename Dot4>
inline void row_scores_by16(const E* kb, int64_t hd, int64_t nt, int64_t j0, int64_t n_ctx, float scale,
                            const float* slope, float* const* out, Dot4&& dot4) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t t = 0; t < nt; t += 16) {
    __m512 r[R][4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const E* kp[4];
      if (!keys4(kb, t + 4 * g, nt, hd, kp)) {
#pragma GCC unroll 2
        for (int i = 0; i < R; ++i) r[i][g] = _mm512_setzero_ps();
        continue;
      }
      __m512 acc[R][4];
      dot4(kp, acc);
#pragma GCC unroll 2
      for (int i = 0; i < R; ++i) r[i][g] = hsum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
    const __mmask16 m = tail_mask(nt - t);
    const __m512 idx = _mm512_add_ps(_mm512_set1_ps(float(j0 + t - (n_ctx - 1))), iota);
#pragma GCC unroll 2
    for (int i = 0; i < R; ++i)
      _mm512_mask_storeu_ps(out[i] + t, m,
                            _mm512_fmadd_ps(sum_lanes4(r[i][0], r[i][1], r[i][2], r[i][3]), vscale,
                                            _mm512_mul_ps(_mm512_set1_ps(slope[i]), idx)));
  }
}

// One row's scores over widened f32 keys (row_scores_by16). NV = hd / 16
// when hd is a multiple of 16 up to 128 (q then lives in registers), 0 for
// any other hd (masked tail loads).
template <int NV>
void row_scores(const float* q, const float* kf, int hd, int64_t nt, int64_t j0, int64_t n_ctx, float scale,
                float slope, float* scores) {
  __m512 qv[NV > 0 ? NV : 1];
  if constexpr (NV > 0) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) qv[v] = _mm512_loadu_ps(q + 16 * v);
  }
  const float slopes[1] = {slope};
  float* const outs[1] = {scores};
  row_scores_by16<1>(kf, hd, nt, j0, n_ctx, scale, slopes, outs, [&](const float* const* kp, __m512(&acc)[1][4]) {
    if constexpr (NV > 0) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) acc[0][i] = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kp[i]));
#pragma GCC unroll 8
      for (int v = 1; v < NV; ++v)
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) acc[0][i] = _mm512_fmadd_ps(qv[v], _mm512_loadu_ps(kp[i] + 16 * v), acc[0][i]);
    } else {
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) acc[0][i] = _mm512_setzero_ps();
      int d = 0;
      for (; d + 16 <= hd; d += 16) {
        const __m512 qd = _mm512_loadu_ps(q + d);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) acc[0][i] = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kp[i] + d), acc[0][i]);
      }
      if (d < hd) {
        const __mmask16 m = tail_mask(hd - d);
        const __m512 qd = _mm512_maskz_loadu_ps(m, q + d);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
          acc[0][i] = _mm512_fmadd_ps(qd, _mm512_maskz_loadu_ps(m, kp[i] + d), acc[0][i]);
      }
    }
  });
}

void row_scores_any(const float* q, const float* kf, int hd, int64_t nt, int64_t j0, int64_t n_ctx, float scale,
                    float slope, float* scores) {
  switch (hd % 16 == 0 && hd <= 128 ? hd / 16 : 0) {
    case 1: return row_scores<1>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 2: return row_scores<2>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 3: return row_scores<3>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 4: return row_scores<4>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 5: return row_scores<5>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 6: return row_scores<6>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 7: return row_scores<7>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    case 8: return row_scores<8>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
    default: return row_scores<0>(q, kf, hd, nt, j0, n_ctx, scale, slope, scores);
  }
}

// row_scores for two rows of the same context length (a GQA group's heads
// at one token): every K load feeds both rows' FMAs, half the loads per FMA.
// NV = hd / 16 (hd a multiple of 16 up to 128).
template <int NV>
void row_scores2(const float* qa, const float* qb, const float* kf, int64_t nt, int64_t j0, int64_t n_ctx,
                 float scale, float slope_a, float slope_b, float* sa, float* sb) {
  __m512 qva[NV], qvb[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    qva[v] = _mm512_loadu_ps(qa + 16 * v);
    qvb[v] = _mm512_loadu_ps(qb + 16 * v);
  }
  const float slopes[2] = {slope_a, slope_b};
  float* const outs[2] = {sa, sb};
  row_scores_by16<2>(kf, 16 * NV, nt, j0, n_ctx, scale, slopes, outs, [&](const float* const* kp, __m512(&acc)[2][4]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 k = _mm512_loadu_ps(kp[i]);
      acc[0][i] = _mm512_mul_ps(qva[0], k);
      acc[1][i] = _mm512_mul_ps(qvb[0], k);
    }
#pragma GCC unroll 8
    for (int v = 1; v < NV; ++v)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m512 k = _mm512_loadu_ps(kp[i] + 16 * v);
        acc[0][i] = _mm512_fmadd_ps(qva[v], k, acc[0][i]);
        acc[1][i] = _mm512_fmadd_ps(qvb[v], k, acc[1][i]);
      }
  });
}

// Both rows' scores; false when hd has no register-resident variant.
bool row_scores2_any(const float* qa, const float* qb, const float* kf, int hd, int64_t nt, int64_t j0,
                     int64_t n_ctx, float scale, float slope_a, float slope_b, float* sa, float* sb) {
  switch (hd % 16 == 0 && hd <= 128 ? hd / 16 : 0) {
    case 1: row_scores2<1>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 2: row_scores2<2>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 3: row_scores2<3>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 4: row_scores2<4>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 5: row_scores2<5>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 6: row_scores2<6>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 7: row_scores2<7>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    case 8: row_scores2<8>(qa, qb, kf, nt, j0, n_ctx, scale, slope_a, slope_b, sa, sb); return true;
    default: return false;
  }
}

// out_r[d0 .. d0 + 16 NV) (masked to hd) (+)= sum_{t < nt} p_r[t] * V_t for
// R = 1 or 2 rows, V_t = vf + t * hd. Two accumulator sets either way: one
// row alternates keys between them (two FMA chains), two rows take one set
// each and every V load feeds both.
template <int NV, int R>
void row_values(const float* const* p, const float* vf, int hd, int64_t nt, int d0, bool first, float* const* out) {
  static_assert(R == 1 || R == 2);
  __mmask16 masks[NV];
  __m512 acc[2][NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    masks[v] = tail_mask(imax(0, hd - d0 - v * 16));
    acc[0][v] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(masks[v], out[0] + d0 + v * 16);
    acc[1][v] = first || R == 1 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(masks[v], out[R - 1] + d0 + v * 16);
  }
  const float* vp = vf + d0;
  const float *pa = p[0], *pb = p[R - 1];
  int64_t t = 0;
  if constexpr (R == 1) {
    for (; t + 2 <= nt; t += 2, vp += 2 * hd) {
      const __m512 p0 = _mm512_set1_ps(pa[t]), p1 = _mm512_set1_ps(pa[t + 1]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        acc[0][v] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(masks[v], vp + v * 16), acc[0][v]);
        acc[1][v] = _mm512_fmadd_ps(p1, _mm512_maskz_loadu_ps(masks[v], vp + hd + v * 16), acc[1][v]);
      }
    }
  }
  for (; t < nt; ++t, vp += hd) {  // R = 2: every key; R = 1: the odd last one
    const __m512 p0 = _mm512_set1_ps(pa[t]), p1 = _mm512_set1_ps(pb[t]);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m512 x = _mm512_maskz_loadu_ps(masks[v], vp + v * 16);
      acc[0][v] = _mm512_fmadd_ps(p0, x, acc[0][v]);
      if constexpr (R == 2) acc[1][v] = _mm512_fmadd_ps(p1, x, acc[1][v]);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    if constexpr (R == 1) {
      _mm512_mask_storeu_ps(out[0] + d0 + v * 16, masks[v], _mm512_add_ps(acc[0][v], acc[1][v]));
    } else {
      _mm512_mask_storeu_ps(out[0] + d0 + v * 16, masks[v], acc[0][v]);
      _mm512_mask_storeu_ps(out[1] + d0 + v * 16, masks[v], acc[1][v]);
    }
  }
}

template <int R>
void row_values_all(const float* const* p, const float* vf, int hd, int64_t nt, bool first, float* const* out) {
  for (int d0 = 0; d0 < hd; d0 += 128) {
    switch ((imin(128, hd - d0) + 15) / 16) {
      case 1: row_values<1, R>(p, vf, hd, nt, d0, first, out); break;
      case 2: row_values<2, R>(p, vf, hd, nt, d0, first, out); break;
      case 3: row_values<3, R>(p, vf, hd, nt, d0, first, out); break;
      case 4: row_values<4, R>(p, vf, hd, nt, d0, first, out); break;
      case 5: row_values<5, R>(p, vf, hd, nt, d0, first, out); break;
      case 6: row_values<6, R>(p, vf, hd, nt, d0, first, out); break;
      case 7: row_values<7, R>(p, vf, hd, nt, d0, first, out); break;
      default: row_values<8, R>(p, vf, hd, nt, d0, first, out); break;
    }
  }
}

// Keys per widened chunk: 16 KiB of f32, whole cache blocks, so that every
// row reads it from L1 (64 KiB chunks in L2: ctx-512 bench 117 us; 16 KiB:
// 102-104 us).
constexpr int64_t kAttnChunkFloats = 4096;
// How far ahead attention_rows prefetches cache blocks, into L2. Measured on
// bench_kernels attention/cold (1 thread, K/V from memory each call), bf16:
// 32q4kv hd64 ctx512 114-120 us without a working prefetch, 82-94 us with
// 16 KB into L2 (hot cache: 71-78 us); 16q16kv hd128 513-536 -> 375-407 us.
// Into L1 (prefetcht0) it was no faster than none (the widened chunk and the
// prefetched lines evict each other); 8, 32 and 64 KB ahead measured alike.
constexpr int64_t kAttnPrefetchBytes = 16384;

// First cache row of kv_head in block b of a sequence (PagedKV: the head's
// block_size rows of head_dim values are contiguous, its scales too).
inline int64_t head_first_row(const PagedKV& kv, const int32_t* table, int kv_head, int64_t b) {
  return kv_block_row(kv, table[b], kv_head);
}

// One K/V head of one sequence, walked in chunks for attention_rows: each
// chunk is whole cache blocks widened to f32 ([t][hd], about
// kAttnChunkFloats, L1-sized) in the calling thread's scratch. The blocks
// are scattered (block table), and widening a chunk asks for its bytes
// faster than memory delivers them, while the dot products that follow ask
// for none. So the chunks are one sequence (K chunks, then V chunks) and
// while the rows work on chunk s, the caller prefetches (in parts, one per
// row or tile) the blocks of chunk s + ahead, about kAttnPrefetchBytes
// ahead: the fetch overlaps the arithmetic, also across the K -> V turn.
template <DType T>
struct KvChunks {
  using E = typename Ld<T>::E;
  const PagedKV& kv;
  int kv_head;
  const int32_t* block_table;
  int hd, bs;
  int64_t n_max, chunk, n_chunks, n_blocks, block_bytes, scale_bytes, ahead;
  float* wide;

  KvChunks(const PagedKV& kv_, int kv_head_, const int32_t* block_table_, int64_t n_max_)
      : kv(kv_), kv_head(kv_head_), block_table(block_table_), hd(kv_.head_dim), bs(kv_.block_size), n_max(n_max_) {
    chunk = imax(1, kAttnChunkFloats / hd / bs) * bs;
    n_chunks = (n_max + chunk - 1) / chunk;
    n_blocks = (n_max + bs - 1) / bs;
    block_bytes = int64_t(bs) * hd * int64_t(sizeof(E));
    scale_bytes = int64_t(bs) * int64_t(sizeof(float));
    ahead = imax(1, kAttnPrefetchBytes / (chunk / bs * block_bytes));
    wide = detail::scratch(detail::kScratchAttnBlock, imin(chunk, n_max) * hd);
  }
  int64_t head_rows(int64_t b) const { return head_first_row(kv, block_table, kv_head, b); }
  // Prefetch part `part` of `parts` of the blocks of chunk s of the K-then-V
  // sequence. (prefetch_l2, not _mm_prefetch: an _mm_prefetch loop was
  // compiled to nothing.)
  void prefetch(int64_t s, int part, int parts) const {
    if (s >= 2 * n_chunks) return;
    const bool v = s >= n_chunks;
    const char* base = static_cast<const char*>(v ? kv.v : kv.k);
    const float* scales = v ? kv.v_scale : kv.k_scale;
    const int64_t b0 = (v ? s - n_chunks : s) * (chunk / bs), nb = imin(n_blocks - b0, chunk / bs);
    for (int64_t b = b0 + nb * part / parts, e = b0 + nb * (part + 1) / parts; b < e; ++b) {
      const int64_t r0 = head_rows(b);
      const char* p = base + r0 * hd * int64_t(sizeof(E));
      for (int64_t o = 0; o < block_bytes; o += 64) prefetch_l2(p + o);
      if (scales) {
        const char* sp = reinterpret_cast<const char*>(scales + r0);
        for (int64_t o = 0; o < scale_bytes; o += 64) prefetch_l2(sp + o);
        prefetch_l2(sp + scale_bytes - 1);
      }
    }
  }
  void prefetch_first() const {
    for (int64_t c = 0; c < ahead; ++c) prefetch(c, 0, 1);
  }
  // The K (v = false) or V chunks in order: each widened, then f(j0, s) for
  // its first position j0 (wide holds positions j0 .. j0 + chunk); s is the
  // chunk of the sequence to prefetch (in the caller's parts) meanwhile.
  template <typename F>
  void for_each_chunk(bool v, F&& f) const {
    for (int64_t j0 = 0, c = v ? n_chunks : 0; j0 < n_max; j0 += chunk, ++c) {
      widen(v, j0, imin(chunk, n_max - j0));
      f(j0, c + ahead);
    }
  }
  // wide[t][0 .. hd) = token j0 + t of kv_head (K or V) in f32, t < nt.
  void widen(bool v, int64_t j0, int64_t nt) const {
    const void* base = v ? kv.v : kv.k;
    const float* scales = v ? kv.v_scale : kv.k_scale;
    for (int64_t t = 0; t < nt; t += bs) {
      const int64_t r0 = head_rows((j0 + t) / bs);
      widen_block<T>(static_cast<const E*>(base) + r0 * hd, hd, hd, imin(bs, nt - t), scales ? scales + r0 : nullptr, 1,
                     wide + t * hd);
    }
  }
};

// attention_rows one row (or a pair of rows of one length) at a time: the
// decode path (one token's GQA group of heads).
template <DType T>
void attention_rows_t(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                      float scale) {
  const int hd = kv.head_dim;
  int64_t n_max = 0;
  for (int r = 0; r < n_rows; ++r) n_max = imax(n_max, rows[r].n_ctx);
  const int64_t ld_s = (n_max + 15) / 16 * 16;
  float* scores = detail::scratch(detail::kScratchAttnScores, int64_t(n_rows) * ld_s);
  const KvChunks<T> kc(kv, kv_head, block_table, n_max);
  const float* wide = kc.wide;
  kc.prefetch_first();
  kc.for_each_chunk(false, [&](int64_t j0, int64_t pf) {
    for (int r = 0; r < n_rows; ++r) {
      kc.prefetch(pf, r, n_rows);
      const AttnRow& row = rows[r];
      if (row.n_ctx <= j0) continue;
      const int64_t nt = imin(kc.chunk, row.n_ctx - j0);
      // Pairs of rows of one context length share the K loads.
      if (r + 1 < n_rows && rows[r + 1].n_ctx == row.n_ctx &&
          row_scores2_any(row.q, rows[r + 1].q, wide, hd, nt, j0, row.n_ctx, scale, row.alibi_slope,
                          rows[r + 1].alibi_slope, scores + r * ld_s + j0, scores + (r + 1) * ld_s + j0)) {
        kc.prefetch(pf, ++r, n_rows);
        continue;
      }
      row_scores_any(row.q, wide, hd, nt, j0, row.n_ctx, scale, row.alibi_slope, scores + r * ld_s + j0);
    }
  });
  for (int r = 0; r < n_rows; ++r) {
    if (rows[r].n_ctx > 0)
      softmax(scores + r * ld_s, rows[r].n_ctx);
    else
      for (int d = 0; d < hd; ++d) rows[r].out[d] = 0.0f;
  }
  kc.for_each_chunk(true, [&](int64_t j0, int64_t pf) {
    for (int r = 0; r < n_rows; ++r) {
      kc.prefetch(pf, r, n_rows);
      const AttnRow& row = rows[r];
      if (row.n_ctx <= j0) continue;
      const int64_t nt = imin(kc.chunk, row.n_ctx - j0);
      const float* p[2] = {scores + r * ld_s + j0, scores + (r + 1) * ld_s + j0};
      float* const out[2] = {row.out, r + 1 < n_rows ? rows[r + 1].out : nullptr};
      if (r + 1 < n_rows && rows[r + 1].n_ctx == row.n_ctx) {
        row_values_all<2>(p, wide, hd, nt, j0 == 0, out);
        kc.prefetch(pf, ++r, n_rows);
        continue;
      }
      row_values_all<1>(p, wide, hd, nt, j0 == 0, out);
    }
  });
}

// ---------------------------------------------------------------- BF16 cache, BF16 dot products
// attention_rows_t's job on a BF16 cache where the CPU has AVX-512 BF16
// (vdpbf16ps: pairs of BF16 products summed into f32 lanes, products exact):
// the cache blocks are multiplied as they are stored, with no widening to
// f32, and each q and each softmax probability enters as the sum of two
// BF16 numbers, hi = bf16(x) and lo = bf16(x - hi) (x - hi - lo is at most
// 2^-18 |x|, so the results are the f32 path's within f32-level bounds and
// the golden logits do not move; q and p as one BF16 each moved them by up
// to 0.01, docs/performance.md). A score is hd / 16 vdpbf16ps per key (hi
// and lo halves); the value sums take keys in pairs (V rows t and t + 1
// interleaved in registers with vpunpck[lh]wd, once for all rows of a
// group), 4 hd / 32 vdpbf16ps per pair of keys and row. Against the f32 path
// this drops the widening of every block and half the loads; bench_kernels
// attention/cold/bf16 32q4kv_hd64/ctx512/rows 86-95 -> 70-74 us,
// 16q16kv_hd128 385-442 -> 223-224 us.
//
// Rows are taken in groups of up to 3 of one context length for the scores
// (each K load feeds all of them) and of RV for the values, the rows left
// over as one group (a GQA group of 7 heads: scores 3 + 2 + 2, values 4 + 3;
// single rows' passes are bound by the latency of their few accumulator
// chains); the head's blocks are walked in order, K then V, and the first
// group prefetches kAttnPrefetchBytes ahead into L2 (the other rows find the
// blocks there). The softmax's exponentials go straight to BF16 hi / lo and
// the value sums are scaled by 1 / sum at the end. Against pairs of rows,
// single left-over rows and a separate softmax (bench_kernels, binaries in
// turn, 6 rounds, best of 5 each): attention/cold/bf16/14q2kv_hd64/ctx512
// 35.6 -> 33.6 us (faster in 6 of 6), 16q16kv_hd128 263 -> 240 us,
// 32q4kv_hd64 alike (8 rows: groups 3 + 3 + 2 and 4 + 4).
inline __m512 bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// 32 floats x[0 .. 32) as hi + lo, each 32 BF16 in order.
inline void split_bf16x32(const float* x, __m512bh* hi, __m512bh* lo) {
  const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  *hi = _mm512_cvtne2ps_pbh(b, a);
  const __m512i h = (__m512i)*hi;
  const __m512 ah = bf16_to_f32(_mm512_castsi512_si256(h)), bh = bf16_to_f32(_mm512_extracti64x4_epi64(h, 1));
  *lo = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bh), _mm512_sub_ps(a, ah));
}

// Scores of R (1 or 2) rows for the nt keys of one block at K rows kb
// (stride 32 NV), the first key at position j (row_scores_by16). q: [2 NV]
// per row (hi parts, then lo parts).
template <int NV, int R>
inline void bd_block_scores(const __m512bh (*q)[2 * NV], const uint16_t* kb, int64_t nt, int64_t j, int64_t n_ctx,
                            float scale, const float* slope, float* const* out) {
  row_scores_by16<R>(kb, 32 * NV, nt, j, n_ctx, scale, slope, out, [&](const uint16_t* const* kp, __m512(&acc)[R][4]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m512bh k = (__m512bh)_mm512_loadu_si512(kp[i] + 32 * v);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) acc[r][i] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][i], q[r][v], k), q[r][NV + v], k);
      }
  });
}

// acc_r += sum over the nt keys of one block (V rows at vb, stride 32 NV, the
// first key at position j) of p_r[key] * V[key], R rows. ph / pl: each row's
// probabilities as BF16 hi / lo parts, indexed by position; a pair of keys
// (j + t, j + t + 1) is one u32 of each. An odd last key pairs with a zero
// vector (its partner's p, past the row's end, is not used).
template <int NV, int R>
inline void bd_block_values(const uint16_t* const* ph, const uint16_t* const* pl, const uint16_t* vb, int64_t nt,
                            int64_t j, __m512 (&acc)[R][NV][2]) {
  constexpr int hd = 32 * NV;
  for (int64_t t = 0; t < nt; t += 2) {
    const uint16_t* v0 = vb + t * hd;
    const bool pair = t + 1 < nt;
    __m512bh lo[NV], hi[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m512i a = _mm512_loadu_si512(v0 + 32 * v);
      const __m512i b = pair ? _mm512_loadu_si512(v0 + hd + 32 * v) : _mm512_setzero_si512();
      lo[v] = (__m512bh)_mm512_unpacklo_epi16(a, b);
      hi[v] = (__m512bh)_mm512_unpackhi_epi16(a, b);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      uint32_t wh, wl;
      memcpy(&wh, ph[r] + j + t, 4);
      memcpy(&wl, pl[r] + j + t, 4);
      const __m512bh pvh = (__m512bh)_mm512_set1_epi32(int(wh)), pvl = (__m512bh)_mm512_set1_epi32(int(wl));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        acc[r][v][0] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][v][0], lo[v], pvh), lo[v], pvl);
        acc[r][v][1] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][v][1], hi[v], pvh), hi[v], pvl);
      }
    }
  }
}

// Rows in one call of the row path at most (attention_rows gives it fewer
// than kLaneMinRows; more are taken in calls of this many).
constexpr int kBf16DotMaxRows = 11;

template <int NV>
void attention_rows_bf16dot(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head,
                            const int32_t* block_table, float scale) {
  constexpr int hd = 32 * NV;
  constexpr int RV = NV <= 2 ? 4 : 2;  // rows per value group: RV x NV x 2 accumulators
  constexpr int RS = NV <= 2 ? 3 : 2;  // rows per score group: RS x 4 accumulators
  for (; n_rows > kBf16DotMaxRows; rows += kBf16DotMaxRows, n_rows -= kBf16DotMaxRows)
    attention_rows_bf16dot<NV>(rows, kBf16DotMaxRows, kv, kv_head, block_table, scale);
  const int bs = kv.block_size;
  int64_t n_max = 0;
  for (int r = 0; r < n_rows; ++r) n_max = imax(n_max, rows[r].n_ctx);
  if (n_max == 0) {
    for (int r = 0; r < n_rows; ++r)
      for (int d = 0; d < hd; ++d) rows[r].out[d] = 0.0f;
    return;
  }
  // Scores [row][ld_s] f32 (then 1 / the softmax's sum per row); the
  // exponentials [row][hi, lo][ld_s] BF16, zero from the row's n_ctx on
  // (room for the odd last key's partner).
  const int64_t ld_s = (n_max + 2 + 15) / 16 * 16;
  float* scores = detail::scratch(detail::kScratchAttnScores, int64_t(n_rows) * (ld_s + 1));
  float* inv_sum = scores + int64_t(n_rows) * ld_s;
  auto* probs = reinterpret_cast<uint16_t*>(detail::scratch(detail::kScratchAttnBlock, int64_t(n_rows) * ld_s));
  const auto* K = static_cast<const uint16_t*>(kv.k);
  const auto* V = static_cast<const uint16_t*>(kv.v);
  const int64_t n_blocks = (n_max + bs - 1) / bs;
  const int64_t block_bytes = int64_t(bs) * hd * 2;
  const int64_t ahead = imax(1, kAttnPrefetchBytes / block_bytes);
  // Block s of the K-then-V walk, into L2.
  auto prefetch = [&](int64_t s) {
    if (s >= 2 * n_blocks) return;
    const bool v = s >= n_blocks;
    const char* p = reinterpret_cast<const char*>((v ? V : K) +
                                                  head_first_row(kv, block_table, kv_head, v ? s - n_blocks : s) * hd);
    for (int64_t o = 0; o < block_bytes; o += 64) prefetch_l2(p + o);
  };
  for (int64_t s = 0; s < ahead; ++s) prefetch(s);

  // Each row's q as BF16 hi / lo parts, and the score groups: up to RS
  // neighbouring rows of one context length (4 as 2 + 2, not 3 + 1).
  __m512bh q[kBf16DotMaxRows][2 * NV];
  int group_row[kBf16DotMaxRows], group_size[kBf16DotMaxRows], n_groups = 0;
  for (int r = 0; r < n_rows; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) split_bf16x32(rows[r].q + 32 * v, &q[r][v], &q[r][NV + v]);
  for (int r = 0; r < n_rows;) {
    int m = 1;
    while (r + m < n_rows && rows[r + m].n_ctx == rows[r].n_ctx) ++m;
    const int g = m == 4 ? 2 : imin(RS, m);
    group_row[n_groups] = r;
    group_size[n_groups++] = g;
    r += g;
  }
  // Scores, group by group, each over all its blocks; the first group
  // prefetches the blocks ahead (K, then the first of V), the others find K
  // in L2. (Walking the blocks once with every group on each block, K read
  // from memory once, measured slower: bench_kernels attention/cold.)
  auto group_scores = [&]<int R>(int r0) {
    const int64_t n_ctx = rows[r0].n_ctx;
    float slopes[R];
    float* base[R];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      slopes[i] = rows[r0 + i].alibi_slope;
      base[i] = scores + (r0 + i) * ld_s;
    }
    for (int64_t b = 0, j = 0; j < n_ctx; ++b, j += bs) {
      if (r0 == 0) prefetch(b + ahead);
      float* outs[R];
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) outs[i] = base[i] + j;
      bd_block_scores<NV, R>(&q[r0], K + head_first_row(kv, block_table, kv_head, b) * hd, imin(bs, n_ctx - j), j,
                             n_ctx, scale, slopes, outs);
    }
  };
  for (int g = 0; g < n_groups; ++g) {
    switch (group_size[g]) {
      case 3: if constexpr (RS >= 3) group_scores.template operator()<3>(group_row[g]); break;
      case 2: group_scores.template operator()<2>(group_row[g]); break;
      default: group_scores.template operator()<1>(group_row[g]); break;
    }
  }
  // The softmax's exponentials, exp(s - max), as BF16 hi / lo straight from
  // the scores (one pass after the max), and 1 / their sum per row, which
  // the value sums take at the end: no normalizing pass over the row.
  for (int r = 0; r < n_rows; ++r) {
    const float* sr = scores + r * ld_s;
    uint16_t* ph = probs + 2 * r * ld_s;
    const int64_t n = rows[r].n_ctx;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, tail_mask(n - i), sr + i));
    const __m512 vmax = _mm512_set1_ps(n > 0 ? _mm512_reduce_max_ps(mx) : 0.0f);
    // Two chains of double adds, 16 scores each, named (a sum[i / 16 & 1]
    // array lived on the stack: every add waited on a store and a load).
    auto exp16 = [&](int64_t i, __m512d& sum) {
      const __mmask16 m = tail_mask(imax(0, n - i));
      const __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, sr + i), vmax)));
      sum = _mm512_add_pd(sum, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e)),
                                             _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1))));
      const __m256i h = (__m256i)_mm512_cvtneps_pbh(e);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ph + i), h);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ph + ld_s + i),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(e, bf16_to_f32(h))));
    };
    __m512d sum0 = _mm512_setzero_pd(), sum1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < ld_s; i += 32) {
      exp16(i, sum0);
      if (i + 16 < ld_s) exp16(i + 16, sum1);
    }
    inv_sum[r] = n > 0 ? float(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(sum0, sum1))) : 0.0f;
  }
  // Values, RV rows at a time (the rest as one group), each group over its
  // longest context; the first group prefetches V ahead.
  const __m512i lo_idx = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i hi_idx = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  auto group_values = [&]<int R>(int r0) {
    __m512 acc[R][NV][2];
    int64_t n_grp = 0;
    const uint16_t *ph[R], *pl[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      n_grp = imax(n_grp, rows[r0 + r].n_ctx);
      ph[r] = probs + 2 * (r0 + r) * ld_s;
      pl[r] = ph[r] + ld_s;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v][0] = acc[r][v][1] = _mm512_setzero_ps();
    }
    for (int64_t b = 0, j = 0; j < n_grp; ++b, j += bs) {
      if (r0 == 0) prefetch(n_blocks + b + ahead);
      bd_block_values<NV, R>(ph, pl, V + head_first_row(kv, block_table, kv_head, b) * hd, imin(bs, n_grp - j), j, acc);
    }
    // Lane 4L + i of acc[.][v][0] holds d = 32 v + 8 L + i, of acc[.][v][1]
    // d = 32 v + 8 L + 4 + i (vpunpck[lh]wd work within 128-bit lanes);
    // the softmax's 1 / sum applies here.
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float* out = rows[r0 + r].out;
      const __m512 inv = _mm512_set1_ps(inv_sum[r0 + r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        _mm512_storeu_ps(out + 32 * v, _mm512_mul_ps(_mm512_permutex2var_ps(acc[r][v][0], lo_idx, acc[r][v][1]), inv));
        _mm512_storeu_ps(out + 32 * v + 16,
                         _mm512_mul_ps(_mm512_permutex2var_ps(acc[r][v][0], hi_idx, acc[r][v][1]), inv));
      }
    }
  };
  int r0 = 0;
  for (; r0 + RV <= n_rows; r0 += RV) group_values.template operator()<RV>(r0);
  switch (n_rows - r0) {
    case 3: if constexpr (RV > 3) group_values.template operator()<3>(r0); break;
    case 2: if constexpr (RV > 2) group_values.template operator()<2>(r0); break;
    case 1: group_values.template operator()<1>(r0); break;
    default: break;
  }
}

bool attention_rows_bf16dot_any(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head,
                                const int32_t* block_table, float scale) {
  if (!attention_uses_bf16_dot(kv.dtype, kv.head_dim)) return false;
  switch (kv.head_dim / 32) {
    case 1: attention_rows_bf16dot<1>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    case 2: attention_rows_bf16dot<2>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    case 3: attention_rows_bf16dot<3>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    case 4: attention_rows_bf16dot<4>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    case 5: attention_rows_bf16dot<5>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    case 6: attention_rows_bf16dot<6>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    case 7: attention_rows_bf16dot<7>(rows, n_rows, kv, kv_head, block_table, scale); return true;
    default: attention_rows_bf16dot<8>(rows, n_rows, kv, kv_head, block_table, scale); return true;
  }
}

// ---------------------------------------------------------------- rows in lanes
// attention_rows with many rows (a prompt's tokens x a GQA group's heads):
// tiles of 16 rows, one row per lane of a vector, so that nothing is summed
// across lanes. Scores S^T[t][lane] = K_t[d] (broadcast) * Q^T[d][lane]
// summed over d: one FMA per key and dimension for all 16 rows, where the
// row path spends hd/16 FMAs per key and row plus horizontal sums (about 55 %
// of the FMA peak). The softmax is per lane (max and sum run down t), and
// O^T[d][lane] = V_t[d] (broadcast) * P^T[t][lane] summed over t likewise.
// A tile costs hd FMAs per key whatever its row count, so fewer than
// kLaneMinRows rows (decode: one token's group of heads) take the row path.
constexpr int kLaneRows = 16;
constexpr int kLaneMinRows = 12;
constexpr int kMaxLaneTiles = 8;  // tiles per attention_lanes_t call (128 rows)

// One tile: Q^T [hd][16] and O^T [hd][16] in the lanes scratch, and per lane
// the row's n_ctx (as a float: exact below 2^24), ALiBi slope, running max
// of its scores and 1 / sum of their exponentials.
struct LaneTile {
  float* qt;
  float* ot;
  alignas(64) float n_ctx[kLaneRows];
  alignas(64) float slope[kLaneRows];
  alignas(64) float max[kLaneRows];
  alignas(64) float inv[kLaneRows];
  int64_t n_max;  // the tile's longest context
  int n_rows;
  static int64_t floats(int hd) { return 2 * int64_t(hd) * kLaneRows; }
};

// The scores' epilogue: dot[i] (q . K of key j + i per lane) scaled, the
// ALiBi term added, positions >= n_ctx set to -inf; stored, max updated.
template <int KB>
inline void lane_scores_store(LaneTile& tl, const __m512* dot, int64_t j, float scale, float* st) {
  const __m512 n_ctx = _mm512_load_ps(tl.n_ctx), slope = _mm512_load_ps(tl.slope), vscale = _mm512_set1_ps(scale);
  const __m512 last = _mm512_sub_ps(n_ctx, _mm512_set1_ps(1.0f)), ninf = _mm512_set1_ps(-INFINITY);
  __m512 mx = _mm512_load_ps(tl.max);
#pragma GCC unroll 12
  for (int i = 0; i < KB; ++i) {
    const __m512 pos = _mm512_set1_ps(float(j + i));
    __m512 s = _mm512_fmadd_ps(dot[i], vscale, _mm512_mul_ps(slope, _mm512_sub_ps(pos, last)));
    s = _mm512_mask_mov_ps(ninf, _mm512_cmp_ps_mask(pos, n_ctx, _CMP_LT_OQ), s);
    _mm512_store_ps(st + i * kLaneRows, s);
    mx = _mm512_max_ps(mx, s);
  }
  _mm512_store_ps(tl.max, mx);
}

// Scores of KB keys (wide rows k[0 .. KB)) at positions j .. j + KB - 1 for
// the tile's lanes: scale * q . K + slope * (j + i - (n_ctx - 1)), -inf at
// positions >= n_ctx; stored st[i][lane], the running max updated. Four FMA
// chains (d mod 4) keep each sum short.
template <int KB>
inline void lane_scores(LaneTile& tl, const float* k, int hd, int64_t j, float scale, float* st) {
  __m512 acc[4][KB];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)
#pragma GCC unroll 8
    for (int i = 0; i < KB; ++i) acc[c][i] = _mm512_setzero_ps();
  int d = 0;
  for (; d + 4 <= hd; d += 4)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512 q = _mm512_load_ps(tl.qt + (d + c) * kLaneRows);
#pragma GCC unroll 8
      for (int i = 0; i < KB; ++i) acc[c][i] = _mm512_fmadd_ps(_mm512_set1_ps(k[i * hd + d + c]), q, acc[c][i]);
    }
  for (; d < hd; ++d) {
    const __m512 q = _mm512_load_ps(tl.qt + d * kLaneRows);
#pragma GCC unroll 8
    for (int i = 0; i < KB; ++i) acc[0][i] = _mm512_fmadd_ps(_mm512_set1_ps(k[i * hd + d]), q, acc[0][i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < KB; ++i) acc[0][i] = _mm512_add_ps(_mm512_add_ps(acc[0][i], acc[1][i]), _mm512_add_ps(acc[2][i], acc[3][i]));
  lane_scores_store<KB>(tl, acc[0], j, scale, st);
}

constexpr int kLaneKeys = 6;  // keys per lane_scores call: 24 accumulators
void lane_scores_chunk(LaneTile& tl, const float* k, int hd, int64_t j0, int64_t nt, float scale, float* st) {
  int64_t i = 0;
  for (; i + kLaneKeys <= nt; i += kLaneKeys)
    lane_scores<kLaneKeys>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
  switch (nt - i) {
    case 1: return lane_scores<1>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
    case 2: return lane_scores<2>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
    case 3: return lane_scores<3>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
    case 4: return lane_scores<4>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
    case 5: return lane_scores<5>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
    default: return;
  }
}

// Two tiles at once (32 rows): each key element is broadcast once for both,
// so a dimension costs 2 loads of Q^T and KB broadcasts for 2 KB FMAs, 0.6
// loads per FMA where one tile took about 1.2 (a broadcast per FMA and a
// Q^T load per 6 keys); and the 2 KB accumulators are enough independent
// chains without splitting d.
constexpr int kLanePairKeys = 12;  // 24 accumulators
template <int KB>
inline void lane_scores2(LaneTile& ta, LaneTile& tb, const float* k, int hd, int64_t j, float scale, float* sa,
                         float* sb) {
  __m512 acc[2][KB];
#pragma GCC unroll 12
  for (int i = 0; i < KB; ++i) acc[0][i] = acc[1][i] = _mm512_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    const __m512 qa = _mm512_load_ps(ta.qt + d * kLaneRows), qb = _mm512_load_ps(tb.qt + d * kLaneRows);
#pragma GCC unroll 12
    for (int i = 0; i < KB; ++i) {
      const __m512 kb = _mm512_set1_ps(k[i * hd + d]);
      acc[0][i] = _mm512_fmadd_ps(kb, qa, acc[0][i]);
      acc[1][i] = _mm512_fmadd_ps(kb, qb, acc[1][i]);
    }
  }
  lane_scores_store<KB>(ta, acc[0], j, scale, sa);
  lane_scores_store<KB>(tb, acc[1], j, scale, sb);
}

void lane_scores2_chunk(LaneTile& ta, LaneTile& tb, const float* k, int hd, int64_t j0, int64_t nt, float scale,
                        float* sa, float* sb) {
  int64_t i = 0;
  for (; i + kLanePairKeys <= nt; i += kLanePairKeys)
    lane_scores2<kLanePairKeys>(ta, tb, k + i * hd, hd, j0 + i, scale, sa + i * kLaneRows, sb + i * kLaneRows);
  const float* kk = k + i * hd;
  float *a = sa + i * kLaneRows, *b = sb + i * kLaneRows;
  const int64_t j = j0 + i;
  switch (nt - i) {
    case 1: return lane_scores2<1>(ta, tb, kk, hd, j, scale, a, b);
    case 2: return lane_scores2<2>(ta, tb, kk, hd, j, scale, a, b);
    case 3: return lane_scores2<3>(ta, tb, kk, hd, j, scale, a, b);
    case 4: return lane_scores2<4>(ta, tb, kk, hd, j, scale, a, b);
    case 5: return lane_scores2<5>(ta, tb, kk, hd, j, scale, a, b);
    case 6: return lane_scores2<6>(ta, tb, kk, hd, j, scale, a, b);
    case 7: return lane_scores2<7>(ta, tb, kk, hd, j, scale, a, b);
    case 8: return lane_scores2<8>(ta, tb, kk, hd, j, scale, a, b);
    case 9: return lane_scores2<9>(ta, tb, kk, hd, j, scale, a, b);
    case 10: return lane_scores2<10>(ta, tb, kk, hd, j, scale, a, b);
    case 11: return lane_scores2<11>(ta, tb, kk, hd, j, scale, a, b);
    default: return;
  }
}

// st[t][lane] = exp(st - max) for t < n_max (0 where the score is -inf),
// and inv = 1 / sum over t (summed in double like softmax; 0 for a lane
// with no positions).
void lane_softmax(LaneTile& tl, float* st) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 mx = _mm512_load_ps(tl.max);
  mx = _mm512_mask_mov_ps(mx, _mm512_cmp_ps_mask(mx, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t t = 0; t < tl.n_max; ++t) {
    const __m512 s = _mm512_load_ps(st + t * kLaneRows);
    const __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s, ninf, _CMP_NEQ_UQ), exp512(_mm512_sub_ps(s, mx)));
    _mm512_store_ps(st + t * kLaneRows, e);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  alignas(64) double sum[kLaneRows];
  _mm512_store_pd(sum, s0);
  _mm512_store_pd(sum + 8, s1);
  for (int l = 0; l < kLaneRows; ++l) tl.inv[l] = sum[l] > 0 ? float(1.0 / sum[l]) : 0.0f;
}

// O^T[d][lane] (+)= sum_{i < nt} P^T[i][lane] * V_i[d] for d in [d0, d0 + DB):
// two chains (even and odd keys), 2 DB accumulators.
template <int DB>
inline void lane_values(const LaneTile& tl, const float* pt, const float* v, int hd, int64_t nt, int d0, bool first) {
  __m512 a0[DB], a1[DB];
#pragma GCC unroll 12
  for (int e = 0; e < DB; ++e) {
    a0[e] = first ? _mm512_setzero_ps() : _mm512_load_ps(tl.ot + (d0 + e) * kLaneRows);
    a1[e] = _mm512_setzero_ps();
  }
  const float* vp = v + d0;
  int64_t i = 0;
  for (; i + 2 <= nt; i += 2, vp += 2 * hd) {
    const __m512 p0 = _mm512_load_ps(pt + i * kLaneRows), p1 = _mm512_load_ps(pt + (i + 1) * kLaneRows);
#pragma GCC unroll 12
    for (int e = 0; e < DB; ++e) {
      a0[e] = _mm512_fmadd_ps(_mm512_set1_ps(vp[e]), p0, a0[e]);
      a1[e] = _mm512_fmadd_ps(_mm512_set1_ps(vp[hd + e]), p1, a1[e]);
    }
  }
  if (i < nt) {
    const __m512 p0 = _mm512_load_ps(pt + i * kLaneRows);
#pragma GCC unroll 12
    for (int e = 0; e < DB; ++e) a0[e] = _mm512_fmadd_ps(_mm512_set1_ps(vp[e]), p0, a0[e]);
  }
#pragma GCC unroll 12
  for (int e = 0; e < DB; ++e) _mm512_store_ps(tl.ot + (d0 + e) * kLaneRows, _mm512_add_ps(a0[e], a1[e]));
}

constexpr int kLaneDims = 12;  // dimensions per lane_values pass: 24 accumulators
void lane_values_chunk(const LaneTile& tl, const float* pt, const float* v, int hd, int64_t nt, bool first) {
  int d0 = 0;
  for (; d0 + kLaneDims <= hd; d0 += kLaneDims) lane_values<kLaneDims>(tl, pt, v, hd, nt, d0, first);
  switch (hd - d0) {
    case 1: return lane_values<1>(tl, pt, v, hd, nt, d0, first);
    case 2: return lane_values<2>(tl, pt, v, hd, nt, d0, first);
    case 3: return lane_values<3>(tl, pt, v, hd, nt, d0, first);
    case 4: return lane_values<4>(tl, pt, v, hd, nt, d0, first);
    case 5: return lane_values<5>(tl, pt, v, hd, nt, d0, first);
    case 6: return lane_values<6>(tl, pt, v, hd, nt, d0, first);
    case 7: return lane_values<7>(tl, pt, v, hd, nt, d0, first);
    case 8: return lane_values<8>(tl, pt, v, hd, nt, d0, first);
    case 9: return lane_values<9>(tl, pt, v, hd, nt, d0, first);
    case 10: return lane_values<10>(tl, pt, v, hd, nt, d0, first);
    case 11: return lane_values<11>(tl, pt, v, hd, nt, d0, first);
    default: return;
  }
}

// lane_values for two tiles: each V element broadcast once for both, 2 DB
// accumulators (one chain each).
template <int DB>
inline void lane_values2(const LaneTile& ta, const LaneTile& tb, const float* pa, const float* pb, const float* v,
                         int hd, int64_t nt, int d0, bool first) {
  __m512 a[2][DB];
#pragma GCC unroll 12
  for (int e = 0; e < DB; ++e) {
    a[0][e] = first ? _mm512_setzero_ps() : _mm512_load_ps(ta.ot + (d0 + e) * kLaneRows);
    a[1][e] = first ? _mm512_setzero_ps() : _mm512_load_ps(tb.ot + (d0 + e) * kLaneRows);
  }
  const float* vp = v + d0;
  for (int64_t i = 0; i < nt; ++i, vp += hd) {
    const __m512 p0 = _mm512_load_ps(pa + i * kLaneRows), p1 = _mm512_load_ps(pb + i * kLaneRows);
#pragma GCC unroll 12
    for (int e = 0; e < DB; ++e) {
      const __m512 vb = _mm512_set1_ps(vp[e]);
      a[0][e] = _mm512_fmadd_ps(vb, p0, a[0][e]);
      a[1][e] = _mm512_fmadd_ps(vb, p1, a[1][e]);
    }
  }
#pragma GCC unroll 12
  for (int e = 0; e < DB; ++e) {
    _mm512_store_ps(ta.ot + (d0 + e) * kLaneRows, a[0][e]);
    _mm512_store_ps(tb.ot + (d0 + e) * kLaneRows, a[1][e]);
  }
}

constexpr int kLanePairDims = 12;  // 24 accumulators
void lane_values2_chunk(const LaneTile& ta, const LaneTile& tb, const float* pa, const float* pb, const float* v,
                        int hd, int64_t nt, bool first) {
  int d0 = 0;
  for (; d0 + kLanePairDims <= hd; d0 += kLanePairDims) lane_values2<kLanePairDims>(ta, tb, pa, pb, v, hd, nt, d0, first);
  switch (hd - d0) {
    case 1: return lane_values2<1>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 2: return lane_values2<2>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 3: return lane_values2<3>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 4: return lane_values2<4>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 5: return lane_values2<5>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 6: return lane_values2<6>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 7: return lane_values2<7>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 8: return lane_values2<8>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 9: return lane_values2<9>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 10: return lane_values2<10>(ta, tb, pa, pb, v, hd, nt, d0, first);
    case 11: return lane_values2<11>(ta, tb, pa, pb, v, hd, nt, d0, first);
    default: return;
  }
}

// attention_rows for n_rows >= kLaneMinRows: ceil(n_rows / 16) tiles (the
// last one may hold fewer rows, at least kLaneMinRows unless it is the only one).
template <DType T>
void attention_lanes_t(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                       float scale) {
  const int hd = kv.head_dim;
  const int n_tiles = (n_rows + kLaneRows - 1) / kLaneRows;
  float* buf = detail::scratch(detail::kScratchAttnLanes, n_tiles * LaneTile::floats(hd));
  LaneTile tiles[kMaxLaneTiles];
  int64_t n_max = 0;
  for (int ti = 0; ti < n_tiles; ++ti) {
    LaneTile& tl = tiles[ti];
    tl.qt = buf + ti * LaneTile::floats(hd);
    tl.ot = tl.qt + hd * kLaneRows;
    tl.n_max = 0;
    tl.n_rows = int(imin(kLaneRows, n_rows - ti * kLaneRows));
    for (int d0 = 0; d0 < hd; d0 += 16) {  // Q^T, 16 x 16 at a time
      const __mmask16 m = tail_mask(hd - d0);
      __m512 r[16];
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l)
        r[l] = l < tl.n_rows ? _mm512_maskz_loadu_ps(m, rows[ti * kLaneRows + l].q + d0) : _mm512_setzero_ps();
      transpose16(r);
      for (int d = 0; d < imin(16, hd - d0); ++d) _mm512_store_ps(tl.qt + (d0 + d) * kLaneRows, r[d]);
    }
    for (int l = 0; l < kLaneRows; ++l) {
      const bool live = l < tl.n_rows;
      const AttnRow* row = rows + ti * kLaneRows + l;
      tl.n_ctx[l] = live ? float(row->n_ctx) : 0.0f;
      tl.slope[l] = live ? row->alibi_slope : 0.0f;
      tl.max[l] = -INFINITY;
      if (live) tl.n_max = imax(tl.n_max, row->n_ctx);
    }
    n_max = imax(n_max, tl.n_max);
  }
  // Tiles go in pairs (lane_scores2, lane_values2); a pair runs to the
  // longer of its two contexts (the other tile's extra scores are -inf:
  // probability 0).
  for (int ti = 0; ti + 1 < n_tiles; ti += 2) tiles[ti].n_max = tiles[ti + 1].n_max = imax(tiles[ti].n_max, tiles[ti + 1].n_max);
  const int64_t ld_s = n_max * kLaneRows;  // scores / probabilities per tile: [n_max][16]
  float* st = detail::scratch(detail::kScratchAttnScores, n_tiles * ld_s);
  const KvChunks<T> kc(kv, kv_head, block_table, n_max);
  kc.prefetch_first();
  kc.for_each_chunk(false, [&](int64_t j0, int64_t pf) {
    for (int ti = 0; ti < n_tiles; ti += 2) {
      kc.prefetch(pf, ti, n_tiles);
      if (ti + 1 < n_tiles) kc.prefetch(pf, ti + 1, n_tiles);
      LaneTile& tl = tiles[ti];
      if (tl.n_max <= j0) continue;
      const int64_t nt = imin(kc.chunk, tl.n_max - j0);
      float* sa = st + ti * ld_s + j0 * kLaneRows;
      if (ti + 1 < n_tiles) {
        lane_scores2_chunk(tl, tiles[ti + 1], kc.wide, hd, j0, nt, scale, sa, sa + ld_s);
      } else {
        lane_scores_chunk(tl, kc.wide, hd, j0, nt, scale, sa);
      }
    }
  });
  for (int ti = 0; ti < n_tiles; ++ti) lane_softmax(tiles[ti], st + ti * ld_s);
  kc.for_each_chunk(true, [&](int64_t j0, int64_t pf) {
    for (int ti = 0; ti < n_tiles; ti += 2) {
      kc.prefetch(pf, ti, n_tiles);
      if (ti + 1 < n_tiles) kc.prefetch(pf, ti + 1, n_tiles);
      const LaneTile& tl = tiles[ti];
      if (tl.n_max <= j0) continue;
      const int64_t nt = imin(kc.chunk, tl.n_max - j0);
      const float* pa = st + ti * ld_s + j0 * kLaneRows;
      if (ti + 1 < n_tiles) {
        lane_values2_chunk(tl, tiles[ti + 1], pa, pa + ld_s, kc.wide, hd, nt, j0 == 0);
      } else {
        lane_values_chunk(tl, pa, kc.wide, hd, nt, j0 == 0);
      }
    }
  });
  for (int ti = 0; ti < n_tiles; ++ti) {  // out = O^T transposed back, times 1 / sum
    const LaneTile& tl = tiles[ti];
    if (tl.n_max == 0) {  // O^T was never written; every row is empty
      for (int l = 0; l < tl.n_rows; ++l) std::fill_n(rows[ti * kLaneRows + l].out, hd, 0.0f);
      continue;
    }
    for (int d0 = 0; d0 < hd; d0 += 16) {
      const int nd = int(imin(16, hd - d0));
      __m512 r[16];
#pragma GCC unroll 16
      for (int d = 0; d < 16; ++d) r[d] = d < nd ? _mm512_load_ps(tl.ot + (d0 + d) * kLaneRows) : _mm512_setzero_ps();
      transpose16(r);
      for (int l = 0; l < tl.n_rows; ++l)
        _mm512_mask_storeu_ps(rows[ti * kLaneRows + l].out + d0, tail_mask(nd), _mm512_mul_ps(r[l], _mm512_set1_ps(tl.inv[l])));
    }
  }
}

// ================================================================= quantized weights
// Layout and formulas: see QuantizedWeight in ops.h. u = q + off is stored
// unsigned (off = 128 for Q8, 8 for Q4), so per group
//   sum_k x_k q_k = sum_k x_k u_k - off * sum_k x_k,
// and the second term is a per-(row of x, group) constant.
//
// Decode GEMV (weight-only, f32 x): one 16-row block at a time. A 16-byte
// piece of a 64-byte line is 4 rows x 4 k: vpmovzxbd + vcvtdq2ps give 16 f32
// lanes (row, kk), multiplied by x[k .. k+3] repeated 4x (one broadcast) into
// 4 accumulators per x row ("quads" of rows). Per group: the group's partial
// sums t are scaled by the row scales (permuted to the lane layout) into acc;
// the off * X_g term goes into one 16-row vector per x row. At the end each
// row's 4 kk lanes are summed (hsum4 + one permute). Q4: the same with the two
// nibbles of a byte being k and k + 4.
//
// Prefill GEMM (W8A8, VNNI): x rows are quantized (quantize_row_i8) into a
// panel [m-tile][k/4][kQMR] of int8 quads; the packed weights already are VNNI
// operands (64 bytes = 16 rows x 4 k, u8). Micro-kernel: kQMR x-rows by 32
// W-rows, int32 accumulators per group started at -off * sum_g(qx), then
// converted and multiplied by the group's row scales into f32 accumulators;
// at the end times the row's activation scale. Q4 slivers are unpacked to u8
// once per k-block (reused by every m-tile).
constexpr int kQMR = 6;                     // GEMM: x rows per micro tile
// GEMM k-block (a multiple of 128): the whole K of most matrices, so that a
// micro tile's C stays in registers across K and is stored once. The weight
// sliver (32 rows x kc) then streams from L2 instead of sitting in L1 (at
// 1 B/cycle per dpbusd, well inside L2's bandwidth): bench_kernels qgemm
// 1 thread, best of 9, q8g128 M512xK896xN4864 11566 us (kc 512) -> 10885,
// K4864xN896 12026 -> 10793, q4g32 12385 -> 11853 and 12733 -> 12206;
// qwen2.5-0.5b prefill (512 tokens, 2 threads, 5 runs) TTFT min 576 -> 562
// ms (int8), 660 -> 634 ms (int4).
constexpr int64_t kQKC = 8192;
constexpr int64_t kQNBlocks = 8;            // GEMM: 16-row blocks per task (128 rows)
constexpr int64_t kQGemvMaxMA8 = 4;         // decode A8 GEMV: x rows in one pass
// Decode A8 GEMV on Q4, any number of threads: the loop over a group's
// lines is unrolled, each line is prefetched (prefetch_line: prefetchnta, or
// prefetcht0 where the profile's line_t0 says so)
// kQ4NtaPrefetch bytes ahead, and once per 4 lines a prefetch into L2
// (prefetch_l2) reaches kQ4L2Prefetch bytes ahead; with several threads the
// group scales are prefetched too (kQ4ScalePrefetch, QGemvA8Ctx::prefetch).
// Q4's loop does more work per byte than a plain read, so fewer of its loads
// are in flight and the hardware prefetcher alone falls behind; and it is
// close to bound by its instructions (bench_kernels qgemv/hot/q4g32: 34-38
// GB/s per thread out of L2 against 27-30 GB/s from memory), where the
// rolled loop spent 6 of its 12 instructions per line on the counter, a
// branch and register copies around the vpdpbusd. Measured in the model
// (tinyllama int4, 512-token context, each variant behind a switch flipped
// every decode step, per layer; docs/performance.md):
//  - 1 thread, against no software prefetch: nta 4 KB ahead gate/up 683 ->
//    574 us, 669 -> 545, 705 -> 560 (2 KB and 8 KB ahead gained less, t0
//    2 KB 5 %, t0 1 KB lost 2 %); then unrolled + L2 32 KB ahead on top:
//    gate/up 512 -> 473 and 512 -> 480 us, step 29.1 -> 27.0 ms (16 KB
//    ahead: 0.5-2 % less; unrolled alone about half of it).
//  - 2 threads, against the former rolled loop with a T2 prefetch 6 KB
//    ahead (which had beaten T0 8 KB ahead, 31.7-33.4 -> 41.8-42.0 GB/s):
//    step 18.9 -> 17.0, 23.4 -> 22.3 and 23.7 -> 22.5 ms, gate/up 341 ->
//    301, 427 -> 408 and 439 -> 400 us; qwen2.5-0.5b int4 gate/up 144 ->
//    133 and 141 -> 136 us. Unrolled with the T2 prefetch kept: -4 % and
//    +2 % per step; with T2 plus the L2 prefetch: neutral.
//  - bench_gemv_pairs --threads 1: 0.88-0.93 -> 0.99-1.02 of a plain read.
// kQ4NtaPrefetch = 4096 and kQ4L2Prefetch = 32768 were measured so on Zen 4;
// Zen 5 reads faster with nta 3 KB ahead and no L2 prefetch. The distances
// per CPU: DecodePrefetch::q4_nta / q4_l2 (prefetch_tuning.h).
constexpr int64_t kQ4ScalePrefetch = 2048;
// Decode A8 GEMV on Q8 with several threads: besides the T2 prefetch
// kSparsePrefetch ahead, one into L2 (prefetch_l2) this many bytes ahead per
// 4 lines. Per-step A/B in the model (2 threads, 512-token context): step
// tinyllama int8 40.2 -> 37.6 and 37.5 -> 35.0 ms, qwen2.5-0.5b int8 16.9
// -> 16.1 and 19.3 -> 17.6 ms; 32 KB ahead -6, -5 and -2 %; prefetchnta
// 4 KB ahead instead of the T2 prefetch +3 %. On one thread (no T2
// prefetch there) the L2 prefetch alone was slower: 32 KB ahead +3 %,
// 16 KB +5 %. (kQ8L2Prefetch = 24576 on Zen 4; on Zen 5 the T2 prefetch
// alone, on one thread too, reads faster: DecodePrefetch::q8_*.)

// The 16 row scales of one group at p (QuantAddr::group_scales) as f32.
inline __m512 load_scales16(const uint8_t* p, DType scale_dtype) {
  if (scale_dtype == DType::F16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}


struct QGemvCtx {
  const QMatmulArgs* a;
  const float* xsum;  // [M][G] sums of x over each group
  OwnedRanges ranges;  // of 16-row blocks
};

// y[m0 .. m0 + MR) for the 16 rows of block b.
template <bool Q4, int MR>
void qgemv_block(const QGemvCtx& c, int64_t b, int64_t m0) {
  const QMatmulArgs& a = *c.a;
  const QuantizedWeight& w = *a.w;
  const int64_t K = a.K, gs = w.group_size, G = K / gs;
  const QuantAddr qa = quant_addr(w);
  const __m512i iota_div4 = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  __m512i rep[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) rep[q] = _mm512_add_epi32(iota_div4, _mm512_set1_epi32(4 * q));
  const __m512i low4 = _mm512_set1_epi32(15);
  __m512 acc[MR][4], comp[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
    comp[m] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[m][q] = _mm512_setzero_ps();
  }
  const float* xr[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) xr[m] = a.x + (m0 + m) * a.ldx;
  for (int64_t g = 0; g < G; ++g) {
    __m512 t[MR][4];
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) t[m][q] = _mm512_setzero_ps();
    const int64_t k0 = g * gs;
    const uint8_t* p = qa.group_data(b, g);
    if constexpr (!Q4) {
#pragma GCC unroll 4
      for (int64_t s = 0; s < gs / 4; ++s, p += 64) {
        __m512 xv[MR];
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) xv[m] = _mm512_broadcast_f32x4(_mm_loadu_ps(xr[m] + k0 + 4 * s));
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m512 wf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * q))));
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) t[m][q] = _mm512_fmadd_ps(xv[m], wf, t[m][q]);
        }
      }
    } else {
#pragma GCC unroll 2
      for (int64_t s = 0; s < gs / 8; ++s, p += 64) {
        __m512 xlo[MR], xhi[MR];
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) {
          xlo[m] = _mm512_broadcast_f32x4(_mm_loadu_ps(xr[m] + k0 + 8 * s));
          xhi[m] = _mm512_broadcast_f32x4(_mm_loadu_ps(xr[m] + k0 + 8 * s + 4));
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * q)));
          const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(d, low4));
          const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(d, 4));
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) t[m][q] = _mm512_fmadd_ps(xhi[m], hi, _mm512_fmadd_ps(xlo[m], lo, t[m][q]));
        }
      }
    }
    const __m512 s16 = load_scales16(qa.group_scales(b, g), w.scale_dtype);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512 sq = _mm512_permutexvar_ps(rep[q], s16);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) acc[m][q] = _mm512_fmadd_ps(t[m][q], sq, acc[m][q]);
    }
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) comp[m] = _mm512_fmadd_ps(s16, _mm512_set1_ps(c.xsum[(m0 + m) * G + g]), comp[m]);
  }
  // hsum4 element 4L + j = row 4j + L: permute back to row order.
  const __m512i back = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const int64_t n0 = b * 16;
  const __mmask16 msk = tail_mask(w.N - n0);
  const __m512 bias = a.bias ? _mm512_maskz_loadu_ps(msk, a.bias + n0) : _mm512_setzero_ps();
  const __m512 off = _mm512_set1_ps(Q4 ? 8.0f : 128.0f);
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
    const __m512 r = _mm512_permutexvar_ps(back, hsum4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]));
    _mm512_mask_storeu_ps(a.y + (m0 + m) * a.ldy + n0, msk, _mm512_add_ps(_mm512_fnmadd_ps(off, comp[m], r), bias));
  }
}

template <bool Q4>
void qgemv_range(const QGemvCtx& c, int64_t b0, int64_t b1) {
  const int64_t M = c.a->M;
  for (int64_t b = b0; b < b1; ++b) {
    int64_t m = 0;
    for (; m + 2 <= M; m += 2) qgemv_block<Q4, 2>(c, b, m);
    if (m < M) qgemv_block<Q4, 1>(c, b, m);
  }
}

void qgemv_blocks(const QGemvCtx& c, int64_t b0, int64_t b1) {
  if (c.a->w->type == QuantType::Q4)
    qgemv_range<true>(c, b0, b1);
  else
    qgemv_range<false>(c, b0, b1);
}

void qgemv_task(void* p, int64_t task, int) {
  auto& c = *static_cast<QGemvCtx*>(p);
  c.ranges.work(int(task), [&](int64_t b0, int64_t b1) { qgemv_blocks(c, b0, b1); });
}

// ---------------------------------------------------------------- W4A8 / W8A8 decode GEMV (VNNI)
// x rows quantized per (row, group) (quantize_row_i8 on each group: finer
// than the GEMM's per-row scale, at no cost here); per 16-row block and
// group: int32 dot products with vpdpbusd started at -off * sum(qx), then
// times s_w * s_x into f32. Far fewer instructions per weight than the
// weight-only GEMV, which is compute-bound for Q4 on this class of CPU.
struct QGemvA8Ctx {
  const QMatmulArgs* a;
  const int32_t* xq;   // [M][K/4] quads of quantized x
  const int32_t* comp; // [M][G]
  const float* sxg;    // [M][G]
  // Software prefetch of the Q8 weights (kSparsePrefetch) and of the group
  // scales (kQ4ScalePrefetch, both types since cab3fe1): only when several
  // threads stream, or on Q8 where DecodePrefetch::q8_one_thread says so.
  // bench_gemv_pairs, Q8 g128 on Zen 4: 0.96 either way at 1 thread, 0.91 /
  // 0.92 at 2 (fast phase). (Q4 prefetches its weights on any number of
  // threads: kQ4NtaPrefetch.)
  bool prefetch;
  const DecodePrefetch* pf;  // distances
};

// acc + u8 w . s8 x, x one int32 (four int8) broadcast to all lanes:
// vpdpbusd with an embedded {1to16} broadcast, accumulating in place. GCC 12
// neither folds _mm512_set1_epi32(*x) into the instruction (a separate
// vpbroadcastd per call) nor keeps the accumulator in one register across
// the loop (zmm copies around each call). bench_gemv_pairs (intrinsics and
// this in one binary, 80 rounds): Q8 g128 0.80 -> 0.95 of a plain read at
// 1 thread, 0.91 -> 1.01 at 2; Q4 alike either way.
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int32_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
  return acc;
}

// One 16-row block of a matrix in a QGemvA8Job: its context and index.
using QBlk = detail::BlockOf<QGemvA8Ctx>;

// GS: the group size as a constant, so the inner loops unroll completely.
// NB blocks at once, each its own stream of weight lines (two streams per
// thread read faster than one on Zen 5: OwnedRanges::work_streams); they
// share x (the matrices of one job have the same K and group size).
template <bool Q4, int MR, int GS, bool PF, int NB>
void qgemv_a8_block(const QBlk* blk) {
  const QGemvA8Ctx& c = *blk[0].c;
  const int64_t K = c.a->K, K4 = K / 4, G = K / GS;
  constexpr int64_t gs = GS;
  QuantAddr qa[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) qa[j] = quant_addr(*blk[j].c->a->w);
  const bool t0 = c.pf->line_t0;
  const int64_t q8_t2 = c.pf->q8_t2, q8_l2 = c.pf->q8_l2, q8_nta = c.pf->q8_nta, q4_nta = c.pf->q4_nta,
                q4_l2 = c.pf->q4_l2;
  const __m512i low4 = _mm512_set1_epi8(15);
  __m512 accf[NB][MR];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) accf[j][m] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    __m512i a0[NB][MR], a1[NB][MR];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        a0[j][m] = _mm512_set1_epi32(c.comp[m * G + g]);
        a1[j][m] = _mm512_setzero_si512();
      }
    const int64_t k4 = g * gs / 4;
    // Whether this group ends a chunk of the interleaved layout: then the
    // prefetches reach one line more (QuantAddr::chunk_end).
    bool chunk_end[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) chunk_end[j] = qa[j].chunk_end(g, G);
    if constexpr (!Q4) {
#pragma GCC unroll 16
      for (int64_t s = 0; s < gs / 4; s += 2) {
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) {
          const uint8_t* p = qa[j].group_data(blk[j].b, g);
          const __m512i v0 = _mm512_loadu_si512(p + s * 64), v1 = _mm512_loadu_si512(p + s * 64 + 64);
          if (PF && s % kSparsePrefetchLines == 0) {
            if (q8_t2) _mm_prefetch(reinterpret_cast<const char*>(p + s * 64 + q8_t2), _MM_HINT_T2);
            if (q8_l2) prefetch_l2(p + s * 64 + q8_l2);
          }
          if (PF && q8_nta) {
            prefetch_line(p + s * 64 + q8_nta, t0);
            prefetch_line(p + s * 64 + 64 + q8_nta, t0);
            if (s == gs / 4 - 2 && chunk_end[j]) prefetch_line(p + s * 64 + 128 + q8_nta, t0);
          }
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) {
            a0[j][m] = dpbusd_bcast(a0[j][m], v0, c.xq + m * K4 + k4 + s);
            a1[j][m] = dpbusd_bcast(a1[j][m], v1, c.xq + m * K4 + k4 + s + 1);
          }
        }
      }
    } else {
      // High nibbles are used in place (byte & 0xf0 = 16 * hi): a1 collects
      // 16x their dot products, divided back exactly once per group below.
      // Unrolled (kQ4NtaPrefetch says why).
#pragma GCC unroll 16
      for (int64_t s = 0; s < gs / 8; ++s) {
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) {
          const uint8_t* p = qa[j].group_data(blk[j].b, g);
          const __m512i l = _mm512_loadu_si512(p + s * 64);
          if (q4_nta) {
            prefetch_line(p + s * 64 + q4_nta, t0);
            if (s == gs / 8 - 1 && chunk_end[j]) prefetch_line(p + s * 64 + 64 + q4_nta, t0);
          }
          if (q4_l2 && s % 4 == 0) prefetch_l2(p + s * 64 + q4_l2);
          const __m512i lo = _mm512_and_si512(l, low4), hi16 = _mm512_andnot_si512(low4, l);
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) {
            a0[j][m] = dpbusd_bcast(a0[j][m], lo, c.xq + m * K4 + k4 + 2 * s);
            a1[j][m] = dpbusd_bcast(a1[j][m], hi16, c.xq + m * K4 + k4 + 2 * s + 1);
          }
        }
      }
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) a1[j][m] = _mm512_srai_epi32(a1[j][m], 4);
    }
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      const QuantizedWeight& w = *blk[j].c->a->w;
      const uint8_t* sp = qa[j].group_scales(blk[j].b, g);
      // (Interleaved scales are in the weight stream: the data lines'
      // prefetches reach their lines, with chunk_end's one more.)
      if (PF && !w.interleaved) _mm_prefetch(reinterpret_cast<const char*>(sp) + kQ4ScalePrefetch, _MM_HINT_T1);
      const __m512 s16 = load_scales16(sp, w.scale_dtype);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m)
        accf[j][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0[j][m], a1[j][m])),
                                     _mm512_mul_ps(s16, _mm512_set1_ps(c.sxg[m * G + g])), accf[j][m]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) {
    const QMatmulArgs& a = *blk[j].c->a;
    const int64_t n0 = blk[j].b * 16;
    const __mmask16 msk = tail_mask(a.w->N - n0);
    const __m512 bias = a.bias ? _mm512_maskz_loadu_ps(msk, a.bias + n0) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) _mm512_mask_storeu_ps(a.y + m * a.ldy + n0, msk, _mm512_add_ps(accf[j][m], bias));
  }
}

template <bool Q4, int GS, bool PF, int NB>
void qgemv_a8_run_pf(const QBlk* blk) {
  static_assert(kQGemvMaxMA8 == 4);
  if constexpr (NB == 4) return qgemv_a8_block<Q4, 1, GS, PF, 4>(blk);  // four streams: M = 1 only
  switch (blk[0].c->a->M) {
    case 1: return qgemv_a8_block<Q4, 1, GS, PF, NB>(blk);
    case 2: return qgemv_a8_block<Q4, 2, GS, PF, NB>(blk);
    case 3: return qgemv_a8_block<Q4, 3, GS, PF, NB>(blk);
    default: return qgemv_a8_block<Q4, 4, GS, PF, NB>(blk);
  }
}

// One instance per weight type, group size and prefetch switch (qgemv_dispatch.h).
template <bool Q4, int GS, bool PF, int NB>
struct QGemvA8Kernel {
  static void run(const QBlk* blk) { qgemv_a8_run_pf<Q4, GS, PF, NB>(blk); }
};
template <int NB>
void qgemv_a8_run(const QBlk* blk) {
  detail::run_q_block<QGemvA8Kernel, NB>(blk);
}

// ---------------------------------------------------------------- W8A8 GEMM
struct QGemmCtx {
  const QMatmulArgs* a;
  const QMatmulArgs* up = nullptr;  // gated: y = silu(x W^T + b) * (x Wup^T + bup)
  int32_t* xp;    // [m-tile][K/4][kQMR] int8 quads of quantized x
  int32_t* comp;  // [m-tile][G][kQMR]: -off * sum over the group of quantized x
  float* sx;      // [M] activation scales
  int64_t n_mt, n_blocks, n_kb, kc;
  int64_t blocks_per_task, n_ntasks, mt_per_task, n_tasks;
};

// Sum of n int8 values, n a multiple of 32 (sad against 0 on x + 128).
inline int32_t sum_i8(const int8_t* p, int64_t n) {
  const __m256i flip = _mm256_set1_epi8(char(0x80)), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  for (int64_t k = 0; k < n; k += 32)
    acc = _mm256_add_epi64(
        acc, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + k)), flip), zero));
  __m128i s = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
  return int32_t(_mm_cvtsi128_si64(s) - 128 * n);
}

// Interleaving 8 quads of kQMR = 6 rows into the panel order [k4][row]: the
// rows are paired into three vectors A = (r0 | r1), B = (r2 | r3), C = (r4 |
// r5) of 8 + 8 quads; panel lane p (k4 = p / 6, row = p % 6) of output
// vector o comes from A/B (one vpermt2d) or, for rows 4 and 5, from C (one
// masked vpermd). Index tables built at compile time.
struct PackX6 {
  int32_t ab[3][16], c[3][16];
  uint16_t cmask[3];
};
constexpr PackX6 make_pack_x6() {
  PackX6 t{};
  for (int o = 0; o < 3; ++o) {
    t.cmask[o] = 0;
    for (int l = 0; l < 16; ++l) {
      const int p = 16 * o + l, k4 = p / 6, row = p % 6;
      const int half = row % 2 ? 8 : 0;
      t.ab[o][l] = row < 4 ? (row / 2) * 16 + half + k4 : 0;
      t.c[o][l] = row >= 4 ? half + k4 : 0;
      if (row >= 4) t.cmask[o] = uint16_t(t.cmask[o] | (1u << l));
    }
  }
  return t;
}
constexpr PackX6 kPackX6 = make_pack_x6();
static_assert(kQMR == 6, "qgemm_pack_x_task interleaves 6 rows");

void qgemm_pack_x_task(void* p, int64_t mt, int) {
  const auto& c = *static_cast<const QGemmCtx*>(p);
  const QMatmulArgs& a = *c.a;
  const int64_t K = a.K, K4 = K / 4, gs = a.w->group_size, G = K / gs;
  const int off = a.w->type == QuantType::Q8 ? 128 : 8;
  // The tile's rows quantized, [kQMR][K] (rows past M are zero).
  int8_t* rows = reinterpret_cast<int8_t*>(detail::scratch(detail::kScratchTmp, (kQMR * K + 3) / 4));
  int32_t* xp = c.xp + mt * K4 * kQMR;
  int32_t* comp = c.comp + mt * G * kQMR;
  for (int i = 0; i < kQMR; ++i) {
    const int64_t m = mt * kQMR + i;
    int8_t* row = rows + i * K;
    if (m < a.M)
      quantize_row_i8(a.x + m * a.ldx, K, row, c.sx + m);
    else
      memset(row, 0, size_t(K));
    for (int64_t g = 0; g < G; ++g) comp[g * kQMR + i] = -off * sum_i8(row + g * gs, gs);
  }
  // K4 is a multiple of 8 (K of the group size, at least 32).
  const __m512i ab0 = _mm512_loadu_si512(kPackX6.ab[0]), ab1 = _mm512_loadu_si512(kPackX6.ab[1]),
                ab2 = _mm512_loadu_si512(kPackX6.ab[2]);
  const __m512i c0 = _mm512_loadu_si512(kPackX6.c[0]), c1 = _mm512_loadu_si512(kPackX6.c[1]),
                c2 = _mm512_loadu_si512(kPackX6.c[2]);
  auto pair = [&](int r, int64_t k4) {
    const int32_t* q0 = reinterpret_cast<const int32_t*>(rows + r * K) + k4;
    const int32_t* q1 = reinterpret_cast<const int32_t*>(rows + (r + 1) * K) + k4;
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q1)), 1);
  };
  for (int64_t k4 = 0; k4 < K4; k4 += 8) {
    const __m512i A = pair(0, k4), B = pair(2, k4), C = pair(4, k4);
    int32_t* out = xp + k4 * kQMR;
    _mm512_storeu_si512(out, _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(A, ab0, B), kPackX6.cmask[0], c0, C));
    _mm512_storeu_si512(out + 16,
                        _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(A, ab1, B), kPackX6.cmask[1], c1, C));
    _mm512_storeu_si512(out + 32,
                        _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(A, ab2, B), kPackX6.cmask[2], c2, C));
  }
}

// C[MR rows][NV * 16 cols] (+)= sx[i] * sum_g s_g * (int dot of the group)
// GK4 = group_size / 4, a constant so that a group's k loop is fully unrolled
// (a runtime loop made GCC copy all accumulators every iteration).
// GATED (NV = 2, the whole K in one call): column block 0 is the gate's and
// block 1 up's for the same 16 outputs, and the tile stores silu(gate) * up
// into block 0's columns (bias: gate's, bias2: up's).
template <int MR, int NV, int GK4, bool GATED = false>
void qgemm_micro(const int32_t* xp, const int32_t* comp, const uint8_t* const* wp, const float* sp, int64_t n_groups,
                 const float* sx, float* c, int64_t ldc, const __mmask16* msk, bool first, const float* bias,
                 const float* bias2) {
  constexpr int64_t gk4 = GK4;
  __m512 accf[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) accf[i][v] = _mm512_setzero_ps();
  const uint8_t* w0 = wp[0];
  const uint8_t* w1 = wp[NV - 1];
  for (int64_t g = 0; g < n_groups; ++g) {
    __m512i acci[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acci[i][v] = _mm512_set1_epi32(comp[g * kQMR + i]);
    const int32_t* x = xp + g * gk4 * kQMR;
    const uint8_t* p0 = w0 + g * gk4 * 64;
    const uint8_t* p1 = w1 + g * gk4 * 64;
#pragma GCC unroll 32
    for (int64_t s = 0; s < gk4; ++s) {
      __m512i wv[NV];
      wv[0] = _mm512_loadu_si512(p0 + s * 64);
      if constexpr (NV == 2) wv[NV - 1] = _mm512_loadu_si512(p1 + s * 64);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512i xb = _mm512_set1_epi32(x[s * kQMR + i]);
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acci[i][v] = _mm512_dpbusd_epi32(acci[i][v], wv[v], xb);
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 sv = _mm512_load_ps(sp + (g * NV + v) * 16);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) accf[i][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[i][v]), sv, accf[i][v]);
    }
  }
  if constexpr (GATED) {
    static_assert(NV == 2, "the gated tile pairs a gate block with an up block");
    const __m512 bg = bias ? _mm512_maskz_loadu_ps(msk[0], bias) : _mm512_setzero_ps();
    const __m512 bu = bias2 ? _mm512_maskz_loadu_ps(msk[0], bias2) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 s = _mm512_set1_ps(sx[i]);
      _mm512_mask_storeu_ps(c + i * ldc, msk[0],
                            silu_mul16(_mm512_fmadd_ps(accf[i][0], s, bg), _mm512_fmadd_ps(accf[i][1], s, bu)));
    }
    return;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 s = _mm512_set1_ps(sx[i]);
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 base = first ? (bias ? _mm512_maskz_loadu_ps(msk[v], bias + 16 * v) : _mm512_setzero_ps())
                                : _mm512_maskz_loadu_ps(msk[v], row + 16 * v);
      _mm512_mask_storeu_ps(row + 16 * v, msk[v], _mm512_fmadd_ps(accf[i][v], s, base));
    }
  }
}

using QMicroFn = void (*)(const int32_t*, const int32_t*, const uint8_t* const*, const float*, int64_t,
                          const float*, float*, int64_t, const __mmask16*, bool, const float*, const float*);
template <int NV, int GK4, bool GATED>
QMicroFn qmicro_for_rows(int64_t mr) {
  static_assert(kQMR == 6);
  switch (mr) {
    case 1: return &qgemm_micro<1, NV, GK4, GATED>;
    case 2: return &qgemm_micro<2, NV, GK4, GATED>;
    case 3: return &qgemm_micro<3, NV, GK4, GATED>;
    case 4: return &qgemm_micro<4, NV, GK4, GATED>;
    case 5: return &qgemm_micro<5, NV, GK4, GATED>;
    default: return &qgemm_micro<6, NV, GK4, GATED>;
  }
}
template <int NV, bool GATED = false>
QMicroFn qmicro_for(int64_t mr, int64_t gs) {
  switch (gs) {
    case 32: return qmicro_for_rows<NV, 8, GATED>(mr);
    case 64: return qmicro_for_rows<NV, 16, GATED>(mr);
    default: return qmicro_for_rows<NV, 32, GATED>(mr);
  }
}

void qgemm_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const QGemmCtx*>(p);
  const QMatmulArgs& a = *c.a;
  const QuantizedWeight& w = *a.w;
  const bool q4 = w.type == QuantType::Q4;
  const int64_t nt = task % c.n_ntasks, mc = task / c.n_ntasks;
  const int64_t bb0 = nt * c.blocks_per_task, bb1 = imin(c.n_blocks, bb0 + c.blocks_per_task);
  const int64_t mt0 = mc * c.mt_per_task, mt1 = imin(c.n_mt, mt0 + c.mt_per_task);
  if (bb0 >= bb1 || mt0 >= mt1) return;
  const int64_t K = a.K, K4 = K / 4, gs = w.group_size, G = K / gs;
  // per sliver: Q4 unpacked to u8 VNNI lines [2][kc/4][64], scales as f32 [kc/gs][2][16]
  float* scratch = detail::scratch(detail::kScratchPanel, 2 * c.kc / 4 * 16 + 2 * (c.kc / 32) * 16 + 16);
  uint8_t* unpacked = reinterpret_cast<uint8_t*>(scratch);
  float* sp = scratch + 2 * c.kc / 4 * 16;
  const __m512i low4 = _mm512_set1_epi8(15);
  // Gated (c.up): block b of the gate and block b of up make one tile.
  const bool gated = c.up != nullptr;
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, K - k0), ng = kcl / gs;
    for (int64_t b = bb0; b < bb1; b += gated ? 1 : 2) {
      const int nv = gated || b + 1 < bb1 ? 2 : 1;
      const uint8_t* wp[2];
      __mmask16 msk[2];
      for (int v = 0; v < nv; ++v) {
        const int64_t blk = gated ? b : b + v;
        const QuantizedWeight& wv = gated && v == 1 ? *c.up->w : w;
        const QuantAddr qa = quant_addr(wv);
        msk[v] = tail_mask(imax(0, w.N - 16 * blk));
        for (int64_t g = 0; g < ng; ++g)
          _mm512_store_ps(sp + (g * nv + v) * 16, load_scales16(qa.group_scales(blk, k0 / gs + g), wv.scale_dtype));
        uint8_t* dst = unpacked + v * (c.kc / 4) * 64;
        if (!q4 && !wv.interleaved) {
          wp[v] = qa.group_data(blk, k0 / gs);  // the sliver's lines are contiguous: read in place
        } else if (!q4) {
          // Interleaved Q8: the sliver's groups gathered into one run of lines.
          for (int64_t g = 0; g < ng; ++g) {
            const uint8_t* src = qa.group_data(blk, k0 / gs + g);
            for (int64_t j = 0; j < gs / 4; ++j)
              _mm512_store_si512(dst + (g * gs / 4 + j) * 64, _mm512_loadu_si512(src + j * 64));
          }
          wp[v] = dst;
        } else {
          for (int64_t g = 0; g < ng; ++g) {
            const uint8_t* src = qa.group_data(blk, k0 / gs + g);
            uint8_t* d = dst + g * (gs / 4) * 64;
            for (int64_t j = 0; j < gs / 8; ++j) {
              const __m512i l = _mm512_loadu_si512(src + j * 64);
              _mm512_store_si512(d + (2 * j) * 64, _mm512_and_si512(l, low4));
              _mm512_store_si512(d + (2 * j + 1) * 64, _mm512_and_si512(_mm512_srli_epi16(l, 4), low4));
            }
          }
          wp[v] = dst;
        }
      }
      const int64_t n0 = 16 * b;
      const float* bias = a.bias ? a.bias + n0 : nullptr;
      const float* bias2 = gated && c.up->bias ? c.up->bias + n0 : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kQMR, mr = imin(kQMR, a.M - m0);
        const int32_t* xp = c.xp + (mt * K4 + k0 / 4) * kQMR;
        const int32_t* cp = c.comp + (mt * G + k0 / gs) * kQMR;
        QMicroFn fn = gated ? qmicro_for<2, true>(mr, gs) : nv == 2 ? qmicro_for<2>(mr, gs) : qmicro_for<1>(mr, gs);
        fn(xp, cp, wp, sp, ng, c.sx + m0, a.y + m0 * a.ldy + n0, a.ldy, msk, kb == 0, bias, bias2);
      }
    }
  }
}

}  // namespace

// ================================================================= entry points
void matmul(const MatmulArgs& a, const Runner& runner) {
  if (a.M <= kGemvMaxM && a.bf16_blocked)
    gemv_blocked(&a, 1, runner);
  else if (a.M <= kGemvMaxM)
    gemv(a, runner);
  else
    gemm(&a, 1, runner, a.wdt == DType::BF16 && a.bf16_dot);
}

void matmul_bf16_blocked_multi(const MatmulArgs* as, int n, const Runner& runner) {
  if (as[0].M <= kGemvMaxM)
    gemv_blocked(as, n, runner);
  else
    gemm(as, n, runner, as[0].bf16_dot);
}

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
// compare-blend chain: `bench_kernels` ops/argmax/151936 17.1 µs.)
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

void attention_rows(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    float scale) {
  // Tiles of 16 rows in lanes; a last tile of under kLaneMinRows rows takes
  // the row path.
  const int rem = n_rows % kLaneRows;
  const int lane_rows = rem >= kLaneMinRows ? n_rows : n_rows - rem;
  for (int r0 = 0; r0 < lane_rows; r0 += kMaxLaneTiles * kLaneRows) {
    const int n = int(imin(lane_rows - r0, kMaxLaneTiles * kLaneRows));
    switch (kv.dtype) {
      case DType::F16: attention_lanes_t<DType::F16>(rows + r0, n, kv, kv_head, block_table, scale); break;
      case DType::BF16: attention_lanes_t<DType::BF16>(rows + r0, n, kv, kv_head, block_table, scale); break;
      case DType::I8: attention_lanes_t<DType::I8>(rows + r0, n, kv, kv_head, block_table, scale); break;
      default: attention_lanes_t<DType::F32>(rows + r0, n, kv, kv_head, block_table, scale); break;
    }
  }
  if (lane_rows == n_rows) return;
  rows += lane_rows;
  n_rows -= lane_rows;
  if (attention_rows_bf16dot_any(rows, n_rows, kv, kv_head, block_table, scale)) return;
  switch (kv.dtype) {
    case DType::F16: return attention_rows_t<DType::F16>(rows, n_rows, kv, kv_head, block_table, scale);
    case DType::BF16: return attention_rows_t<DType::BF16>(rows, n_rows, kv, kv_head, block_table, scale);
    case DType::I8: return attention_rows_t<DType::I8>(rows, n_rows, kv, kv_head, block_table, scale);
    default: return attention_rows_t<DType::F32>(rows, n_rows, kv, kv_head, block_table, scale);
  }
}

// One row of attention_rows (the model calls attention_rows; this entry
// point serves single-head callers with the same kernel). The thread's own
// scratch is used, not `scratch`.
void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table, int64_t n_ctx,
                    float scale, float alibi_slope, float* out, float*) {
  const AttnRow row{q, out, n_ctx, alibi_slope};
  avx512::attention_rows(&row, 1, kv, kv_head, block_table, scale);
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

// The prefill GEMM quantizes every prompt row with this (512 x 4864 values
// before Qwen2.5-0.5B's down projection: 15 % of that GEMM's samples with
// one max chain and a vpmovdb per 16 values): four max chains, and 64 values
// at a time narrowed with two rounds of packs and one permute.
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

void store_kv_i8(const PagedKV& kv, int64_t slot, const float* k, const float* v) {
  const int hd = kv.head_dim;
  for (int h = 0; h < kv.n_kv_heads; ++h) {
    const int64_t row = kv_slot_row(kv, slot, h);
    quantize_row_i8(k + int64_t(h) * hd, hd, static_cast<int8_t*>(kv.k) + row * hd, kv.k_scale + row);
    quantize_row_i8(v + int64_t(h) * hd, hd, static_cast<int8_t*>(kv.v) + row * hd, kv.v_scale + row);
  }
}

void matmul_q_gemv(const QMatmulArgs& a, const Runner& runner) {
  const QuantizedWeight& w = *a.w;
  const int64_t G = a.K / w.group_size, gs = w.group_size;
  float* xsum = detail::scratch(detail::kScratchShared, a.M * G);
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t g = 0; g < G; ++g) {
      __m512 s = _mm512_setzero_ps();
      for (int64_t k = g * gs; k < (g + 1) * gs; k += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(a.x + m * a.ldx + k));
      xsum[m * G + g] = _mm512_reduce_add_ps(s);
    }
  QGemvCtx c;  // ranges: not value-initialized, init() sets what is used
  c.a = &a;
  c.xsum = xsum;
  const int64_t n_blocks = (w.N + 15) / 16;
  if (runner.n_threads == 1 || n_blocks < 2) return qgemv_blocks(c, 0, n_blocks);
  c.ranges.init(n_blocks, runner.n_threads, kGemvClaimBytes / quant_block_read_bytes(w));
  runner.run(runner.pool, c.ranges.n_ranges, &qgemv_task, &c);
}

// The row-block x m-tile tasks of one matrix (c.a, c.n_mt, c.kc set).
void qgemm_partition(QGemmCtx& c, int64_t T) {
  c.n_blocks = (c.a->w->N + 15) / 16;
  // Steps of two blocks (gated: a gate block and the same up block, counted
  // as one), about two tasks per thread.
  const int64_t per_task = (c.n_blocks + 2 * T - 1) / (2 * T);
  c.blocks_per_task = c.up ? imin(kQNBlocks / 2, imax(1, per_task)) : imin(kQNBlocks, imax(2, round_up(per_task, 2)));
  c.n_ntasks = (c.n_blocks + c.blocks_per_task - 1) / c.blocks_per_task;
  int64_t m_chunks = c.n_ntasks >= 2 * T ? 1 : imin(c.n_mt, (2 * T + c.n_ntasks - 1) / c.n_ntasks);
  // A few tasks that the threads do not divide leave one thread idle at the
  // end: N = 896 (Qwen2.5-0.5B's o and down) made 7 tasks for 2 threads, and
  // bench_kernels qgemm/q8g128/M512xK4864xN896 scaled 1.49x from 1 to 2
  // threads (gate/up 1.83x). Splitting M as well makes whole rounds.
  if (T > 1 && (c.n_ntasks * m_chunks) % T != 0 && c.n_ntasks * m_chunks < 8 * T) m_chunks *= T;
  m_chunks = imin(m_chunks, c.n_mt);
  c.mt_per_task = (c.n_mt + m_chunks - 1) / m_chunks;
  c.n_tasks = c.n_ntasks * ((c.n_mt + c.mt_per_task - 1) / c.mt_per_task);
}


// The prompt's case: x is packed once.
using QGemmMulti = MultiJob<QGemmCtx, &qgemm_task>;

// A GEMM context for x of a (k-blocks of kc), its packed x in the calling
// thread's shared scratch; the task grid is qgemm_partition's.
QGemmCtx qgemm_ctx(const QMatmulArgs& a, int64_t kc) {
  QGemmCtx c{};
  c.a = &a;
  c.n_mt = (a.M + kQMR - 1) / kQMR;
  c.kc = kc;
  c.n_kb = (a.K + c.kc - 1) / c.kc;
  const int64_t K4 = a.K / 4, G = a.K / a.w->group_size;
  float* buf = detail::scratch(detail::kScratchShared, c.n_mt * kQMR * (K4 + G + 1));
  c.xp = reinterpret_cast<int32_t*>(buf);
  c.comp = c.xp + c.n_mt * K4 * kQMR;
  c.sx = reinterpret_cast<float*>(c.comp + c.n_mt * G * kQMR);
  return c;
}

// Pack x (one task per m-tile), then run n_tasks of task on ctx: two pool
// jobs, or inline on one thread.
void qgemm_run(QGemmCtx& c, int64_t n_tasks, detail::TaskFn task, void* ctx, const Runner& runner) {
  if (runner.n_threads == 1) {
    for (int64_t mt = 0; mt < c.n_mt; ++mt) qgemm_pack_x_task(&c, mt, 0);
    for (int64_t t = 0; t < n_tasks; ++t) task(ctx, t, 0);
    return;
  }
  runner.run(runner.pool, c.n_mt, &qgemm_pack_x_task, &c);
  runner.run(runner.pool, n_tasks, task, ctx);
}

void matmul_q_gemm_multi(const QMatmulArgs* as, int n, const Runner& runner) {
  QGemmCtx c = qgemm_ctx(as[0], imin(kQKC, as[0].K));
  const int64_t T = runner.n_threads;
  QGemmMulti mc;
  for (int i = 0; i < n; ++i) {
    mc.ctx[i] = c;
    mc.ctx[i].a = &as[i];
    qgemm_partition(mc.ctx[i], T);
    mc.first_task[i + 1] = mc.first_task[i] + mc.ctx[i].n_tasks;
  }
  qgemm_run(c, mc.first_task[n], &QGemmMulti::task, &mc, runner);
}

void matmul_q_gemm(const QMatmulArgs& a, const Runner& runner) { matmul_q_gemm_multi(&a, 1, runner); }

bool matmul_q_gemm_gated(const QMatmulArgs& gate, const QMatmulArgs& up, const Runner& runner) {
  if (gate.K > kQKC) return false;  // the epilogue needs the whole K in one k-block
  QGemmCtx c = qgemm_ctx(gate, gate.K);
  c.up = &up;
  qgemm_partition(c, runner.n_threads);
  qgemm_run(c, c.n_tasks, &qgemm_task, &c, runner);
  return true;
}

namespace {
// One x row quantized per group for the A8 decode GEMV, as quantize_row_i8
// on each group of GS values would (same operations in the same order, so
// the same bits), plus comp[g] = -off * sum(q of group g), all in registers.
// The loop of quantize_row_i8 + sum_i8 per group cost 4.7 us per 2048
// values and 18.5 us per 5632 (tinyllama o and down, serial while the other
// threads wait): sum_i8 reloaded the bytes just written by a masked store,
// which the store buffer cannot forward.
template <int GS>
void quantize_groups_a8(const float* x, int64_t G, int off, int8_t* q, float* sx, int32_t* comp) {
  constexpr int NV = GS / 16;
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t g = 0; g < G; ++g, x += GS, q += GS) {
    __m512 v[NV];
    __m512 mx = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) {
      v[i] = _mm512_loadu_ps(x + 16 * i);
      mx = _mm512_max_ps(_mm512_and_ps(v[i], abs_mask), mx);  // NaN: keeps mx, as quantize_row_i8
    }
    const float amax = _mm512_reduce_max_ps(mx);
    const __m512 vinv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) {
      const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v[i], vinv), lo), hi);  // NaN -> -127
      const __m512i c = _mm512_cvtps_epi32(t);
      sum = _mm512_add_epi32(sum, c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * i), _mm512_cvtepi32_epi8(c));
    }
    sx[g] = amax / 127.0f;
    comp[g] = -off * _mm512_reduce_add_epi32(sum);
  }
}
}  // namespace

// The decode step's case: x is quantized per group once, and the blocks of
// all the matrices (q/k/v, gate/up) are one job (BlockJob, owned_ranges.h).
using QGemvA8Job =
    detail::BlockJob<QGemvA8Ctx, kMatmulQMultiMax, &qgemv_a8_run<1>, &qgemv_a8_run<2>, &qgemv_a8_run<4>>;

void matmul_q_gemv_a8_multi(const QMatmulArgs* as, int n, const Runner& runner) {
  const QMatmulArgs& a = as[0];
  const QuantizedWeight& w = *a.w;
  const int64_t gs = w.group_size, G = a.K / gs;
  const int off = w.type == QuantType::Q8 ? 128 : 8;
  float* buf = detail::scratch(detail::kScratchShared, a.M * (a.K / 4 + 2 * G));
  int8_t* xq = reinterpret_cast<int8_t*>(buf);
  int32_t* comp = reinterpret_cast<int32_t*>(buf + a.M * a.K / 4);
  float* sxg = buf + a.M * (a.K / 4 + G);
  for (int64_t m = 0; m < a.M; ++m) {
    const float* xm = a.x + m * a.ldx;
    int8_t* qm = xq + m * a.K;
    switch (gs) {
      case 32: quantize_groups_a8<32>(xm, G, off, qm, sxg + m * G, comp + m * G); break;
      case 64: quantize_groups_a8<64>(xm, G, off, qm, sxg + m * G, comp + m * G); break;
      default: quantize_groups_a8<128>(xm, G, off, qm, sxg + m * G, comp + m * G); break;
    }
  }
  const DecodePrefetch& pf = decode_prefetch();
  QGemvA8Job j;
  for (int i = 0; i < n; ++i)
    j.add(QGemvA8Ctx{&as[i], reinterpret_cast<const int32_t*>(xq), comp, sxg,
                     runner.n_threads > 1 || (as[i].w->type == QuantType::Q8 && pf.q8_one_thread), &pf},
          (as[i].w->N + 15) / 16);
  // Two streams up to M = 2, four at M = 1 (acc[NB][MR] and the group's
  // two int32 sums per (block, row) in registers). Four only on interleaved
  // weights: with the separate scale array each weight stream brings a
  // scale stream, and four of each read slower than two (0.94-0.96 of two
  // in the model on Zen 5; docs/performance.md).
  bool interleaved = true;
  for (int i = 0; i < n; ++i) interleaved &= as[i].w->interleaved;
  int streams = w.type == QuantType::Q4 ? pf.q4_streams : pf.q8_streams;
  if (streams == 4 && (a.M > 1 || !interleaved)) streams = 2;
  if (a.M > 2 || j.n_blocks() < streams * runner.n_threads) streams = 1;
  j.run(runner, streams, kGemvClaimBytes / quant_block_read_bytes(w));
}

void matmul_q_gemv_a8(const QMatmulArgs& a, const Runner& runner) { matmul_q_gemv_a8_multi(&a, 1, runner); }

}  // namespace rinfer::kernels::cpu::avx512
