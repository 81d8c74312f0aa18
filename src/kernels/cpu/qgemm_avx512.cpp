// AVX-512 prefill GEMM on Q8 / Q4 weights (W8A8 / W4A8, VNNI), plain and
// gated (silu(x Wg^T) * (x Wu^T)).
#include "kernels/cpu/common_avx512.h"

namespace rinfer::kernels::cpu::avx512 {

namespace {

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
// 1 B/cycle per dpbusd, well inside L2's bandwidth).
constexpr int64_t kQKC = 8192;
constexpr int64_t kQNBlocks = 8;            // GEMM: 16-row blocks per task (128 rows)
// Up to this many m-tiles (6 rows each: batched decode) the micro-kernel
// prefetches the next blocks' weights; a prompt's many m-tiles reuse each
// sliver enough for the hardware prefetcher.
constexpr int64_t kQPrefetchMaxMTiles = 8;

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
// PF: also prefetch (into L2) the weights of the task's next blocks, pf[v]
// advancing pf_stride bytes per k step: a few rows (batched decode) reuse a
// sliver too little to hide its first read from memory otherwise.
template <int MR, int NV, int GK4, bool GATED = false, bool PF = false>
void qgemm_micro(const int32_t* xp, const int32_t* comp, const uint8_t* const* wp, const float* sp, int64_t n_groups,
                 const float* sx, float* c, int64_t ldc, const __mmask16* msk, bool first, const float* bias,
                 const float* bias2, const uint8_t* const* pf, int64_t pf_stride) {
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
      if constexpr (PF) {
        const int64_t off = (g * gk4 + s) * pf_stride;
        _mm_prefetch(reinterpret_cast<const char*>(pf[0] + off), _MM_HINT_T1);
        if constexpr (NV == 2) _mm_prefetch(reinterpret_cast<const char*>(pf[1] + off), _MM_HINT_T1);
      }
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
                          const float*, float*, int64_t, const __mmask16*, bool, const float*, const float*,
                          const uint8_t* const*, int64_t);
template <int NV, int GK4, bool GATED, bool PF>
QMicroFn qmicro_for_rows(int64_t mr) {
  static_assert(kQMR == 6);
  switch (mr) {
    case 1: return &qgemm_micro<1, NV, GK4, GATED, PF>;
    case 2: return &qgemm_micro<2, NV, GK4, GATED, PF>;
    case 3: return &qgemm_micro<3, NV, GK4, GATED, PF>;
    case 4: return &qgemm_micro<4, NV, GK4, GATED, PF>;
    case 5: return &qgemm_micro<5, NV, GK4, GATED, PF>;
    default: return &qgemm_micro<6, NV, GK4, GATED, PF>;
  }
}
template <int NV, bool GATED = false>
QMicroFn qmicro_for(int64_t mr, int64_t gs, bool pf) {
  switch (gs) {
    case 32: return pf ? qmicro_for_rows<NV, 8, GATED, true>(mr) : qmicro_for_rows<NV, 8, GATED, false>(mr);
    case 64: return pf ? qmicro_for_rows<NV, 16, GATED, true>(mr) : qmicro_for_rows<NV, 16, GATED, false>(mr);
    default: return pf ? qmicro_for_rows<NV, 32, GATED, true>(mr) : qmicro_for_rows<NV, 32, GATED, false>(mr);
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
      // Few m-tiles: while they run, they prefetch the next step's blocks,
      // each m-tile its share (a block's data is one contiguous run, its
      // k-block a proportional part of it).
      const int64_t next = b + (gated ? 1 : 2);
      const bool pf = c.n_mt <= kQPrefetchMaxMTiles && next + nv - 1 < bb1;
      const uint8_t* pf_base[2] = {nullptr, nullptr};
      int64_t share = 0, pf_stride = 0;
      if (pf) {
        for (int v = 0; v < nv; ++v) {
          const QuantizedWeight& wv = gated && v == 1 ? *c.up->w : w;
          pf_base[v] = quant_addr(wv).group_data(gated ? next : next + v, k0 / gs);
        }
        const int64_t sliver = quant_addr(w).d_block * kcl / K, nm = mt1 - mt0;
        share = (sliver + nm - 1) / nm;
        pf_stride = imax(1, (share + kcl / 4 - 1) / (kcl / 4));
      }
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kQMR, mr = imin(kQMR, a.M - m0);
        const int32_t* xp = c.xp + (mt * K4 + k0 / 4) * kQMR;
        const int32_t* cp = c.comp + (mt * G + k0 / gs) * kQMR;
        const uint8_t* pfp[2] = {pf_base[0] + (mt - mt0) * share, pf_base[1] + (mt - mt0) * share};
        QMicroFn fn = gated     ? qmicro_for<2, true>(mr, gs, pf)
                      : nv == 2 ? qmicro_for<2>(mr, gs, pf)
                                : qmicro_for<1>(mr, gs, pf);
        fn(xp, cp, wp, sp, ng, c.sx + m0, a.y + m0 * a.ldy + n0, a.ldy, msk, kb == 0, bias, bias2, pfp, pf_stride);
      }
    }
  }
}

}  // namespace

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
  // end (N = 896, Qwen2.5-0.5B's o and down, made 7 tasks for 2 threads).
  // Splitting M as well makes whole rounds.
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

}  // namespace rinfer::kernels::cpu::avx512
