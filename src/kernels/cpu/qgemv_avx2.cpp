// AVX2 decode GEMVs on Q8 / Q4 weights: weight-only (f32 x), and A8 (x
// quantized per group, vpmaddubsw / vpmaddwd).
#include "kernels/cpu/common_avx2.h"

namespace rinfer::kernels::cpu::avx2 {

namespace {

// Weight-only decode GEMV (see qgemv_avx512.cpp and ops.h): 8-byte pieces of
// a 64-byte line are 2 rows x 4 k; vpmovzxbd + vcvtdq2ps give 8 lanes (row,
// kk), times x[k .. k+3] repeated twice. One half block (8 rows, 4
// accumulators) at a time; the second half reads the same lines again from
// cache.
constexpr int64_t kQGemvRowsPerTask = 64;
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

}  // namespace

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
//    AVX-512 GEMV.
//  - Q8 takes no weight prefetch (the profile's T2 prefetch reads slower
//    here), and its line loop unrolls only 4 times (fully unrolled is
//    slower).
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

}  // namespace rinfer::kernels::cpu::avx2
