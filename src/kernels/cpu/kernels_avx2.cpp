// AVX2 + FMA + F16C kernels (compiled with the flags of *_avx2.cpp files).
// Only called when best_isa() is at least Avx2. Same structure as
// kernels_avx512.cpp with 8-float vectors and 16 registers; tails that AVX2
// cannot mask go through small stack buffers or scalar loops. Everything but
// the entry points has internal linkage and only intrinsics and C library
// functions are used (see impl.h for why).
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

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kernels_avx2.cpp must be compiled with the AVX2 flags (see rinfer_simd_flags)"
#endif

namespace rinfer::kernels::cpu::avx2 {

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

// ================================================================= matmul
constexpr int64_t kGemvMaxM = 8;
constexpr int kMR = 6;         // GEMM tile: kMR x-rows by 16 W-rows
constexpr int64_t kKC = 256;   // GEMM k-block; a W sliver is kKC * 16 * 4 bytes
constexpr int64_t kNB = 128;   // GEMM W rows per task (multiple of 16)
// Few m-tiles: whole rows per k-block so packing reads W sequentially (see AVX-512).
constexpr int64_t kSmallMTiles = 4;
constexpr int64_t kKCSmallM = 4096;
constexpr int64_t kNBSmallM = 32;

template <DType T, int MR, int NR>
inline void gemv_tile(const float* x, int64_t ldx, int64_t K, const typename Ld<T>::E* w, float* out) {
  __m256 acc[MR * NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR * NR; ++i) acc[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) wv[r] = Ld<T>::load(w + r * K + k);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      __m256 xv = _mm256_loadu_ps(x + m * ldx + k);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) acc[m * NR + r] = _mm256_fmadd_ps(xv, wv[r], acc[m * NR + r]);
    }
  }
  if (k < K) {
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) wv[r] = load_partial<T>(w + r * K + k, K - k);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      __m256 xv = load_partial_f32(x + m * ldx + k, K - k);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) acc[m * NR + r] = _mm256_fmadd_ps(xv, wv[r], acc[m * NR + r]);
    }
  }
  reduce_accs<MR * NR>(acc, out);
}

template <DType T, int MR>
void gemv_rows(const MatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int NR = MR <= 2 ? 4 : MR == 3 ? 3 : MR <= 6 ? 2 : 1;
  const auto* w = static_cast<const typename Ld<T>::E*>(a.w);
  float out[MR * NR];
  auto emit = [&](int64_t nn, int nr) {
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < nr; ++r)
        a.y[m * a.ldy + nn + r] = out[m * nr + r] + (a.bias ? a.bias[nn + r] : 0.0f);
  };
  int64_t n = n0;
  for (; n + NR <= n1; n += NR) {
    gemv_tile<T, MR, NR>(a.x, a.ldx, a.K, w + n * a.K, out);
    emit(n, NR);
  }
  for (; n < n1; ++n) {
    gemv_tile<T, MR, 1>(a.x, a.ldx, a.K, w + n * a.K, out);
    emit(n, 1);
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

struct GemvCtx {
  const MatmulArgs* a;
  int64_t rows_per_task;
};

void gemv_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const GemvCtx*>(p);
  const MatmulArgs& a = *c.a;
  int64_t n0 = task * c.rows_per_task, n1 = imin(a.N, n0 + c.rows_per_task);
  switch (a.wdt) {
    case DType::F16: return gemv_dispatch_m<DType::F16>(a, n0, n1);
    case DType::BF16: return gemv_dispatch_m<DType::BF16>(a, n0, n1);
    default: return gemv_dispatch_m<DType::F32>(a, n0, n1);
  }
}

void gemv(const MatmulArgs& in, const Runner& runner) {
  MatmulArgs a = in;
  if (a.M > 1) {
    // x copied with a row stride that is not a multiple of 4 KiB (L1 set aliasing)
    const int64_t ld = round_up(a.K, 8) + 16;
    float* xc = detail::scratch(detail::kScratchShared, a.M * ld);
    for (int64_t m = 0; m < a.M; ++m) memcpy(xc + m * ld, a.x + m * a.ldx, size_t(a.K) * sizeof(float));
    a.x = xc;
    a.ldx = ld;
  }
  int64_t n_tasks = imax(1, imin(int64_t(runner.n_threads) * 8, a.N / 16));
  int64_t rows = round_up((a.N + n_tasks - 1) / n_tasks, 4);
  n_tasks = (a.N + rows - 1) / rows;
  GemvCtx c{&a, rows};
  if (n_tasks == 1 || runner.n_threads == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) gemv_task(&c, t, 0);
    return;
  }
  runner.run(runner.pool, n_tasks, &gemv_task, &c);
}

// ---------------------------------------------------------------- decode GEMV, blocked BF16
// The AVX-512 kernel's scheme (kernels_avx512.cpp) at 8 lanes: W in the
// blocked layout [N/8][K/32][8 rows][32 k] is read block by block; a row's
// 32-k piece is two ymm loads of 16 BF16 pairs each, widened without
// shuffles (even k: << 16, odd k: & 0xffff0000) against x split once per
// call into [k/32][16 even | 16 odd]. One x row per pass over a block (8
// accumulators of the 16 ymm registers); further rows re-read the block from
// L1/L2. (Before, AVX2 unblocked chunks into scratch: 0.36 of bandwidth.)
constexpr int kBlkRows = 8;

// acc[0 .. 8) += the block's 8 rows (wb) . x (xeo: one row of x in the
// even/odd order above), 8 partial sums per row.
inline void gemv_blk_row(const float* xeo, const uint16_t* wb, int64_t K, __m256* acc) {
  const __m256i hi_mask = _mm256_set1_epi32(int(0xffff0000u));
  __m256 s[kBlkRows];
#pragma GCC unroll 8
  for (int r = 0; r < kBlkRows; ++r) s[r] = acc[r];
  const uint16_t* p = wb;
  for (int64_t t = 0; t < K / 32; ++t, p += 32 * kBlkRows) {
    const float* xt = xeo + 32 * t;
    const __m256 xe0 = _mm256_loadu_ps(xt), xe1 = _mm256_loadu_ps(xt + 8);
    const __m256 xo0 = _mm256_loadu_ps(xt + 16), xo1 = _mm256_loadu_ps(xt + 24);
#pragma GCC unroll 8
    for (int r = 0; r < kBlkRows; ++r) {
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * r));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * r + 16));
      __m256 a = _mm256_fmadd_ps(xe0, _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), s[r]);
      a = _mm256_fmadd_ps(xo0, _mm256_castsi256_ps(_mm256_and_si256(v0, hi_mask)), a);
      a = _mm256_fmadd_ps(xe1, _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), a);
      s[r] = _mm256_fmadd_ps(xo1, _mm256_castsi256_ps(_mm256_and_si256(v1, hi_mask)), a);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kBlkRows; ++r) acc[r] = s[r];
}

// y[m, the 8 rows of block b] = the lane sums of acc (+ bias).
void store_blk_row(const MatmulArgs& a, const __m256* acc, int64_t m, int64_t b) {
  const int64_t n0 = b * kBlkRows;
  alignas(32) float t[8];
  for (int r = 0; r < kBlkRows; ++r) {
    _mm256_store_ps(t, acc[r]);
    a.y[m * a.ldy + n0 + r] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7])) + (a.bias ? a.bias[n0 + r] : 0.0f);
  }
}

