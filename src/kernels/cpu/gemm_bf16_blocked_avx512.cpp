// BF16 weights in the blocked layout ([N/8][K/32][8][32], ops.h) times a few
// x rows (batched decode: more than kGemvMaxM, at most kBlockedDotMaxM),
// with vdpbf16ps straight on the layout. The prefill GEMM transposes every
// W sliver into k-pairs first, which costs more than the multiply-adds when
// each W element meets only a handful of rows; here a W row's 32 k values
// are one vector as stored, x rows are rounded to BF16 once per call, and
// each (x row, W row) pair accumulates 16 partial sums that are added up
// once at the end (K / 32 multiply-add steps per horizontal sum).
//
// Tile: MR = 3 x rows by one block of 8 W rows, 24 accumulators; per 32 k,
// 3 + 8 vector loads for 24 vdpbf16ps. A task owns a few blocks and runs
// every m-tile over each block while it sits in L1/L2; the m-tiles of one
// block prefetch (into L2) the task's next block, each its share, so that
// the block's first read from memory overlaps the compute.
#include "kernels/cpu/common_avx512.h"
#include "kernels/cpu/prefetch.h"

namespace rinfer::kernels::cpu::avx512 {

namespace {

constexpr int kBMR = 3;               // x rows per micro tile
constexpr int64_t kBlocksPerTask = 4;  // 8-row blocks per task (32 W rows)

struct BlockedCtx {
  const MatmulArgs* a;
  const uint16_t* xb;  // [M][K] x rounded to BF16
  int64_t n_mt;
};

// y[i][0..8) (+ bias) = x_i . W_n for the block's 8 rows; pf: the next
// block's share of lines to prefetch, n_pf lines per 32 k.
template <int MR>
void blocked_micro(const uint16_t* xb, int64_t K, const uint16_t* wblk, float* y, int64_t ldy, const float* bias,
                   const char* pf, int64_t n_pf) {
  __m512 acc[MR][8];
#pragma GCC unroll 3
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int n = 0; n < 8; ++n) acc[i][n] = _mm512_setzero_ps();
  const int64_t KT = K / 32;
  for (int64_t kt = 0; kt < KT; ++kt) {
    __m512bh xv[MR];
#pragma GCC unroll 3
    for (int i = 0; i < MR; ++i) xv[i] = (__m512bh)_mm512_loadu_si512(xb + i * K + kt * 32);
    const uint16_t* wt = wblk + kt * 256;
#pragma GCC unroll 8
    for (int n = 0; n < 8; ++n) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wt + n * 32);
#pragma GCC unroll 3
      for (int i = 0; i < MR; ++i) acc[i][n] = _mm512_dpbf16_ps(acc[i][n], wv, xv[i]);
    }
    for (int64_t l = 0; l < n_pf; ++l) prefetch_l2(pf + (kt * n_pf + l) * 64);
  }
#pragma GCC unroll 3
  for (int i = 0; i < MR; ++i) {
    __m256 s[8];
#pragma GCC unroll 8
    for (int n = 0; n < 8; ++n)
      s[n] = _mm256_add_ps(_mm512_castps512_ps256(acc[i][n]), _mm512_extractf32x8_ps(acc[i][n], 1));
    // hadd of hadds: lane n of the 128-bit halves' sum is row n's total.
    const __m256 h01 = _mm256_hadd_ps(s[0], s[1]), h23 = _mm256_hadd_ps(s[2], s[3]);
    const __m256 h45 = _mm256_hadd_ps(s[4], s[5]), h67 = _mm256_hadd_ps(s[6], s[7]);
    const __m256 q0 = _mm256_hadd_ps(h01, h23), q1 = _mm256_hadd_ps(h45, h67);
    const __m128 r0 = _mm_add_ps(_mm256_castps256_ps128(q0), _mm256_extractf128_ps(q0, 1));
    const __m128 r1 = _mm_add_ps(_mm256_castps256_ps128(q1), _mm256_extractf128_ps(q1, 1));
    __m256 r = _mm256_set_m128(r1, r0);
    if (bias) r = _mm256_add_ps(r, _mm256_loadu_ps(bias));
    _mm256_storeu_ps(y + i * ldy, r);
  }
}

