// AVX-512 decode GEMVs on Q8 / Q4 weights: weight-only (f32 x), and A8 (x
// quantized per group, VNNI).
#include "kernels/cpu/common_avx512.h"

namespace rinfer::kernels::cpu::avx512 {

namespace {

// Decode GEMV (weight-only, f32 x): one 16-row block at a time. A 16-byte
// piece of a 64-byte line is 4 rows x 4 k: vpmovzxbd + vcvtdq2ps give 16 f32
// lanes (row, kk), multiplied by x[k .. k+3] repeated 4x (one broadcast) into
// 4 accumulators per x row ("quads" of rows). Per group: the group's partial
// sums t are scaled by the row scales (permuted to the lane layout) into acc;
// the off * X_g term goes into one 16-row vector per x row. At the end each
// row's 4 kk lanes are summed (hsum4 + one permute). Q4: the same with the two
// nibbles of a byte being k and k + 4.

constexpr int64_t kQGemvMaxMA8 = 4;         // decode A8 GEMV: x rows in one pass
// Decode A8 GEMV on Q4, any number of threads: the loop over a group's
// lines is unrolled (the rolled loop spent half its instructions on the
// counter and register copies), each line is prefetched (prefetch_line)
// DecodePrefetch::q4_nta bytes ahead, and once per 4 lines a prefetch into
// L2 reaches q4_l2 bytes ahead; with several threads the group scales are
// prefetched too (kQ4ScalePrefetch, QGemvA8Ctx::prefetch). Q4's loop does
// more work per byte than a plain read, so fewer of its loads are in flight
// and the hardware prefetcher alone falls behind. The distances per CPU:
// DecodePrefetch (perf/decode_tuning.cpp).
constexpr int64_t kQ4ScalePrefetch = 2048;
// Decode A8 GEMV on Q8 with several threads: besides the T2 prefetch
// (DecodePrefetch::q8_t2), one into L2 (q8_l2) per 4 lines, and a per-line
// prefetch (q8_nta); on one thread only where q8_one_thread says so.

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
  // Software prefetch of the Q8 weights and of the group scales
  // (kQ4ScalePrefetch): only when several threads stream, or on Q8 where
  // DecodePrefetch::q8_one_thread says so. (Q4 prefetches its weights on any
  // number of threads.)
  bool prefetch;
  const DecodePrefetch* pf;  // distances
};

// acc + u8 w . s8 x, x one int32 (four int8) broadcast to all lanes:
// vpdpbusd with an embedded {1to16} broadcast, accumulating in place. Inline
// asm because GCC 12 neither folds _mm512_set1_epi32(*x) into the
// instruction nor keeps the accumulator in one register across the loop.
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int32_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
  return acc;
}

// One 16-row block of a matrix in a QGemvA8Job: its context and index.
using QBlk = detail::BlockOf<QGemvA8Ctx>;

// GS: the group size as a constant, so the inner loops unroll completely.
// NB blocks at once, each its own stream of weight lines
// (OwnedRanges::work_streams); they share x (the matrices of one job have
// the same K and group size).
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
      // Unrolled (the comment at kQ4ScalePrefetch says why).
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

}  // namespace

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

namespace {
// One x row quantized per group for the A8 decode GEMV, as quantize_row_i8
// on each group of GS values would (same operations in the same order, so
// the same bits), plus comp[g] = -off * sum(q of group g), all in registers:
// summing the bytes just stored would reload them through a masked store,
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
  // weights: with the separate scale array each weight stream brings a scale
  // stream, and four of each read slower than two.
  bool interleaved = true;
  for (int i = 0; i < n; ++i) interleaved &= as[i].w->interleaved;
  int streams = w.type == QuantType::Q4 ? pf.q4_streams : pf.q8_streams;
  if (streams == 4 && (a.M > 1 || !interleaved)) streams = 2;
  if (a.M > 2 || j.n_blocks() < streams * runner.n_threads) streams = 1;
  j.run(runner, streams, kGemvClaimBytes / quant_block_read_bytes(w));
}

void matmul_q_gemv_a8(const QMatmulArgs& a, const Runner& runner) { matmul_q_gemv_a8_multi(&a, 1, runner); }

}  // namespace rinfer::kernels::cpu::avx512