// The blocked GEMV over as[0 .. n) as avx512's: the 8-row blocks of all the
// matrices, one after the other, split over the threads as OwnedRanges
// (BlockJob), so q/k/v or gate/up are one pool job.
//
// One stream of weight lines per thread, whatever DecodePrefetch::bf16_streams
// says: AVX-512 reads two blocks' k-tiles side by side, but their 16 sums do
// not fit next to x in AVX2's 16 registers. Two blocks taking turns every 8,
// 32 or 128 k-tiles (their sums through L1 between turns) was measured and
// not kept. bench_gemv_pairs, RINFER_ISA=avx2, Zen 5, two streams against
// one in the same rounds, of a plain read: 2 threads, turns of 8 / 32 / 128
// tiles 0.62 / 0.60 / 0.54 against 0.69 / 0.66 / 0.61 (another run at 32:
// 0.82 against 0.84); 1 thread 0.42 / 0.81 / 0.80 against 0.51 / 0.79 / 0.84
// (and 0.93 against 0.88). Nor does it prefetch (DecodePrefetch::bf16_t2 is
// AVX-512's): a T2 prefetch 12 KB or 4 KB ahead once per 4 lines, same
// bench, against none: 2 threads 0.79 / 0.80 and 0.75 / 0.76 against 0.87
// and 0.82, 1 thread 0.73 / 0.76 and 0.84 / 0.80 against 0.86 and 0.88.
struct GemvBlkCtx {
  const MatmulArgs* a;
  const float* xeo;  // x in the even/odd order, [M][K]
};
using GemvBlk = detail::BlockOf<GemvBlkCtx>;
// y rows of one 8-row block, every x row (the block is re-read from L1/L2
// for each row after the first).
void gemv_blk_one(const GemvBlk* blk) {
  const MatmulArgs& a = *blk[0].c->a;
  const int64_t K = a.K, b = blk[0].b;
  const uint16_t* wb = static_cast<const uint16_t*>(a.w) + b * kBlkRows * K;
  for (int64_t m = 0; m < a.M; ++m) {
    __m256 acc[kBlkRows];
    for (int r = 0; r < kBlkRows; ++r) acc[r] = _mm256_setzero_ps();
    gemv_blk_row(blk[0].c->xeo + m * K, wb, K, acc);
    store_blk_row(a, acc, m, b);
  }
}
// BlockJob's pair of blocks, one after the other (this GEMV's job never asks
// for pairs: one stream, above).
void gemv_blk_two(const GemvBlk* blk) {
  gemv_blk_one(blk);
  gemv_blk_one(blk + 1);
}
using GemvBlkJob = detail::BlockJob<GemvBlkCtx, kMatmulQMultiMax, &gemv_blk_one, &gemv_blk_two>;

// ---------------------------------------------------------------- prefill GEMM
// BLIS-style, as in kernels_avx512.cpp: C[6 x 16] += xpanel[k][6] (broadcast)
// * wpanel[k][16] (two ymm); 12 accumulators + 2 W + 1 broadcast registers.
template <int MR>
void gemm_micro(const float* xp, const float* wp, int64_t kcl, float* c, int64_t ldc, int64_t ncols, bool first,
                const float* bias) {
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kcl; ++k) {
    const __m256 w0 = _mm256_load_ps(wp + 16 * k), w1 = _mm256_load_ps(wp + 16 * k + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 b = _mm256_broadcast_ss(xp + k * kMR + i);
      acc0[i] = _mm256_fmadd_ps(b, w0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(b, w1, acc1[i]);
    }
  }
  alignas(32) float tmp[16];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    if (ncols == 16) {
      __m256 s0 = first ? (bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps()) : _mm256_loadu_ps(row);
      __m256 s1 = first ? (bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps()) : _mm256_loadu_ps(row + 8);
      _mm256_storeu_ps(row, _mm256_add_ps(s0, acc0[i]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(s1, acc1[i]));
    } else {
      _mm256_store_ps(tmp, acc0[i]);
      _mm256_store_ps(tmp + 8, acc1[i]);
      for (int64_t j = 0; j < ncols; ++j) row[j] = (first ? (bias ? bias[j] : 0.0f) : row[j]) + tmp[j];
    }
  }
}

using MicroFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool, const float*);
static_assert(kMR == 6);
MicroFn micro_for_rows(int64_t mr) {
  switch (mr) {
    case 1: return &gemm_micro<1>;
    case 2: return &gemm_micro<2>;
    case 3: return &gemm_micro<3>;
    case 4: return &gemm_micro<4>;
    case 5: return &gemm_micro<5>;
    default: return &gemm_micro<6>;
  }
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

// dst[k][16] (k < kcl) = W[n0 + j, k0 + k] as f32 for j < 16, zero for rows >= nrows.
template <DType T>
void pack_w_sliver(const typename Ld<T>::E* w, int64_t K, int64_t n0, int64_t nrows, int64_t k0, int64_t kcl,
                   float* dst) {
  for (int64_t kk = 0; kk < kcl; kk += 8) {
    const int64_t kn = imin(8, kcl - kk);
    for (int half = 0; half < 2; ++half) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) {
        const int64_t row = half * 8 + j;
        const typename Ld<T>::E* src = w + (n0 + row) * K + k0 + kk;
        r[j] = row >= nrows ? _mm256_setzero_ps() : kn == 8 ? Ld<T>::load(src) : load_partial<T>(src, kn);
      }
      transpose8(r);
      float* d = dst + kk * 16 + half * 8;
      for (int64_t c = 0; c < kn; ++c) _mm256_store_ps(d + c * 16, r[c]);
    }
  }
}

struct GemmCtx {
  const MatmulArgs* a;
  float* xp;  // packed x: [m-tile][k-block][kc][kMR]
  int64_t kc;
  int64_t n_kb, n_mt;
  int64_t nb;
  int64_t n_ntasks, mt_per_task;
};

void gemm_pack_x_task(void* p, int64_t mt, int) {
  const auto& c = *static_cast<const GemmCtx*>(p);
  const MatmulArgs& a = *c.a;
  const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    float* dst = c.xp + (mt * c.n_kb + kb) * c.kc * kMR;
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t i = 0; i < mr; ++i) {
      const float* src = a.x + (m0 + i) * a.ldx + k0;
      for (int64_t k = 0; k < kcl; ++k) dst[k * kMR + i] = src[k];
    }
  }
}

