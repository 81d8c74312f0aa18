// AVX2 attention over the paged KV cache (attention_rows, attention_head).
#include "kernels/cpu/common_avx2.h"
#include "kernels/cpu/attention_lanes.h"

namespace rinfer::kernels::cpu::avx2 {

namespace {

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
// heads is one tile too (faster in lanes than on the row path).
constexpr int kLaneRows = 8;
constexpr int kLaneMinRows = 6;  // a call, or a last tile, of fewer rows takes the row path
constexpr int kMaxLaneTiles = 16;  // tiles per attention_lanes_t call (128 rows)

// LaneTile, lane_scores_store, lane_softmax and lane_values: attention_lanes.h.
using LaneTile = detail::LaneTile<Ymm>;
static_assert(LaneTile::kRows == kLaneRows);

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
  lane_scores_store<KB>(tl, acc, j, scale, st);
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

constexpr int kLaneDims = 6;  // dimensions per lane_values pass: 12 accumulators

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
      lane_values_chunk<kLaneDims>(tl, st + ti * ld_s + j0 * kLaneRows, wide, hd, imin(chunk, tl.n_max - j0), j0 == 0);
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

}  // namespace rinfer::kernels::cpu::avx2