using BlockedMicro = void (*)(const uint16_t*, int64_t, const uint16_t*, float*, int64_t, const float*, const char*,
                              int64_t);
BlockedMicro blocked_micro_for(int64_t mr) {
  static_assert(kBMR == 3);
  return mr == 1 ? &blocked_micro<1> : mr == 2 ? &blocked_micro<2> : &blocked_micro<3>;
}

void blocked_pack_x_task(void* p, int64_t m, int) {
  const auto& c = *static_cast<const BlockedCtx*>(p);
  const MatmulArgs& a = *c.a;
  const float* src = a.x + m * a.ldx;
  uint16_t* dst = const_cast<uint16_t*>(c.xb) + m * a.K;
  for (int64_t k = 0; k < a.K; k += 32) {
    // element j of the result is x[k + j] (round to nearest even)
    const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16), _mm512_loadu_ps(src + k));
    _mm512_storeu_si512(dst + k, v);
  }
}

void blocked_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const BlockedCtx*>(p);
  const MatmulArgs& a = *c.a;
  const int64_t K = a.K, n_blocks = a.N / 8;
  const int64_t b0 = task * kBlocksPerTask, b1 = imin(n_blocks, b0 + kBlocksPerTask);
  const auto* w = static_cast<const uint16_t*>(a.w);
  const int64_t block_elems = 8 * K, lines = block_elems * 2 / 64;
  for (int64_t b = b0; b < b1; ++b) {
    const uint16_t* wblk = w + b * block_elems;
    const bool pf = b + 1 < b1;
    const int64_t share = (lines + c.n_mt - 1) / c.n_mt;  // lines per m-tile
    const int64_t n_pf = pf ? (share + K / 32 - 1) / (K / 32) : 0;
    for (int64_t mt = 0; mt < c.n_mt; ++mt) {
      const int64_t m0 = mt * kBMR, mr = imin(kBMR, a.M - m0);
      const char* pfp = reinterpret_cast<const char*>(wblk + block_elems) + mt * share * 64;
      blocked_micro_for(mr)(c.xb + m0 * K, K, wblk, a.y + m0 * a.ldy + 8 * b, a.ldy, a.bias ? a.bias + 8 * b : nullptr,
                            pfp, n_pf);
    }
  }
}

using BlockedMulti = MultiJob<BlockedCtx, &blocked_task>;

}  // namespace

bool bf16_blocked_small_m_applies(const MatmulArgs& a) {
  return a.bf16_blocked && a.bf16_dot && a.M > kGemvMaxM && a.M <= kBlockedDotMaxM && a.N % 8 == 0 && a.K % 32 == 0;
}

void gemm_bf16_blocked_small_m(const MatmulArgs* as, int n, const Runner& runner) {
  const MatmulArgs& a = as[0];
  uint16_t* xb = reinterpret_cast<uint16_t*>(detail::scratch(detail::kScratchShared, (a.M * a.K + 1) / 2));
  BlockedMulti j;
  for (int i = 0; i < n; ++i) {
    j.ctx[i] = {&as[i], xb, (a.M + kBMR - 1) / kBMR};
    j.first_task[i + 1] = j.first_task[i] + (as[i].N / 8 + kBlocksPerTask - 1) / kBlocksPerTask;
  }
  BlockedCtx pack{&a, xb, 0};
  if (runner.n_threads == 1) {
    for (int64_t m = 0; m < a.M; ++m) blocked_pack_x_task(&pack, m, 0);
    for (int64_t t = 0; t < j.first_task[n]; ++t) BlockedMulti::task(&j, t, 0);
    return;
  }
  runner.run(runner.pool, a.M, &blocked_pack_x_task, &pack);
  runner.run(runner.pool, j.first_task[n], &BlockedMulti::task, &j);
}

}  // namespace rinfer::kernels::cpu::avx512