template <DType T>
void gemm_block(const GemmCtx& c, int64_t n0, int64_t n1, int64_t mt0, int64_t mt1) {
  const MatmulArgs& a = *c.a;
  const auto* w = static_cast<const typename Ld<T>::E*>(a.w);
  const int64_t nrows = n1 - n0, n_sl = (nrows + 15) / 16;
  float* panel = detail::scratch(detail::kScratchPanel, n_sl * c.kc * 16);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t s = 0; s < n_sl; ++s)
      pack_w_sliver<T>(w, a.K, n0 + 16 * s, imin(16, nrows - 16 * s), k0, kcl, panel + s * c.kc * 16);
    for (int64_t s = 0; s < n_sl; ++s) {
      const int64_t ncols = imin(16, nrows - 16 * s), nn = n0 + 16 * s;
      const float* wp = panel + s * c.kc * 16;
      const float* bias = a.bias ? a.bias + nn : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
        micro_for_rows(mr)(c.xp + (mt * c.n_kb + kb) * c.kc * kMR, wp, kcl, a.y + m0 * a.ldy + nn, a.ldy, ncols,
                           kb == 0, bias);
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

void gemm(const MatmulArgs& a, const Runner& runner) {
  GemmCtx c{};
  c.a = &a;
  c.n_mt = (a.M + kMR - 1) / kMR;
  const bool small_m = c.n_mt <= kSmallMTiles;
  c.kc = small_m ? imin(kKCSmallM, a.K) : kKC;
  c.n_kb = (a.K + c.kc - 1) / c.kc;
  c.xp = detail::scratch(detail::kScratchShared, c.n_mt * c.n_kb * c.kc * kMR);
  const int64_t T = runner.n_threads;
  c.nb = imin(small_m ? kNBSmallM : kNB, imax(16, round_up((a.N + 2 * T - 1) / (2 * T), 16)));
  c.n_ntasks = (a.N + c.nb - 1) / c.nb;
  int64_t m_chunks = c.n_ntasks >= 2 * T ? 1 : imin(c.n_mt, (2 * T + c.n_ntasks - 1) / c.n_ntasks);
  c.mt_per_task = (c.n_mt + m_chunks - 1) / m_chunks;
  m_chunks = (c.n_mt + c.mt_per_task - 1) / c.mt_per_task;
  if (T == 1) {
    for (int64_t mt = 0; mt < c.n_mt; ++mt) gemm_pack_x_task(&c, mt, 0);
    for (int64_t t = 0; t < c.n_ntasks * m_chunks; ++t) gemm_task(&c, t, 0);
    return;
  }
  runner.run(runner.pool, c.n_mt, &gemm_pack_x_task, &c);
  runner.run(runner.pool, c.n_ntasks * m_chunks, &gemm_task, &c);
}

// ================================================================= quantized weights
// See kernels_avx512.cpp and ops.h. AVX2 has no VNNI on many CPUs (and
// vpmaddubsw saturates for u8 x s8 Q8 products), so both regimes keep x in f32:
//  - decode GEMV: 8-byte pieces of a 64-byte line are 2 rows x 4 k; vpmovzxbd +
//    vcvtdq2ps give 8 lanes (row, kk), times x[k .. k+3] repeated twice. One
//    half block (8 rows, 4 accumulators) at a time; the second half reads the
//    same lines again from cache.
//  - prefill: each task dequantizes its W rows into the f32 [k][16] slivers
//    of the f32 GEMM above (scale and zero point applied once per weight) and
//    reuses its micro-kernel.
constexpr int64_t kQGemvRowsPerTask = 64;

// 8 row scales at p (a group's QuantAddr::group_scales, + 8 for rows 8-15) as f32.
inline __m256 load_scales8(const uint8_t* p, DType scale_dtype) {
  if (scale_dtype == DType::F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
inline int64_t half_scale_bytes(const QuantizedWeight& w) { return w.scale_dtype == DType::F16 ? 16 : 32; }
inline __m256i load8_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

struct QGemvCtx {
  const QMatmulArgs* a;
  const float* xsum;  // [M][G]
  int64_t blocks_per_task, n_blocks;
};

// y[m, rows 16b + 8h .. + 8)
template <bool Q4>
void qgemv_half(const QGemvCtx& c, int64_t b, int h, int64_t m) {
  const QMatmulArgs& a = *c.a;
  const QuantizedWeight& w = *a.w;
  const int64_t K = a.K, gs = w.group_size, G = K / gs;
  const QuantAddr qa = quant_addr(w);
  const float* x = a.x + m * a.ldx;
  const __m256i iota_div4 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i low4 = _mm256_set1_epi32(15);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 comp = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    __m256 t[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int64_t k0 = g * gs;
    const uint8_t* p = qa.group_data(b, g) + 32 * h;
    if constexpr (!Q4) {
      for (int64_t s = 0; s < gs / 4; ++s, p += 64) {
        const __m256 xv = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(x + k0 + 4 * s));
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) t[q] = _mm256_fmadd_ps(xv, _mm256_cvtepi32_ps(load8_u8(p + 8 * q)), t[q]);
      }
    } else {
      for (int64_t s = 0; s < gs / 8; ++s, p += 64) {
        const __m256 xlo = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(x + k0 + 8 * s));
        const __m256 xhi = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(x + k0 + 8 * s + 4));
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m256i d = load8_u8(p + 8 * q);
          t[q] = _mm256_fmadd_ps(xlo, _mm256_cvtepi32_ps(_mm256_and_si256(d, low4)), t[q]);
          t[q] = _mm256_fmadd_ps(xhi, _mm256_cvtepi32_ps(_mm256_srli_epi32(d, 4)), t[q]);
        }
      }
    }
    const __m256 s8 = load_scales8(qa.group_scales(b, g) + h * half_scale_bytes(w), w.scale_dtype);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q)
      acc[q] = _mm256_fmadd_ps(t[q], _mm256_permutevar8x32_ps(s8, _mm256_add_epi32(iota_div4, _mm256_set1_epi32(2 * q))),
                               acc[q]);
    comp = _mm256_fmadd_ps(s8, _mm256_set1_ps(c.xsum[m * G + g]), comp);
  }
  // element 4L + q of the hadd tree = row 2q + L
  __m256 r = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
  r = _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  r = _mm256_fnmadd_ps(_mm256_set1_ps(Q4 ? 8.0f : 128.0f), comp, r);
  const int64_t n0 = 16 * b + 8 * h, cnt = imin(8, w.N - n0);
  if (cnt <= 0) return;
  float* yp = a.y + m * a.ldy + n0;
  alignas(32) float buf[8];
  _mm256_store_ps(buf, r);
  for (int64_t i = 0; i < cnt; ++i) yp[i] = buf[i] + (a.bias ? a.bias[n0 + i] : 0.0f);
}

// The decode GEMVs' pool job: c.n_blocks 16-row blocks in up to 8 tasks per
// thread of at least kQGemvRowsPerTask rows (c.blocks_per_task is set here);
// on one thread, or with one task, they run on the caller.
template <typename Ctx>
void run_block_tasks(Ctx& c, const Runner& runner, void (*task)(void*, int64_t, int)) {
  int64_t n_tasks = imax(1, imin(int64_t(runner.n_threads) * 8, c.n_blocks * 16 / kQGemvRowsPerTask));
  c.blocks_per_task = (c.n_blocks + n_tasks - 1) / n_tasks;
  n_tasks = (c.n_blocks + c.blocks_per_task - 1) / c.blocks_per_task;
  if (n_tasks == 1 || runner.n_threads == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) task(&c, t, 0);
    return;
  }
  runner.run(runner.pool, n_tasks, task, &c);
}

void qgemv_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const QGemvCtx*>(p);
  const int64_t b0 = task * c.blocks_per_task, b1 = imin(c.n_blocks, b0 + c.blocks_per_task);
  const bool q4 = c.a->w->type == QuantType::Q4;
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t m = 0; m < c.a->M; ++m)
      for (int h = 0; h < 2; ++h) {
        if (q4)
          qgemv_half<true>(c, b, h, m);
        else
          qgemv_half<false>(c, b, h, m);
      }
}

// dst[k][16] (k < kcl) = dequantized W[16 b + j, k0 + k]; k0, kcl multiples of 8.
void pack_q_sliver(const QuantizedWeight& w, int64_t b, int64_t k0, int64_t kcl, float* dst) {
  const int64_t gs = w.group_size;
  const bool q4 = w.type == QuantType::Q4;
  const QuantAddr qa = quant_addr(w);
  const __m256 off = _mm256_set1_ps(q4 ? 8.0f : 128.0f);
  const __m256i m8 = _mm256_set1_epi32(q4 ? 15 : 255);
  for (int h = 0; h < 2; ++h) {
    __m256 s8 = _mm256_setzero_ps();
    int64_t cur_g = -1;
    const uint8_t* gd = nullptr;  // the data of group cur_g
    for (int64_t k = k0; k < k0 + kcl; k += q4 ? 8 : 4) {
      if (k / gs != cur_g) {
        cur_g = k / gs;
        s8 = load_scales8(qa.group_scales(b, cur_g) + h * half_scale_bytes(w), w.scale_dtype);
        gd = qa.group_data(b, cur_g);
      }
      const int64_t kg = k - cur_g * gs;  // k inside the group
      const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gd + (q4 ? kg / 8 : kg / 4) * 64 + 32 * h));
      float* o = dst + (k - k0) * 16 + 8 * h;
#pragma GCC unroll 4
      for (int kk = 0; kk < 4; ++kk) {
        const __m256i u = _mm256_and_si256(_mm256_srli_epi32(d, 8 * kk), m8);
        _mm256_store_ps(o + kk * 16, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(u), off), s8));
        if (q4) {
          const __m256i u2 = _mm256_and_si256(_mm256_srli_epi32(d, 8 * kk + 4), m8);
          _mm256_store_ps(o + (kk + 4) * 16, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(u2), off), s8));
        }
      }
    }
  }
}

struct QGemmCtx {
  GemmCtx g;               // x packing and tiling of the f32 GEMM (g.a: x, M, K, ldx, y, ldy, bias)
  const QuantizedWeight* w;
};

void qgemm_task(void* p, int64_t task, int) {
  const auto& qc = *static_cast<const QGemmCtx*>(p);
  const GemmCtx& c = qc.g;
  const MatmulArgs& a = *c.a;
  const int64_t nt = task % c.n_ntasks, mc = task / c.n_ntasks;
  const int64_t n0 = nt * c.nb, n1 = imin(a.N, n0 + c.nb);
  const int64_t mt0 = mc * c.mt_per_task, mt1 = imin(c.n_mt, mt0 + c.mt_per_task);
  if (n0 >= n1 || mt0 >= mt1) return;
  const int64_t nrows = n1 - n0, n_sl = (nrows + 15) / 16;
  float* panel = detail::scratch(detail::kScratchPanel, n_sl * c.kc * 16);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t s = 0; s < n_sl; ++s) pack_q_sliver(*qc.w, (n0 + 16 * s) / 16, k0, kcl, panel + s * c.kc * 16);
    for (int64_t s = 0; s < n_sl; ++s) {
      const int64_t ncols = imin(16, nrows - 16 * s), nn = n0 + 16 * s;
      const float* wp = panel + s * c.kc * 16;
      const float* bias = a.bias ? a.bias + nn : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
        micro_for_rows(mr)(c.xp + (mt * c.n_kb + kb) * c.kc * kMR, wp, kcl, a.y + m0 * a.ldy + nn, a.ldy, ncols,
                           kb == 0, bias);
      }
    }
  }
}

