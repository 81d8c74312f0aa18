// AVX2 prefill GEMM (more than kGemvMaxM x rows) on F32 / F16 / BF16
// weights, and on Q8 / Q4 weights dequantized into its f32 slivers; the
// matmul entry point.
#include "kernels/cpu/common_avx2.h"

namespace rinfer::kernels::cpu::avx2 {

namespace {

constexpr int kMR = 6;         // GEMM tile: kMR x-rows by 16 W-rows
constexpr int64_t kKC = 256;   // GEMM k-block; a W sliver is kKC * 16 * 4 bytes
constexpr int64_t kNB = 128;   // GEMM W rows per task (multiple of 16)
// Few m-tiles: whole rows per k-block so packing reads W sequentially (see AVX-512).
constexpr int64_t kSmallMTiles = 4;
constexpr int64_t kKCSmallM = 4096;
constexpr int64_t kNBSmallM = 32;

// ---------------------------------------------------------------- prefill GEMM
// BLIS-style, as in gemm_avx512.cpp: C[6 x 16] += xpanel[k][6] (broadcast)
// * wpanel[k][16] (two ymm); 12 accumulators + 2 W + 1 broadcast registers.
template <int MR>
void gemm_micro(const float* xp, const float* wp, int64_t kcl, float* c, int64_t ldc, int64_t ncols, bool first,
                const float* bias) {
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kcl; ++k) {
    const __m256 w0 = _mm256_load_ps(wp + 16 * k), w1 = _mm256_load_ps(wp + 16 * k + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 b = _mm256_broadcast_ss(xp + k * kMR + i);
      acc0[i] = _mm256_fmadd_ps(b, w0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(b, w1, acc1[i]);
    }
  }
  alignas(32) float tmp[16];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    if (ncols == 16) {
      __m256 s0 = first ? (bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps()) : _mm256_loadu_ps(row);
      __m256 s1 = first ? (bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps()) : _mm256_loadu_ps(row + 8);
      _mm256_storeu_ps(row, _mm256_add_ps(s0, acc0[i]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(s1, acc1[i]));
    } else {
      _mm256_store_ps(tmp, acc0[i]);
      _mm256_store_ps(tmp + 8, acc1[i]);
      for (int64_t j = 0; j < ncols; ++j) row[j] = (first ? (bias ? bias[j] : 0.0f) : row[j]) + tmp[j];
    }
  }
}

using MicroFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool, const float*);
static_assert(kMR == 6);
MicroFn micro_for_rows(int64_t mr) {
  switch (mr) {
    case 1: return &gemm_micro<1>;
    case 2: return &gemm_micro<2>;
    case 3: return &gemm_micro<3>;
    case 4: return &gemm_micro<4>;
    case 5: return &gemm_micro<5>;
    default: return &gemm_micro<6>;
  }
}

// dst[k][16] (k < kcl) = W[n0 + j, k0 + k] as f32 for j < 16, zero for rows >= nrows.
template <DType T>
void pack_w_sliver(const typename Ld<T>::E* w, int64_t K, int64_t n0, int64_t nrows, int64_t k0, int64_t kcl,
                   float* dst) {
  for (int64_t kk = 0; kk < kcl; kk += 8) {
    const int64_t kn = imin(8, kcl - kk);
    for (int half = 0; half < 2; ++half) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) {
        const int64_t row = half * 8 + j;
        const typename Ld<T>::E* src = w + (n0 + row) * K + k0 + kk;
        r[j] = row >= nrows ? _mm256_setzero_ps() : kn == 8 ? Ld<T>::load(src) : load_partial<T>(src, kn);
      }
      transpose8(r);
      float* d = dst + kk * 16 + half * 8;
      for (int64_t c = 0; c < kn; ++c) _mm256_store_ps(d + c * 16, r[c]);
    }
  }
}

struct GemmCtx {
  const MatmulArgs* a;
  float* xp;  // packed x: [m-tile][k-block][kc][kMR]
  int64_t kc;
  int64_t n_kb, n_mt;
  int64_t nb;
  int64_t n_ntasks, mt_per_task;
};

