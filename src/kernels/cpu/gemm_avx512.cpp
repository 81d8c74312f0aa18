// AVX-512 prefill GEMM (more than kGemvMaxM x rows): f32 FMA on F32 / F16 /
// BF16 weights, or BF16 dot products (vdpbf16ps); and the matmul entry points.
// BLIS-style: x is packed once per call into k-major panels; every task
// converts + transposes a block of W rows into f32 slivers (once per
// k-block, amortised over all M rows), and a micro-kernel with x broadcast
// from an L1-resident panel and W slivers from L2 accumulates into y, with
// no horizontal sums. Accumulation is f32 (K terms per output, in k-blocks).
#include "kernels/cpu/common_avx512.h"

namespace rinfer::kernels::cpu::avx512 {

namespace {

// Prefill GEMM register tiles: MR x-rows (broadcast) by NC = 16 * NW W-rows
// (vectors), MR * NW zmm accumulators.
//  - f32 FMA (F32/F16 weights, and BF16 where vdpbf16ps is not used): 6 x 64,
//    4 W vectors and 6 broadcasts per 24 FMAs. Each m-tile's x panel
//    (6 * kFmaKC * 4 = 12 KiB) stays in L1 while the task's W slivers (L2)
//    stream past it; the long k-block halves the passes over y (closer to
//    the FMA peak on Ice Lake than 12 x 32 with W in L1; alike on Zen 4/5).
//  - BF16 dot products (vdpbf16ps, Zen 4/5): 12 x 32 in k-pairs.
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

}  // namespace

void matmul(const MatmulArgs& a, const Runner& runner) {
  if (a.M <= kGemvMaxM && a.bf16_blocked)
    gemv_blocked(&a, 1, runner);
  else if (bf16_blocked_small_m_applies(a))
    gemm_bf16_blocked_small_m(&a, 1, runner);
  else if (a.M <= kGemvMaxM)
    gemv(a, runner);
  else
    gemm(&a, 1, runner, a.wdt == DType::BF16 && a.bf16_dot);
}

void matmul_bf16_blocked_multi(const MatmulArgs* as, int n, const Runner& runner) {
  bool small_m = true;
  for (int i = 0; i < n; ++i) small_m = small_m && bf16_blocked_small_m_applies(as[i]);
  if (as[0].M <= kGemvMaxM)
    gemv_blocked(as, n, runner);
  else if (small_m)
    gemm_bf16_blocked_small_m(as, n, runner);
  else
    gemm(as, n, runner, as[0].bf16_dot);
}

}  // namespace rinfer::kernels::cpu::avx512