// ================================================================= attention
template <DType T>
void attention_t(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table, int64_t n_ctx,
                 float scale, float alibi_slope, float* out, float* scores) {
  using E = typename Ld<T>::E;
  const int hd = kv.head_dim, hd8 = hd & ~7;
  // head-major pools (PagedKV): a head's rows of a block are contiguous
  const int64_t token_stride = hd;
  const E* kbase = static_cast<const E*>(kv.k);
  const E* vbase = static_cast<const E*>(kv.v);
  auto block_first_row = [&](int64_t j) { return kv_block_row(kv, block_table[j / kv.block_size], kv_head); };
  for (int64_t j0 = 0; j0 < n_ctx; j0 += kv.block_size) {
    const int64_t r0 = block_first_row(j0);  // the block's first row (and scale) of this head
    const E* blk = kbase + r0 * hd;
    const int64_t nt = imin(kv.block_size, n_ctx - j0);
    for (int64_t t = 0; t < nt; t += 4) {
      const int64_t cnt = imin(4, nt - t);
      const E* ks[4];
      for (int i = 0; i < 4; ++i) ks[i] = blk + (t + (i < cnt ? i : 0)) * token_stride;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int d = 0; d < hd8; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) acc[i] = _mm256_fmadd_ps(qv, Ld<T>::load(ks[i] + d), acc[i]);
      }
      alignas(16) float dots[4];
      _mm_store_ps(dots, hsum4(acc[0], acc[1], acc[2], acc[3]));
      for (int64_t i = 0; i < cnt; ++i) {
        float dot = dots[i];
        for (int d = hd8; d < hd; ++d) dot += q[d] * Ld<T>::scalar(ks[i] + d);
        const int64_t j = j0 + t + i;
        if constexpr (T == DType::I8)
          dot *= kv.k_scale[r0 + t + i];
        scores[j] = dot * scale + alibi_slope * float(j - (n_ctx - 1));
      }
    }
  }
  softmax(scores, n_ctx);
  if constexpr (T == DType::I8) {  // fold the values' scales into the weights
    for (int64_t j = 0; j < n_ctx; ++j)
      scores[j] *= kv.v_scale[block_first_row(j) + j % kv.block_size];
  }
  // out = sum_j p_j V_j, 32 floats of head_dim per pass, two tokens at a time
  for (int d0 = 0; d0 < hd8; d0 += 32) {
    const int nv = int(imin(32, hd8 - d0)) / 8;
    __m256 a0[4], a1[4];
    for (int v = 0; v < 4; ++v) a0[v] = a1[v] = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < n_ctx; j0 += kv.block_size) {
      const E* blk = vbase + block_first_row(j0) * hd + d0;
      const int64_t nt = imin(kv.block_size, n_ctx - j0);
      int64_t t = 0;
      for (; t + 2 <= nt; t += 2) {
        const __m256 p0 = _mm256_set1_ps(scores[j0 + t]), p1 = _mm256_set1_ps(scores[j0 + t + 1]);
        const E* v0 = blk + t * token_stride;
        const E* v1 = v0 + token_stride;
        if (nv == 4) {
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) {
            a0[v] = _mm256_fmadd_ps(p0, Ld<T>::load(v0 + 8 * v), a0[v]);
            a1[v] = _mm256_fmadd_ps(p1, Ld<T>::load(v1 + 8 * v), a1[v]);
          }
        } else {
          for (int v = 0; v < nv; ++v) {
            a0[v] = _mm256_fmadd_ps(p0, Ld<T>::load(v0 + 8 * v), a0[v]);
            a1[v] = _mm256_fmadd_ps(p1, Ld<T>::load(v1 + 8 * v), a1[v]);
          }
        }
      }
      if (t < nt) {
        const __m256 p0 = _mm256_set1_ps(scores[j0 + t]);
        const E* v0 = blk + t * token_stride;
        for (int v = 0; v < nv; ++v) a0[v] = _mm256_fmadd_ps(p0, Ld<T>::load(v0 + 8 * v), a0[v]);
      }
    }
    for (int v = 0; v < nv; ++v) _mm256_storeu_ps(out + d0 + 8 * v, _mm256_add_ps(a0[v], a1[v]));
  }
  for (int d = hd8; d < hd; ++d) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n_ctx; ++j) {
      const E* v = vbase + (block_first_row(j) + j % kv.block_size) * token_stride;
      acc += scores[j] * Ld<T>::scalar(v + d);
    }
    out[d] = acc;
  }
}

// ---------------------------------------------------------------- rows sharing one K/V head
// attention_rows (ops.h) for head_dim a multiple of 8: the query rows of a
// GQA group (and the tokens of a prompt) read the same keys and values, so
// each chunk of cache blocks is widened to f32 once (I8: times its per-slot
// scales) into an L1-sized buffer that every row's dot products or value sums
// then read, instead of every row loading and converting the cache itself
// (attention_t). Scores of all rows are kept ([row][n_ctx]) between the
// passes. Pairs of rows of one context length share each load.
// Against the row-by-row version (tinyllama int4, RINFER_ISA=avx2, 512-token
// context, both behind a switch flipped every decode step): attention per
// layer 277 -> 203 us on 1 thread, 165 -> 121 us on 2; bench_kernels
// attention/bf16/32q4kv_hd64/ctx512/rows/avx2 160 -> 129 us (cold: 202 -> 175).
constexpr int64_t kAttnChunkFloats = 4096;  // 16 KiB: whole cache blocks, L1-resident

template <DType T>
void widen_chunk(const PagedKV& kv, bool v, int kv_head, const int32_t* block_table, int64_t j0, int64_t nt,
                 float* dst) {
  using E = typename Ld<T>::E;
  const int hd = kv.head_dim, bs = kv.block_size;
  const E* base = static_cast<const E*>(v ? kv.v : kv.k);
  const float* scales = v ? kv.v_scale : kv.k_scale;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t j = j0 + t;
    const int64_t row = kv_block_row(kv, block_table[j / bs], kv_head) + j % bs;
    const E* src = base + row * hd;
    float* d = dst + t * hd;
    __m256 sc = _mm256_set1_ps(1.0f);
    if constexpr (T == DType::I8) sc = _mm256_set1_ps(scales[row]);
    for (int i = 0; i < hd; i += 8) {
      __m256 x = Ld<T>::load(src + i);
      if constexpr (T == DType::I8) x = _mm256_mul_ps(x, sc);
      _mm256_storeu_ps(d + i, x);
    }
  }
}

// s[r][t] = scale * q_r . K_t + slope_r * (j0 + t - (n_ctx - 1)) for t < nt,
// R = 1 or 2 rows of one context length; K_t = kf + t * hd.
template <int R>
void rows_scores(const float* const* q, const float* kf, int hd, int64_t nt, int64_t j0, int64_t n_ctx, float scale,
                 const float* slope, float* const* s) {
  for (int64_t t = 0; t < nt; t += 4) {
    const int64_t cnt = imin(4, nt - t);
    const float* kp[4];  // past the last key: repeat one (its dot is not stored)
    for (int i = 0; i < 4; ++i) kp[i] = kf + (t + (i < cnt ? i : 0)) * hd;
    __m256 acc[R][4];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) acc[r][i] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      __m256 qv[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) qv[r] = _mm256_loadu_ps(q[r] + d);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m256 k = _mm256_loadu_ps(kp[i] + d);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) acc[r][i] = _mm256_fmadd_ps(qv[r], k, acc[r][i]);
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      alignas(16) float dots[4];
      _mm_store_ps(dots, hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
      for (int64_t i = 0; i < cnt; ++i) {
        const int64_t j = j0 + t + i;
        s[r][j] = dots[i] * scale + slope[r] * float(j - (n_ctx - 1));
      }
    }
  }
}

