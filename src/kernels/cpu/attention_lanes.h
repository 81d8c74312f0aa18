#pragma once
// Internal to kernels/cpu, for the SIMD files: the parts of attention_rows'
// rows in lanes (one row per vector lane; attention_avx2.cpp and
// attention_avx512.cpp say how a tile is walked) that the AVX2 and AVX-512
// levels share, written once over a vector-traits type V: Ymm
// (common_avx2.h, 8 lanes) or Zmm (common_avx512.h, 16 lanes). V supplies
// F (the f32 vector), D (the f64 vector of half as many lanes), kLanes and
// one-instruction operations, so each level compiles to the code it had
// when these were written per level, with the same operations in the same
// order per lane (the same bits).
//
// Internal linkage on purpose (an anonymous namespace in a header), as
// qgemm_ymm.h: each SIMD-flagged file gets its own copy (impl.h).
#include <math.h>
#include <stdint.h>

namespace rinfer::kernels::cpu::detail {
namespace {

// One tile: Q^T [hd][kRows] and O^T [hd][kRows] in the lanes scratch, and per
// lane the row's n_ctx (as a float: exact below 2^24), ALiBi slope, running
// max of its scores and 1 / sum of their exponentials.
template <class V>
struct LaneTile {
  static constexpr int kRows = V::kLanes;
  float* qt;
  float* ot;
  alignas(sizeof(typename V::F)) float n_ctx[kRows];
  alignas(sizeof(typename V::F)) float slope[kRows];
  alignas(sizeof(typename V::F)) float max[kRows];
  alignas(sizeof(typename V::F)) float inv[kRows];
  int64_t n_max;  // the tile's longest context
  int n_rows;
  static int64_t floats(int hd) { return 2 * int64_t(hd) * kRows; }
};

// The scores' epilogue: dot[i] (q . K of key j + i per lane) scaled, the
// ALiBi term added (slope * (j + i - (n_ctx - 1))), positions >= n_ctx set
// to -inf; stored st[i][lane], the running max updated.
template <int KB, class V>
inline void lane_scores_store(LaneTile<V>& tl, const typename V::F* dot, int64_t j, float scale, float* st) {
  using F = typename V::F;
  constexpr int R = V::kLanes;
  const F n_ctx = V::load(tl.n_ctx), slope = V::load(tl.slope), vscale = V::set1(scale);
  const F last = V::sub(n_ctx, V::set1(1.0f)), ninf = V::set1(-INFINITY);
  F mx = V::load(tl.max);
#pragma GCC unroll 12
  for (int i = 0; i < KB; ++i) {
    const F pos = V::set1(float(j + i));
    F s = V::fmadd(dot[i], vscale, V::mul(slope, V::sub(pos, last)));
    s = V::lt_select(pos, n_ctx, s, ninf);
    V::store(st + i * R, s);
    mx = V::max(mx, s);
  }
  V::store(tl.max, mx);
}

// st[t][lane] = exp(st - max) for t < n_max (0 where the score is -inf),
// and inv = 1 / sum over t (summed in double like softmax; 0 for a lane
// with no positions).
template <class V>
void lane_softmax(LaneTile<V>& tl, float* st) {
  using F = typename V::F;
  using D = typename V::D;
  constexpr int R = V::kLanes;
  const F ninf = V::set1(-INFINITY);
  F mx = V::load(tl.max);
  mx = V::zero_where_eq(mx, ninf);
  D s0 = V::zero_pd(), s1 = V::zero_pd();
  for (int64_t t = 0; t < tl.n_max; ++t) {
    const F s = V::load(st + t * R);
    const F e = V::keep_where_neq(s, ninf, V::exp(V::sub(s, mx)));
    V::store(st + t * R, e);
    V::add_halves_pd(s0, s1, e);
  }
  alignas(sizeof(F)) double sum[R];
  V::store_pd(sum, s0);
  V::store_pd(sum + R / 2, s1);
  for (int l = 0; l < R; ++l) tl.inv[l] = sum[l] > 0 ? float(1.0 / sum[l]) : 0.0f;
}

// O^T[d][lane] (+)= sum_{i < nt} P^T[i][lane] * V_i[d] for d in [d0, d0 + DB):
// two chains (even and odd keys), 2 DB accumulators.
template <int DB, class V>
inline void lane_values(const LaneTile<V>& tl, const float* pt, const float* v, int hd, int64_t nt, int d0,
                        bool first) {
  using F = typename V::F;
  constexpr int R = V::kLanes;
  F a0[DB], a1[DB];
#pragma GCC unroll 12
  for (int e = 0; e < DB; ++e) {
    a0[e] = first ? V::zero() : V::load(tl.ot + (d0 + e) * R);
    a1[e] = V::zero();
  }
  const float* vp = v + d0;
  int64_t i = 0;
  for (; i + 2 <= nt; i += 2, vp += 2 * hd) {
    const F p0 = V::load(pt + i * R), p1 = V::load(pt + (i + 1) * R);
#pragma GCC unroll 12
    for (int e = 0; e < DB; ++e) {
      a0[e] = V::fmadd(V::bcast(vp + e), p0, a0[e]);
      a1[e] = V::fmadd(V::bcast(vp + hd + e), p1, a1[e]);
    }
  }
  if (i < nt) {
    const F p0 = V::load(pt + i * R);
#pragma GCC unroll 12
    for (int e = 0; e < DB; ++e) a0[e] = V::fmadd(V::bcast(vp + e), p0, a0[e]);
  }
#pragma GCC unroll 12
  for (int e = 0; e < DB; ++e) V::store(tl.ot + (d0 + e) * R, V::add(a0[e], a1[e]));
}

// lane_values over the last rem (< Dims) dimensions from d0, as one pass.
template <int N, int Dims, class V>
inline void lane_values_rest(int rem, const LaneTile<V>& tl, const float* pt, const float* v, int hd, int64_t nt,
                             int d0, bool first) {
  if constexpr (N < Dims) {
    if (rem == N) return lane_values<N>(tl, pt, v, hd, nt, d0, first);
    lane_values_rest<N + 1, Dims>(rem, tl, pt, v, hd, nt, d0, first);
  }
}

// O^T of the tile over all hd dimensions, Dims per lane_values pass.
template <int Dims, class V>
void lane_values_chunk(const LaneTile<V>& tl, const float* pt, const float* v, int hd, int64_t nt, bool first) {
  int d0 = 0;
  for (; d0 + Dims <= hd; d0 += Dims) lane_values<Dims>(tl, pt, v, hd, nt, d0, first);
  lane_values_rest<1, Dims>(hd - d0, tl, pt, v, hd, nt, d0, first);
}

}  // namespace
}  // namespace rinfer::kernels::cpu::detail