void gemm_pack_x_task(void* p, int64_t mt, int) {
  const auto& c = *static_cast<const GemmCtx*>(p);
  const MatmulArgs& a = *c.a;
  const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    float* dst = c.xp + (mt * c.n_kb + kb) * c.kc * kMR;
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t i = 0; i < mr; ++i) {
      const float* src = a.x + (m0 + i) * a.ldx + k0;
      for (int64_t k = 0; k < kcl; ++k) dst[k * kMR + i] = src[k];
    }
  }
}

template <DType T>
void gemm_block(const GemmCtx& c, int64_t n0, int64_t n1, int64_t mt0, int64_t mt1) {
  const MatmulArgs& a = *c.a;
  const auto* w = static_cast<const typename Ld<T>::E*>(a.w);
  const int64_t nrows = n1 - n0, n_sl = (nrows + 15) / 16;
  float* panel = detail::scratch(detail::kScratchPanel, n_sl * c.kc * 16);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t s = 0; s < n_sl; ++s)
      pack_w_sliver<T>(w, a.K, n0 + 16 * s, imin(16, nrows - 16 * s), k0, kcl, panel + s * c.kc * 16);
    for (int64_t s = 0; s < n_sl; ++s) {
      const int64_t ncols = imin(16, nrows - 16 * s), nn = n0 + 16 * s;
      const float* wp = panel + s * c.kc * 16;
      const float* bias = a.bias ? a.bias + nn : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
        micro_for_rows(mr)(c.xp + (mt * c.n_kb + kb) * c.kc * kMR, wp, kcl, a.y + m0 * a.ldy + nn, a.ldy, ncols,
                           kb == 0, bias);
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

// The GEMM's blocking and task grid for c.a (c.a set; x's panel in the
// calling thread's shared scratch); returns the number of tasks.
int64_t gemm_plan(GemmCtx& c, int64_t T) {
  const MatmulArgs& a = *c.a;
  c.n_mt = (a.M + kMR - 1) / kMR;
  const bool small_m = c.n_mt <= kSmallMTiles;
  c.kc = small_m ? imin(kKCSmallM, a.K) : kKC;  // dequantized: multiples of 8 (K is a multiple of the group size)
  c.n_kb = (a.K + c.kc - 1) / c.kc;
  c.xp = detail::scratch(detail::kScratchShared, c.n_mt * c.n_kb * c.kc * kMR);
  c.nb = imin(small_m ? kNBSmallM : kNB, imax(16, round_up((a.N + 2 * T - 1) / (2 * T), 16)));
  c.n_ntasks = (a.N + c.nb - 1) / c.nb;
  int64_t m_chunks = c.n_ntasks >= 2 * T ? 1 : imin(c.n_mt, (2 * T + c.n_ntasks - 1) / c.n_ntasks);
  c.mt_per_task = (c.n_mt + m_chunks - 1) / m_chunks;
  m_chunks = (c.n_mt + c.mt_per_task - 1) / c.mt_per_task;
  return c.n_ntasks * m_chunks;
}

// Pack x (one task per m-tile), then run n_tasks of task on ctx: two pool
// jobs, or inline on one thread.
void gemm_run(GemmCtx& c, int64_t n_tasks, detail::TaskFn task, void* ctx, const Runner& runner) {
  if (runner.n_threads == 1) {
    for (int64_t mt = 0; mt < c.n_mt; ++mt) gemm_pack_x_task(&c, mt, 0);
    for (int64_t t = 0; t < n_tasks; ++t) task(ctx, t, 0);
    return;
  }
  runner.run(runner.pool, c.n_mt, &gemm_pack_x_task, &c);
  runner.run(runner.pool, n_tasks, task, ctx);
}

void gemm(const MatmulArgs& a, const Runner& runner) {
  GemmCtx c{};
  c.a = &a;
  gemm_run(c, gemm_plan(c, runner.n_threads), &gemm_task, &c, runner);
}

// ---------------------------------------------------------------- prefill GEMM, Q8 / Q4 dequantized
// Where no int8 GEMM runs (Q8 without AVX-VNNI: vpmaddubsw saturates for
// u8 x s8 Q8 products), each task dequantizes its W rows into the f32
// [k][16] slivers of the f32 GEMM above (scale and zero point applied once
// per weight) and reuses its micro-kernel.

// dst[k][16] (k < kcl) = dequantized W[16 b + j, k0 + k]; k0, kcl multiples of 8.
void pack_q_sliver(const QuantizedWeight& w, int64_t b, int64_t k0, int64_t kcl, float* dst) {
  const int64_t gs = w.group_size;
  const bool q4 = w.type == QuantType::Q4;
  const QuantAddr qa = quant_addr(w);
  const __m256 off = _mm256_set1_ps(q4 ? 8.0f : 128.0f);
  const __m256i m8 = _mm256_set1_epi32(q4 ? 15 : 255);
  for (int h = 0; h < 2; ++h) {
    __m256 s8 = _mm256_setzero_ps();
    int64_t cur_g = -1;
    const uint8_t* gd = nullptr;  // the data of group cur_g
    for (int64_t k = k0; k < k0 + kcl; k += q4 ? 8 : 4) {
      if (k / gs != cur_g) {
        cur_g = k / gs;
        s8 = load_scales8(qa.group_scales(b, cur_g) + h * half_scale_bytes(w), w.scale_dtype);
        gd = qa.group_data(b, cur_g);
      }
      const int64_t kg = k - cur_g * gs;  // k inside the group
      const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gd + (q4 ? kg / 8 : kg / 4) * 64 + 32 * h));
      float* o = dst + (k - k0) * 16 + 8 * h;
#pragma GCC unroll 4
      for (int kk = 0; kk < 4; ++kk) {
        const __m256i u = _mm256_and_si256(_mm256_srli_epi32(d, 8 * kk), m8);
        _mm256_store_ps(o + kk * 16, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(u), off), s8));
        if (q4) {
          const __m256i u2 = _mm256_and_si256(_mm256_srli_epi32(d, 8 * kk + 4), m8);
          _mm256_store_ps(o + (kk + 4) * 16, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(u2), off), s8));
        }
      }
    }
  }
}