// out_r[0 .. hd) (+)= sum_{t < nt} p_r[j0 + t] * V_t for R = 1 or 2 rows of
// one context length, V_t = vf + t * hd; 32 floats of hd per pass.
template <int R>
void rows_values(const float* const* p, const float* vf, int hd, int64_t j0, int64_t nt, bool first,
                 float* const* out) {
  for (int d0 = 0; d0 < hd; d0 += 32) {
    const int nv = int(imin(32, hd - d0)) / 8;
    __m256 acc[R][4];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v)
        acc[r][v] = first || v >= nv ? _mm256_setzero_ps() : _mm256_loadu_ps(out[r] + d0 + 8 * v);
    const float* vp = vf + d0;
    if (nv == 4) {
      for (int64_t t = 0; t < nt; ++t, vp += hd) {
        __m256 pr[R];
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) pr[r] = _mm256_broadcast_ss(p[r] + j0 + t);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m256 x = _mm256_loadu_ps(vp + 8 * v);
#pragma GCC unroll 2
          for (int r = 0; r < R; ++r) acc[r][v] = _mm256_fmadd_ps(pr[r], x, acc[r][v]);
        }
      }
    } else {
      for (int64_t t = 0; t < nt; ++t, vp += hd) {
        __m256 pr[R];
        for (int r = 0; r < R; ++r) pr[r] = _mm256_broadcast_ss(p[r] + j0 + t);
        for (int v = 0; v < nv; ++v) {
          const __m256 x = _mm256_loadu_ps(vp + 8 * v);
          for (int r = 0; r < R; ++r) acc[r][v] = _mm256_fmadd_ps(pr[r], x, acc[r][v]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < nv; ++v) _mm256_storeu_ps(out[r] + d0 + 8 * v, acc[r][v]);
  }
}

template <DType T>
void attention_rows_t(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                      float scale) {
  const int hd = kv.head_dim, bs = kv.block_size;
  int64_t n_max = 0;
  for (int r = 0; r < n_rows; ++r) n_max = imax(n_max, rows[r].n_ctx);
  const int64_t ld = (n_max + 7) / 8 * 8;
  float* scores = detail::scratch(detail::kScratchAttnScores, int64_t(n_rows) * ld);
  const int64_t chunk = imax(1, kAttnChunkFloats / hd / bs) * bs;
  float* wide = detail::scratch(detail::kScratchAttnBlock, imin(chunk, n_max) * hd);
  // f(r, R, j0, nt) for row r (R = 2: rows r and r + 1, of one length) over
  // the positions [j0, j0 + nt) of the chunk at j0 that the row attends to.
  auto for_rows = [&](int64_t j0, auto&& f) {
    for (int r = 0; r < n_rows; ++r) {
      if (rows[r].n_ctx <= j0) continue;
      const int64_t nt = imin(chunk, rows[r].n_ctx - j0);
      if (r + 1 < n_rows && rows[r + 1].n_ctx == rows[r].n_ctx) {
        f(r, 2, j0, nt);
        ++r;
      } else {
        f(r, 1, j0, nt);
      }
    }
  };
  for (int64_t j0 = 0; j0 < n_max; j0 += chunk) {
    widen_chunk<T>(kv, false, kv_head, block_table, j0, imin(chunk, n_max - j0), wide);
    for_rows(j0, [&](int r, int R, int64_t j, int64_t nt) {
      const float* q[2] = {rows[r].q, rows[r + R - 1].q};
      const float slope[2] = {rows[r].alibi_slope, rows[r + R - 1].alibi_slope};
      float* s[2] = {scores + r * ld, scores + (r + R - 1) * ld};
      if (R == 2)
        rows_scores<2>(q, wide, hd, nt, j, rows[r].n_ctx, scale, slope, s);
      else
        rows_scores<1>(q, wide, hd, nt, j, rows[r].n_ctx, scale, slope, s);
    });
  }
  for (int r = 0; r < n_rows; ++r) {
    if (rows[r].n_ctx > 0)
      softmax(scores + r * ld, rows[r].n_ctx);
    else
      for (int d = 0; d < hd; ++d) rows[r].out[d] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < n_max; j0 += chunk) {
    widen_chunk<T>(kv, true, kv_head, block_table, j0, imin(chunk, n_max - j0), wide);
    for_rows(j0, [&](int r, int R, int64_t j, int64_t nt) {
      const float* p[2] = {scores + r * ld, scores + (r + R - 1) * ld};
      float* const out[2] = {rows[r].out, rows[r + R - 1].out};
      if (R == 2)
        rows_values<2>(p, wide, hd, j, nt, j == 0, out);
      else
        rows_values<1>(p, wide, hd, j, nt, j == 0, out);
    });
  }
}


// ---------------------------------------------------------------- rows in lanes
// attention_rows with many rows (a prompt's tokens x a GQA group's heads),
// as the AVX-512 file's rows in lanes at 8 lanes: tiles of 8 rows, one row
// per lane, so that nothing is summed across lanes. Scores S^T[t][lane] =
// K_t[d] (broadcast) * Q^T[d][lane] summed over d, the softmax per lane down
// t, O^T[d][lane] = V_t[d] (broadcast) * P^T[t][lane] summed over t. One FMA
// per key and dimension for 8 rows, where the row path spends hd / 8 FMAs
// per key and row plus horizontal sums. A decode step's GQA group of 6 to 8
// heads is one tile too: `bench_kernels` attention/bf16/32q4kv_hd64/ctx512/
// rows/avx2 (groups of 8) took 133 µs on the row path and 75 in lanes, 199
// and 127 from memory; decode steps in turn, RINFER_ISA=avx2, 2 threads:
// the row path 0.991 (qwen2.5-0.5b int4) and 0.984 (tinyllama int4) of this.
constexpr int kLaneRows = 8;
constexpr int kLaneMinRows = 6;  // a call, or a last tile, of fewer rows takes the row path
constexpr int kMaxLaneTiles = 16;  // tiles per attention_lanes_t call (128 rows)

// One tile: Q^T [hd][8] and O^T [hd][8] in the lanes scratch, and per lane
// the row's n_ctx (as a float: exact below 2^24), ALiBi slope, running max
// of its scores and 1 / sum of their exponentials.
struct LaneTile {
  float* qt;
  float* ot;
  alignas(32) float n_ctx[kLaneRows];
  alignas(32) float slope[kLaneRows];
  alignas(32) float max[kLaneRows];
  alignas(32) float inv[kLaneRows];
  int64_t n_max;  // the tile's longest context
  int n_rows;
  static int64_t floats(int hd) { return 2 * int64_t(hd) * kLaneRows; }
};

// Scores of KB keys (wide rows k[0 .. KB)) at positions j .. j + KB - 1 for
// the tile's lanes: scale * q . K + slope * (j + i - (n_ctx - 1)), -inf at
// positions >= n_ctx; stored st[i][lane], the running max updated. One
// chain per key (KB of them) over d.
template <int KB>
inline void lane_scores(LaneTile& tl, const float* k, int hd, int64_t j, float scale, float* st) {
  __m256 acc[KB];
#pragma GCC unroll 12
  for (int i = 0; i < KB; ++i) acc[i] = _mm256_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    const __m256 q = _mm256_load_ps(tl.qt + d * kLaneRows);
#pragma GCC unroll 12
    for (int i = 0; i < KB; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(k + i * hd + d), q, acc[i]);
  }
  const __m256 n_ctx = _mm256_load_ps(tl.n_ctx), slope = _mm256_load_ps(tl.slope), vscale = _mm256_set1_ps(scale);
  const __m256 last = _mm256_sub_ps(n_ctx, _mm256_set1_ps(1.0f)), ninf = _mm256_set1_ps(-INFINITY);
  __m256 mx = _mm256_load_ps(tl.max);
#pragma GCC unroll 12
  for (int i = 0; i < KB; ++i) {
    const __m256 pos = _mm256_set1_ps(float(j + i));
    __m256 s = _mm256_fmadd_ps(acc[i], vscale, _mm256_mul_ps(slope, _mm256_sub_ps(pos, last)));
    s = _mm256_blendv_ps(ninf, s, _mm256_cmp_ps(pos, n_ctx, _CMP_LT_OQ));
    _mm256_store_ps(st + i * kLaneRows, s);
    mx = _mm256_max_ps(mx, s);
  }
  _mm256_store_ps(tl.max, mx);
}

constexpr int kLaneKeys = 12;  // keys per lane_scores call: 12 accumulators
void lane_scores_chunk(LaneTile& tl, const float* k, int hd, int64_t j0, int64_t nt, float scale, float* st) {
  int64_t i = 0;
  for (; i + kLaneKeys <= nt; i += kLaneKeys)
    lane_scores<kLaneKeys>(tl, k + i * hd, hd, j0 + i, scale, st + i * kLaneRows);
  const float* kk = k + i * hd;
  float* s = st + i * kLaneRows;
  const int64_t j = j0 + i;
  switch (nt - i) {
    case 1: return lane_scores<1>(tl, kk, hd, j, scale, s);
    case 2: return lane_scores<2>(tl, kk, hd, j, scale, s);
    case 3: return lane_scores<3>(tl, kk, hd, j, scale, s);
    case 4: return lane_scores<4>(tl, kk, hd, j, scale, s);
    case 5: return lane_scores<5>(tl, kk, hd, j, scale, s);
    case 6: return lane_scores<6>(tl, kk, hd, j, scale, s);
    case 7: return lane_scores<7>(tl, kk, hd, j, scale, s);
    case 8: return lane_scores<8>(tl, kk, hd, j, scale, s);
    case 9: return lane_scores<9>(tl, kk, hd, j, scale, s);
    case 10: return lane_scores<10>(tl, kk, hd, j, scale, s);
    case 11: return lane_scores<11>(tl, kk, hd, j, scale, s);
    default: return;
  }
}

