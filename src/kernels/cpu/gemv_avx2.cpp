// AVX2 decode GEMVs (M <= kGemvMaxM x rows): row-major F32 / F16 / BF16
// weights, and BF16 weights in the blocked layout.
#include "kernels/cpu/common_avx2.h"

namespace rinfer::kernels::cpu::avx2 {

namespace {

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

// ---------------------------------------------------------------- decode GEMV, blocked BF16
// The AVX-512 kernel's scheme (gemv_avx512.cpp) at 8 lanes: W in the
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
// says: AVX-512 reads several blocks' k-tiles side by side, but their sums do
// not fit next to x in AVX2's 16 registers (two blocks taking turns, their
// sums through L1, read slower). Nor does it prefetch (bf16_t2 is AVX-512's:
// here a T2 prefetch read slower than none).
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

}  // namespace

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
