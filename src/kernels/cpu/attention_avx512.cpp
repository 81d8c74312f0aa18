// AVX-512 attention over the paged KV cache (attention_rows, attention_head).
#include "kernels/cpu/common_avx512.h"
#include "kernels/cpu/attention_lanes.h"

namespace rinfer::kernels::cpu::avx512 {

namespace {

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
// row reads it from L1 (larger chunks in L2 are slower).
constexpr int64_t kAttnChunkFloats = 4096;
// How far ahead attention_rows prefetches cache blocks, into L2 (into L1
// the widened chunk and the prefetched lines evict each other).
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
// the golden logits do not move, where q and p as one BF16 each would move
// them). A score is hd / 16 vdpbf16ps per key (hi and lo halves); the value
// sums take keys in pairs (V rows t and t + 1 interleaved in registers with
// vpunpck[lh]wd, once for all rows of a group), 4 hd / 32 vdpbf16ps per pair
// of keys and row. Against the f32 path this drops the widening of every
// block and half the loads.
//
// Rows are taken in groups of up to 3 of one context length for the scores
// (each K load feeds all of them) and of RV for the values, the rows left
// over as one group (a GQA group of 7 heads: scores 3 + 2 + 2, values 4 + 3;
// single rows' passes are bound by the latency of their few accumulator
// chains); the head's blocks are walked in order, K then V, and the first
// group prefetches kAttnPrefetchBytes ahead into L2 (the other rows find the
// blocks there). The softmax's exponentials go straight to BF16 hi / lo and
// the value sums are scaled by 1 / sum at the end.
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
  // in L2 (faster than walking the blocks once with every group on each).
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
// row path spends hd/16 FMAs per key and row plus horizontal sums. The
// softmax is per lane (max and sum run down t), and O^T[d][lane] = V_t[d]
// (broadcast) * P^T[t][lane] summed over t likewise. A tile costs hd FMAs
// per key whatever its row count, so fewer than kLaneMinRows rows (decode:
// one token's group of heads) take the row path.
constexpr int kLaneRows = 16;
constexpr int kLaneMinRows = 12;
constexpr int kMaxLaneTiles = 8;  // tiles per attention_lanes_t call (128 rows)

// LaneTile, lane_scores_store, lane_softmax and lane_values: attention_lanes.h.
using LaneTile = detail::LaneTile<Zmm>;
static_assert(LaneTile::kRows == kLaneRows);

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

constexpr int kLaneDims = 12;  // dimensions per lane_values pass: 24 accumulators

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
        lane_values_chunk<kLaneDims>(tl, pa, kc.wide, hd, nt, j0 == 0);
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

}  // namespace

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

}  // namespace rinfer::kernels::cpu::avx512