// st[t][lane] = exp(st - max) for t < n_max (0 where the score is -inf),
// and inv = 1 / sum over t (summed in double like softmax; 0 for a lane
// with no positions).
void lane_softmax(LaneTile& tl, float* st) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 mx = _mm256_load_ps(tl.max);
  mx = _mm256_blendv_ps(mx, _mm256_setzero_ps(), _mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ));
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (int64_t t = 0; t < tl.n_max; ++t) {
    const __m256 s = _mm256_load_ps(st + t * kLaneRows);
    const __m256 e = _mm256_and_ps(_mm256_cmp_ps(s, ninf, _CMP_NEQ_UQ), exp256(_mm256_sub_ps(s, mx)));
    _mm256_store_ps(st + t * kLaneRows, e);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double sum[kLaneRows];
  _mm256_store_pd(sum, s0);
  _mm256_store_pd(sum + 4, s1);
  for (int l = 0; l < kLaneRows; ++l) tl.inv[l] = sum[l] > 0 ? float(1.0 / sum[l]) : 0.0f;
}

// O^T[d][lane] (+)= sum_{i < nt} P^T[i][lane] * V_i[d] for d in [d0, d0 + DB):
// two chains (even and odd keys), 2 DB accumulators.
template <int DB>
inline void lane_values(const LaneTile& tl, const float* pt, const float* v, int hd, int64_t nt, int d0, bool first) {
  __m256 a0[DB], a1[DB];
#pragma GCC unroll 6
  for (int e = 0; e < DB; ++e) {
    a0[e] = first ? _mm256_setzero_ps() : _mm256_load_ps(tl.ot + (d0 + e) * kLaneRows);
    a1[e] = _mm256_setzero_ps();
  }
  const float* vp = v + d0;
  int64_t i = 0;
  for (; i + 2 <= nt; i += 2, vp += 2 * hd) {
    const __m256 p0 = _mm256_load_ps(pt + i * kLaneRows), p1 = _mm256_load_ps(pt + (i + 1) * kLaneRows);
#pragma GCC unroll 6
    for (int e = 0; e < DB; ++e) {
      a0[e] = _mm256_fmadd_ps(_mm256_broadcast_ss(vp + e), p0, a0[e]);
      a1[e] = _mm256_fmadd_ps(_mm256_broadcast_ss(vp + hd + e), p1, a1[e]);
    }
  }
  if (i < nt) {
    const __m256 p0 = _mm256_load_ps(pt + i * kLaneRows);
#pragma GCC unroll 6
    for (int e = 0; e < DB; ++e) a0[e] = _mm256_fmadd_ps(_mm256_broadcast_ss(vp + e), p0, a0[e]);
  }
#pragma GCC unroll 6
  for (int e = 0; e < DB; ++e) _mm256_store_ps(tl.ot + (d0 + e) * kLaneRows, _mm256_add_ps(a0[e], a1[e]));
}

constexpr int kLaneDims = 6;  // dimensions per lane_values pass: 12 accumulators
void lane_values_chunk(const LaneTile& tl, const float* pt, const float* v, int hd, int64_t nt, bool first) {
  int d0 = 0;
  for (; d0 + kLaneDims <= hd; d0 += kLaneDims) lane_values<kLaneDims>(tl, pt, v, hd, nt, d0, first);
  switch (hd - d0) {
    case 1: return lane_values<1>(tl, pt, v, hd, nt, d0, first);
    case 2: return lane_values<2>(tl, pt, v, hd, nt, d0, first);
    case 3: return lane_values<3>(tl, pt, v, hd, nt, d0, first);
    case 4: return lane_values<4>(tl, pt, v, hd, nt, d0, first);
    case 5: return lane_values<5>(tl, pt, v, hd, nt, d0, first);
    default: return;
  }
}

// attention_rows for the rows of ceil(n_rows / 8) <= kMaxLaneTiles tiles
// (head_dim a multiple of 8), K and V widened chunk by chunk as in
// attention_rows_t.
template <DType T>
void attention_lanes_t(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                       float scale) {
  const int hd = kv.head_dim, bs = kv.block_size;
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
    for (int d0 = 0; d0 < hd; d0 += 8) {  // Q^T, 8 x 8 at a time
      __m256 r[8];
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l)
        r[l] = l < tl.n_rows ? _mm256_loadu_ps(rows[ti * kLaneRows + l].q + d0) : _mm256_setzero_ps();
      transpose8(r);
#pragma GCC unroll 8
      for (int d = 0; d < 8; ++d) _mm256_store_ps(tl.qt + (d0 + d) * kLaneRows, r[d]);
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
  const int64_t ld_s = n_max * kLaneRows;  // scores / probabilities per tile: [n_max][8]
  float* st = detail::scratch(detail::kScratchAttnScores, imax(1, n_tiles * ld_s));
  const int64_t chunk = imax(1, kAttnChunkFloats / hd / bs) * bs;
  float* wide = detail::scratch(detail::kScratchAttnBlock, imax(1, imin(chunk, n_max)) * hd);
  for (int64_t j0 = 0; j0 < n_max; j0 += chunk) {
    widen_chunk<T>(kv, false, kv_head, block_table, j0, imin(chunk, n_max - j0), wide);
    for (int ti = 0; ti < n_tiles; ++ti) {
      LaneTile& tl = tiles[ti];
      if (tl.n_max <= j0) continue;
      lane_scores_chunk(tl, wide, hd, j0, imin(chunk, tl.n_max - j0), scale, st + ti * ld_s + j0 * kLaneRows);
    }
  }
  for (int ti = 0; ti < n_tiles; ++ti) lane_softmax(tiles[ti], st + ti * ld_s);
  for (int64_t j0 = 0; j0 < n_max; j0 += chunk) {
    widen_chunk<T>(kv, true, kv_head, block_table, j0, imin(chunk, n_max - j0), wide);
    for (int ti = 0; ti < n_tiles; ++ti) {
      const LaneTile& tl = tiles[ti];
      if (tl.n_max <= j0) continue;
      lane_values_chunk(tl, st + ti * ld_s + j0 * kLaneRows, wide, hd, imin(chunk, tl.n_max - j0), j0 == 0);
    }
  }
  for (int ti = 0; ti < n_tiles; ++ti) {  // out = O^T transposed back, times 1 / sum
    const LaneTile& tl = tiles[ti];
    if (tl.n_max == 0) {  // O^T was never written; every row is empty
      for (int l = 0; l < tl.n_rows; ++l)
        for (int d = 0; d < hd; ++d) rows[ti * kLaneRows + l].out[d] = 0.0f;
      continue;
    }
    for (int d0 = 0; d0 < hd; d0 += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int d = 0; d < 8; ++d) r[d] = _mm256_load_ps(tl.ot + (d0 + d) * kLaneRows);
      transpose8(r);
      for (int l = 0; l < tl.n_rows; ++l)
        _mm256_storeu_ps(rows[ti * kLaneRows + l].out + d0, _mm256_mul_ps(r[l], _mm256_set1_ps(tl.inv[l])));
    }
  }
}
}  // namespace

// ================================================================= entry points
void matmul(const MatmulArgs& a, const Runner& runner) {
  if (a.M <= kGemvMaxM)
    gemv(a, runner);
  else
    gemm(a, runner);
}

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