struct QGemmCtx {
  GemmCtx g;               // x packing and tiling of the f32 GEMM (g.a: x, M, K, ldx, y, ldy, bias)
  const QuantizedWeight* w;
};

void qgemm_task(void* p, int64_t task, int) {
  const auto& qc = *static_cast<const QGemmCtx*>(p);
  const GemmCtx& c = qc.g;
  const MatmulArgs& a = *c.a;
  const int64_t nt = task % c.n_ntasks, mc = task / c.n_ntasks;
  const int64_t n0 = nt * c.nb, n1 = imin(a.N, n0 + c.nb);
  const int64_t mt0 = mc * c.mt_per_task, mt1 = imin(c.n_mt, mt0 + c.mt_per_task);
  if (n0 >= n1 || mt0 >= mt1) return;
  const int64_t nrows = n1 - n0, n_sl = (nrows + 15) / 16;
  float* panel = detail::scratch(detail::kScratchPanel, n_sl * c.kc * 16);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = imin(c.kc, a.K - k0);
    for (int64_t s = 0; s < n_sl; ++s) pack_q_sliver(*qc.w, (n0 + 16 * s) / 16, k0, kcl, panel + s * c.kc * 16);
    for (int64_t s = 0; s < n_sl; ++s) {
      const int64_t ncols = imin(16, nrows - 16 * s), nn = n0 + 16 * s;
      const float* wp = panel + s * c.kc * 16;
      const float* bias = a.bias ? a.bias + nn : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * kMR, mr = imin(kMR, a.M - m0);
        micro_for_rows(mr)(c.xp + (mt * c.n_kb + kb) * c.kc * kMR, wp, kcl, a.y + m0 * a.ldy + nn, a.ldy, ncols,
                           kb == 0, bias);
      }
    }
  }
}

}  // namespace

void matmul(const MatmulArgs& a, const Runner& runner) {
  if (a.M <= kGemvMaxM)
    gemv(a, runner);
  else
    gemm(a, runner);
}

void matmul_q_gemm(const QMatmulArgs& qa, const Runner& runner) {
  const MatmulArgs a{qa.x, qa.M, qa.K, qa.ldx, nullptr, DType::F32, qa.w->N, qa.bias, qa.y, qa.ldy};
  QGemmCtx qc{};
  qc.w = qa.w;
  qc.g.a = &a;
  gemm_run(qc.g, gemm_plan(qc.g, runner.n_threads), &qgemm_task, &qc, runner);
}

}  // namespace rinfer::kernels::cpu::avx2
