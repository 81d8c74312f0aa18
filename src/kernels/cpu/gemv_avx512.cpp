// AVX-512 decode GEMVs (M <= kGemvMaxM x rows): row-major F32 / F16 / BF16
// weights, and BF16 weights in the blocked layout. A GEMV streams W exactly
// once. Each output y[m, n] is a dot product kept as 16 f32 partial sums
// (one zmm) for a register tile of M x-rows by NR (3-4) W-rows; W rows are
// converted to f32 in registers (F16: vcvtph2ps, BF16: zero-extend +
// shift), each loaded W vector serves all M rows, and the tile is reduced
// at the end with a transposing shuffle tree (~2 ops per accumulator). Each
// thread streams one contiguous range of W rows and then helps the others
// (OwnedRanges). Accumulation is f32 throughout (K/16 terms per lane; the
// error bound is checked in tests/kernels/test_matmul.cpp).
#include "kernels/cpu/common_avx512.h"

namespace rinfer::kernels::cpu::avx512 {

namespace {

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
// the M x-rows would not fit in L2 (blocking for L1 splits the W row
// streams).
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

// ---------------------------------------------------------------- decode GEMV, blocked BF16
// W in the blocked layout [N/8][K/32][8 rows][32 k] (ops.h) is one sequential
// stream: the whole matrix is read front to back, which keeps the hardware
// prefetchers at full bandwidth (several row streams at once do not).
// Per 32-k tile and W row: one 64-byte load, BF16 -> f32 without shuffles
// (even k: << 16, odd k: & 0xffff0000) against x split once per call into
// [k/32][16 even | 16 odd] (xeo), two FMAs into one accumulator per (x row,
// W row). Up to 3 x rows share a pass over a block (24 accumulators); more
// rows take further passes over the same block (then L1/L2 resident).
constexpr int kBlkRows = 8;

// MG x rows against NB blocks side by side (wb[0 .. NB): NB streams of
// weight lines, OwnedRanges::work_streams says why; NB = 2 or 4 only with MG
// = 1).
// pf: DecodePrefetch::bf16_t2, a T2 prefetch that far ahead once per
// kSparsePrefetchLines lines, 0: none; nta: DecodePrefetch::bf16_nta, a
// prefetch that far ahead on every line, 0: none; it is a prefetchnta, or a
// prefetcht0 where t0 (DecodePrefetch::line_t0).
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
// load and a store per k-tile each (DecodePrefetch::bf16_streams picks).
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

}  // namespace

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

}  // namespace rinfer::kernels::cpu::avx512