void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table, int64_t n_ctx,
                    float scale, float alibi_slope, float* out, float* scratch) {
  if (n_ctx <= 0) {
    for (int d = 0; d < kv.head_dim; ++d) out[d] = 0.0f;
    return;
  }
  switch (kv.dtype) {
    case DType::F16:
      return attention_t<DType::F16>(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    case DType::BF16:
      return attention_t<DType::BF16>(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    case DType::I8:
      return attention_t<DType::I8>(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    default:
      return attention_t<DType::F32>(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
  }
}

// AVX2: every chunk of K/V blocks widened once for all rows; tiles of 8 rows
// in lanes (attention_lanes_t: a prompt's tokens x a group's heads, or a
// decode step's group), fewer than 6 rows, and a last tile of fewer than 6,
// in rows (attention_rows_t); head_dim not a multiple of 8: row by row.
void attention_rows(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    float scale) {
  if (kv.head_dim % 8 == 0 && n_rows >= kLaneMinRows) {
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
  }
  if (kv.head_dim % 8 == 0) switch (kv.dtype) {
      case DType::F16: return attention_rows_t<DType::F16>(rows, n_rows, kv, kv_head, block_table, scale);
      case DType::BF16: return attention_rows_t<DType::BF16>(rows, n_rows, kv, kv_head, block_table, scale);
      case DType::I8: return attention_rows_t<DType::I8>(rows, n_rows, kv, kv_head, block_table, scale);
      default: return attention_rows_t<DType::F32>(rows, n_rows, kv, kv_head, block_table, scale);
    }
  int64_t n_max = 0;
  for (int r = 0; r < n_rows; ++r) n_max = n_max > rows[r].n_ctx ? n_max : rows[r].n_ctx;
  float* scores = detail::scratch(detail::kScratchAttnScores, n_max);
  for (int r = 0; r < n_rows; ++r)
    avx2::attention_head(rows[r].q, kv, kv_head, block_table, rows[r].n_ctx, scale, rows[r].alibi_slope, rows[r].out, scores);
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
      __m256 s = _mm256_setzero_ps();
      for (int64_t k = g * gs; k < (g + 1) * gs; k += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(a.x + m * a.ldx + k));
      xsum[m * G + g] = hsum(s);
    }
  QGemvCtx c{&a, xsum, 0, (w.N + 15) / 16};
  run_block_tasks(c, runner, &qgemv_task);
}

namespace {  // the A8 GEMV's helpers: internal linkage (impl.h)
// ---------------------------------------------------------------- W4A8 / W8A8 decode GEMV (no VNNI)
// x quantized per (row, group) as on AVX-512 (quantize_row_i8 on each
// group); the int8 dot products by vpmaddubsw (u8 x s8 -> pairs summed in
// s16) and vpmaddwd against ones (-> the 4 products of a row in s32), where
// the weight-only GEMV above converts every weight to f32. vpmaddubsw
// saturates its pair sums at 32767, so:
//  - Q4: u = q + 8 <= 15 (pairs up to 2 * 15 * 127; both nibbles' pairs
//    added in s16, up to 7620), and the -8 * sum(qx) term starts each
//    group's sum as on AVX-512;
//  - Q8: u = q + 128 would not fit (2 * 255 * 127), so the weight is taken
//    signed (u ^ 0x80 = q, |q| <= 127 from the symmetric quantizer) and x's
//    sign moves onto it: |x| . sign(q, x), pairs up to 2 * 127 * 127. (A
//    byte u = 0, q = -128, which quantize_weights never writes, would not
//    negate: vpsignb keeps -128.)
// One 64-byte line is 16 rows x 4 k (Q4: x 8 k), its halves rows 0-7 and
// 8-15.
struct QGemvA8Ctx {
  const QMatmulArgs* a;
  const int32_t* xq;    // [M][K/4] quads of quantized x
  const int32_t* xabs;  // Q8: [M][K/4] quads of |quantized x|
  const int32_t* comp;  // Q4: [M][G] -8 * sum of the group's quantized x
  const float* sxg;     // [M][G] x's scale per group
  // Software prefetch of the group scales (both types): when several
  // threads stream, or on Q8 where the profile says so (q8_one_thread, as
  // avx512's QGemvA8Ctx::prefetch; neutral here: 1 thread 1.02 / 0.96 of a
  // plain read with it, 0.98 / 0.97 without). Weights: see qgemv_a8_block.
  bool prefetch;
  const DecodePrefetch* pf;  // distances (perf/decode_tuning.h)
};

// Software prefetches: prefetch_l2 and prefetch_line (kernels/cpu/prefetch.h).
// The group scales: this many bytes ahead of the group's (as avx512's kQ4ScalePrefetch).
constexpr int64_t kScalePrefetch = 2048;

// One 16-row block of a matrix in a QGemvA8Job: its context and index.
using QBlk = detail::BlockOf<QGemvA8Ctx>;

// y[m, rows 16 b .. 16 b + 16) of NB blocks side by side, each its own
// stream of weight lines (DecodePrefetch::q4_streams / q8_streams; the
// blocks share x: the matrices of one job have the same K and group size).
// GS: the group size as a constant, so the Q4 line loop unrolls.
//  - Q4 prefetches its weights by the profile's q4_nta / q4_l2, as the
//    AVX-512 GEMV (the "default" profile's 4 KB / 32 KB are the constants
//    this file had measured before the profiles). bench_gemv_pairs,
//    RINFER_ISA=avx2 on Zen 5 (profile zen5: nta 3 KB, two streams), the
//    binaries before and after in turn: 2 threads 0.72-0.88 -> 1.12-1.21 of
//    a plain read, 1 thread 0.75-0.99 -> 1.09-1.25; tinyllama int4 in the
//    model (2 threads) 41.0-41.2 -> 49.7-53.5 tokens/s.
//  - Q8 takes no weight prefetch: the profile's T2 12 KB ahead lost (2
//    threads 0.74 of a plain read with it, 0.99 without; 1 thread 0.81
//    against 1.11), and its line loop unrolls only 4 times (fully unrolled,
//    0.59-0.69 against 0.83-0.90).
template <bool Q4, int GS, bool PF, int NB>
void qgemv_a8_block(const QBlk* blk, int64_t m) {
  const QGemvA8Ctx& c = *blk[0].c;
  const int64_t K = c.a->K, K4 = K / 4, G = K / GS;
  QuantAddr qa[NB];
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) qa[j] = quant_addr(*blk[j].c->a->w);
  const int32_t* xq = c.xq + m * K4;
  const int64_t q4_nta = c.pf->q4_nta, q4_l2 = c.pf->q4_l2;
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(15), flip = _mm256_set1_epi8(char(0x80));
  __m256 acc[NB][2];
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const int64_t k4 = g * GS / 4;
    bool chunk_end[NB];  // prefetch one line more after this group (QuantAddr::chunk_end)
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) chunk_end[j] = qa[j].chunk_end(g, G);
    __m256i s[NB][2];
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) s[j][0] = s[j][1] = Q4 ? _mm256_set1_epi32(c.comp[m * G + g]) : _mm256_setzero_si256();
    if constexpr (!Q4) {
      const int32_t* xa = c.xabs + m * K4;
#pragma GCC unroll 4
      for (int64_t t = 0; t < GS / 4; ++t) {
        const __m256i xs = _mm256_set1_epi32(xq[k4 + t]), xm = _mm256_set1_epi32(xa[k4 + t]);
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) {
          const uint8_t* p = qa[j].group_data(blk[j].b, g) + t * 64;
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h)), flip);
            s[j][h] = _mm256_add_epi32(s[j][h], _mm256_madd_epi16(_mm256_maddubs_epi16(xm, _mm256_sign_epi8(q, xs)), ones));
          }
        }
      }
    } else {
#pragma GCC unroll 16
      for (int64_t t = 0; t < GS / 8; ++t) {
        const __m256i xl = _mm256_set1_epi32(xq[k4 + 2 * t]), xh = _mm256_set1_epi32(xq[k4 + 2 * t + 1]);
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) {
          const uint8_t* p = qa[j].group_data(blk[j].b, g) + t * 64;
          if (q4_nta) {
            prefetch_line(p + q4_nta, c.pf->line_t0);
            if (t == GS / 8 - 1 && chunk_end[j]) prefetch_line(p + 64 + q4_nta, c.pf->line_t0);
          }
          if (q4_l2 && t % 4 == 0) prefetch_l2(p + q4_l2);
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
            const __m256i lo = _mm256_and_si256(l, low4), hi = _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
            const __m256i d = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
            s[j][h] = _mm256_add_epi32(s[j][h], _mm256_madd_epi16(d, ones));
          }
        }
      }
    }
    const __m256 sx = _mm256_set1_ps(c.sxg[m * G + g]);
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) {
      const QuantizedWeight& w = *blk[j].c->a->w;
      const uint8_t* sp = qa[j].group_scales(blk[j].b, g);
      // (Interleaved scales are in the weight stream: the data lines'
      // prefetches reach their lines, with chunk_end's one more.)
      if (PF && !w.interleaved) _mm_prefetch(reinterpret_cast<const char*>(sp) + kScalePrefetch, _MM_HINT_T1);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        acc[j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j][h]),
                                    _mm256_mul_ps(load_scales8(sp + h * half_scale_bytes(w), w.scale_dtype), sx),
                                    acc[j][h]);
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
    const QMatmulArgs& a = *blk[j].c->a;
    const int64_t n0 = 16 * blk[j].b, cnt = imin(16, a.w->N - n0);
    alignas(32) float buf[16];
    _mm256_store_ps(buf, acc[j][0]);
    _mm256_store_ps(buf + 8, acc[j][1]);
    float* yp = a.y + m * a.ldy + n0;
    for (int64_t i = 0; i < cnt; ++i) yp[i] = buf[i] + (a.bias ? a.bias[n0 + i] : 0.0f);
  }
}

// Every x row of NB blocks (the block is re-read from L1/L2 for each row
// after the first).
template <bool Q4, int GS, bool PF, int NB>
void qgemv_a8_rows(const QBlk* blk) {
  for (int64_t m = 0; m < blk[0].c->a->M; ++m) qgemv_a8_block<Q4, GS, PF, NB>(blk, m);
}

// One instance per weight type, group size and prefetch switch (qgemv_dispatch.h).
template <bool Q4, int GS, bool PF, int NB>
struct QGemvA8Kernel {
  static void run(const QBlk* blk) { qgemv_a8_rows<Q4, GS, PF, NB>(blk); }
};
template <int NB>
void qgemv_a8_run(const QBlk* blk) {
  detail::run_q_block<QGemvA8Kernel, NB>(blk);
}

// The decode step's case: x is quantized per group once, and the blocks of
// all the matrices (q/k/v, gate/up) are one job (BlockJob, owned_ranges.h).
using QGemvA8Job = detail::BlockJob<QGemvA8Ctx, kMatmulQMultiMax, &qgemv_a8_run<1>, &qgemv_a8_run<2>>;

// One x row quantized per group for the A8 decode GEMV: quantize_row_i8 on
// each group of gs values (gs a multiple of 8: the same operations, so the
// same bits), with the group's sum (comp) and, for Q8, |q| (xabs) taken
// from the registers. Re-reading the bytes one by one after each group cost
// as much as the quantization (avx512's quantize_groups_a8 says by how much).
void quantize_groups_a8(const float* x, int64_t G, int64_t gs, bool q4, int8_t* q, int8_t* xabs, float* sx,
                        int32_t* comp) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t g = 0; g < G; ++g, x += gs, q += gs, xabs += gs) {
    __m256 mx = _mm256_setzero_ps();
    for (int64_t i = 0; i < gs; i += 8) mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), mx);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mx);
    float amax = 0.0f;
    for (float l : lanes) amax = amax < l ? l : amax;
    const __m256 vinv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i sum = _mm256_setzero_si256();
    for (int64_t i = 0; i < gs; i += 8) {
      __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
      t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);  // NaN -> -127
      const __m256i v = _mm256_cvtps_epi32(t);
      sum = _mm256_add_epi32(sum, v);
      __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(p16, p16));
      if (!q4) {
        p16 = _mm_abs_epi16(p16);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(xabs + i), _mm_packs_epi16(p16, p16));
      }
    }
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
    sx[g] = amax / 127.0f;
    comp[g] = q4 ? -8 * _mm_cvtsi128_si32(s4) : 0;
  }
}
}  // namespace

void matmul_q_gemv_a8_multi(const QMatmulArgs* as, int n, const Runner& runner) {
  const QMatmulArgs& a = as[0];
  const QuantizedWeight& w = *a.w;
  const bool q4 = w.type == QuantType::Q4;
  const int64_t K = a.K, K4 = K / 4, gs = w.group_size, G = K / gs;
  // one float slot per int32 quad / value: xq, xabs, comp, sxg
  float* buf = detail::scratch(detail::kScratchShared, a.M * (2 * K4 + 2 * G));
  auto* xq = reinterpret_cast<int8_t*>(buf);
  auto* xabs = reinterpret_cast<int8_t*>(buf + a.M * K4);
  auto* comp = reinterpret_cast<int32_t*>(buf + 2 * a.M * K4);
  float* sxg = buf + 2 * a.M * K4 + a.M * G;
  for (int64_t m = 0; m < a.M; ++m)
    quantize_groups_a8(a.x + m * a.ldx, G, gs, q4, xq + m * K, xabs + m * K, sxg + m * G, comp + m * G);
  const DecodePrefetch& pf = decode_prefetch();
  QGemvA8Job j;
  for (int i = 0; i < n; ++i)
    j.add(QGemvA8Ctx{&as[i], reinterpret_cast<const int32_t*>(xq), reinterpret_cast<const int32_t*>(xabs), comp, sxg,
                     runner.n_threads > 1 || (as[i].w->type == QuantType::Q8 && pf.q8_one_thread), &pf},
          (as[i].w->N + 15) / 16);
  // At most two streams at this level (16 ymm registers; four, where a
  // profile asks for them, read as two).
  const int streams = (q4 ? pf.q4_streams : pf.q8_streams) >= 2 && a.M <= 2 && j.n_blocks() >= 2 * runner.n_threads
                          ? 2
                          : 1;
  j.run(runner, streams, kGemvClaimBytes / quant_block_read_bytes(w));
}

void matmul_q_gemv_a8(const QMatmulArgs& a, const Runner& runner) { matmul_q_gemv_a8_multi(&a, 1, runner); }

void matmul_q_gemm(const QMatmulArgs& qa, const Runner& runner) {
  const MatmulArgs a{qa.x, qa.M, qa.K, qa.ldx, nullptr, DType::F32, qa.w->N, qa.bias, qa.y, qa.ldy};
  QGemmCtx qc{};
  qc.w = qa.w;
  GemmCtx& c = qc.g;
  c.a = &a;
  c.n_mt = (a.M + kMR - 1) / kMR;
  const bool small_m = c.n_mt <= kSmallMTiles;
  c.kc = small_m ? imin(kKCSmallM, a.K) : kKC;  // multiples of 8 (K is a multiple of the group size)
  c.n_kb = (a.K + c.kc - 1) / c.kc;
  c.xp = detail::scratch(detail::kScratchShared, c.n_mt * c.n_kb * c.kc * kMR);
  const int64_t T = runner.n_threads;
  c.nb = imin(small_m ? kNBSmallM : kNB, imax(16, round_up((a.N + 2 * T - 1) / (2 * T), 16)));
  c.n_ntasks = (a.N + c.nb - 1) / c.nb;
  int64_t m_chunks = c.n_ntasks >= 2 * T ? 1 : imin(c.n_mt, (2 * T + c.n_ntasks - 1) / c.n_ntasks);
  c.mt_per_task = (c.n_mt + m_chunks - 1) / m_chunks;
  m_chunks = (c.n_mt + c.mt_per_task - 1) / c.mt_per_task;
  if (T == 1) {
    for (int64_t mt = 0; mt < c.n_mt; ++mt) gemm_pack_x_task(&c, mt, 0);
    for (int64_t t = 0; t < c.n_ntasks * m_chunks; ++t) qgemm_task(&qc, t, 0);
    return;
  }
  runner.run(runner.pool, c.n_mt, &gemm_pack_x_task, &c);
  runner.run(runner.pool, c.n_ntasks * m_chunks, &qgemm_task, &qc);
}

// Decode GEMV on BF16 weights in the blocked layout (ops.h matmul_bf16_blocked),
// as[0 .. n) of one x as one pool job.
void matmul_bf16_blocked_gemv_multi(const detail::MatmulArgs* as, int n, const detail::Runner& runner) {
  const MatmulArgs& a = as[0];
  const int64_t K = a.K;
  float* xeo = detail::scratch(detail::kScratchShared, a.M * K);
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t k = 0; k < K; k += 32)
      for (int i = 0; i < 16; ++i) {
        xeo[m * K + k + i] = a.x[m * a.ldx + k + 2 * i];
        xeo[m * K + k + 16 + i] = a.x[m * a.ldx + k + 2 * i + 1];
      }
  GemvBlkJob j;
  for (int i = 0; i < n; ++i) j.add(GemvBlkCtx{&as[i], xeo}, as[i].N / kBlkRows);
  j.run(runner, 1, kGemvClaimBytes / (kBlkRows * K * 2));
}

void matmul_bf16_blocked_gemv(const detail::MatmulArgs& a, const detail::Runner& runner) {
  matmul_bf16_blocked_gemv_multi(&a, 1, runner);
}

}  // namespace rinfer::kernels::cpu::avx2
