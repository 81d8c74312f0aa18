#pragma once
// Internal to kernels/cpu, for the SIMD files: the int8 prefill GEMM
// (W8A8 / W4A8) on ymm registers, around a micro kernel that each file
// brings: qgemm_avxvnni.cpp (vpdpbusd, AVX-VNNI) and qgemm_avx2.cpp
// (vpmaddubsw, plain AVX2, one for Q4 and one for Q8, whose integer dot is
// sum q x directly; see there). The arithmetic is the AVX-512 VNNI
// GEMM's (qgemm_avx512.cpp), in the same order, so the results are its
// bits: x quantized per row (quantize_row_i8), weights as stored (u8: Q8 +
// 128, Q4 + 8, the 16-row VNNI lines of the packed layout), per group an
// int32 dot product started at comp = -offset * sum(x of the group),
// converted to f32 and multiplied by the group's 16 scales into f32 sums
// (one FMA per group), then times the row's activation scale onto the bias
// or the partial y of the previous k-block.
//
// Internal linkage on purpose (an anonymous namespace in a header): each
// SIMD-flagged file instantiates its own copy with its own -m flags (the ODR
// rule in impl.h).
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/impl.h"
#include "kernels/cpu/owned_ranges.h"
#include "kernels/cpu/quant_layout.h"

namespace rinfer::kernels::cpu::detail {
namespace {

inline int64_t qymm_imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t qymm_imax(int64_t a, int64_t b) { return a > b ? a : b; }

constexpr int64_t kQYmmKC = 8192;     // k-block, as the AVX-512 GEMM (the same bits need the same k-blocks)
constexpr int64_t kQYmmNBlocks = 8;  // 16-row blocks per task at most (128 rows)

// A micro tile: MR x rows (x packed [k4][MR]) by one 16-row weight block.
// C[MR rows][16 cols, the first ncols stored] (+)= sx[i] * sum over the
// groups of s_g * (int dot of the group); w: the block's VNNI lines, 64
// bytes per 4 k (rows 0-7, then 8-15); sp: 16 f32 scales per group.
using QYmmMicroFn = void (*)(const int32_t* xp, const int32_t* comp, const uint8_t* w, const float* sp,
                             int64_t n_groups, const float* sx, float* c, int64_t ldc, int64_t ncols, bool first,
                             const float* bias);

// A SIMD file's micro kernel instances: Micro<MR, GK4>::run (a QYmmMicroFn)
// for MR = 1 .. MaxMR rows and GK4 = group size / 4 (8, 16, 32: constants,
// so that the k loop unrolls). qymm_gemm_multi's Kernel. SignedQ8: Q8
// weights reach the micro kernel as pairs of lines, q = u - 128 (s8) and |q|
// (u8), 128 bytes per 4 k (vpmaddubsw's operands; qgemm_avx2.cpp).
template <template <int, int> class Micro, int MaxMR, bool SignedQ8 = false>
struct QYmmKernel {
  static_assert(MaxMR >= 1 && MaxMR <= 6);
  static constexpr int kMR = MaxMR;
  static constexpr bool kSignedQ8 = SignedQ8;
  template <int N>
  static constexpr int rows = N < MaxMR ? N : MaxMR;
  template <int GK4>
  static QYmmMicroFn for_rows(int64_t mr) {
    switch (mr) {
      case 1: return &Micro<rows<1>, GK4>::run;
      case 2: return &Micro<rows<2>, GK4>::run;
      case 3: return &Micro<rows<3>, GK4>::run;
      case 4: return &Micro<rows<4>, GK4>::run;
      case 5: return &Micro<rows<5>, GK4>::run;
      default: return &Micro<rows<6>, GK4>::run;
    }
  }
  static QYmmMicroFn micro_for(int64_t mr, int64_t gs) {
    switch (gs) {
      case 32: return for_rows<8>(mr);
      case 64: return for_rows<16>(mr);
      default: return for_rows<32>(mr);
    }
  }
};

struct QYmmCtx {
  const QMatmulArgs* a;
  int mr;         // x rows per micro tile (the kernel's)
  int32_t* xp;    // [m-tile][K/4][mr] quads of quantized x
  int32_t* comp;  // [m-tile][G][mr] -offset * sum over the group of quantized x
  float* sx;      // [n_mt * mr] activation scales
  int64_t n_mt, n_blocks, n_kb, kc;
  int64_t blocks_per_task, n_ntasks, mt_per_task, n_tasks;
};

// Quantize the m-tile's rows (rows past M are zero) and interleave their
// quads: xp[k4][i] = bytes 4 k4 .. 4 k4 + 3 of row i.
void qymm_pack_x_task(void* p, int64_t mt, int) {
  const auto& c = *static_cast<const QYmmCtx*>(p);
  const QMatmulArgs& a = *c.a;
  const int mr = c.mr;
  const int64_t K = a.K, K4 = K / 4, gs = a.w->group_size, G = K / gs;
  const int off = a.w->type == QuantType::Q8 ? 128 : 8;
  auto* rows = reinterpret_cast<int8_t*>(scratch(kScratchTmp, (mr * K + 3) / 4));
  int32_t* xp = c.xp + mt * K4 * mr;
  int32_t* comp = c.comp + mt * G * mr;
  for (int i = 0; i < mr; ++i) {
    const int64_t m = mt * mr + i;
    int8_t* row = rows + i * K;
    if (m < a.M) {
      avx2::quantize_row_i8(a.x + m * a.ldx, K, row, c.sx + m);
    } else {
      memset(row, 0, size_t(K));
      c.sx[m] = 0.0f;
    }
    for (int64_t g = 0; g < G; ++g) {
      int32_t s = 0;
      for (int64_t k = g * gs; k < (g + 1) * gs; ++k) s += row[k];
      comp[g * mr + i] = -off * s;
    }
  }
  for (int64_t k4 = 0; k4 < K4; ++k4)
    for (int i = 0; i < mr; ++i) memcpy(xp + k4 * mr + i, rows + i * K + 4 * k4, 4);
}

// Columns [0, n) of 8 as a maskload / maskstore mask.
inline __m256i qymm_col_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The end of a group in a micro kernel: accf[i] += float(acc[i]) * the
// group's 16 scales s16 (one FMA per 8 outputs).
template <int MR>
inline void qymm_add_group(const __m256i (&acc)[MR][2], const float* s16, float (&accf)[MR][16]) {
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    const __m256 sv = _mm256_load_ps(s16 + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
      _mm256_store_ps(accf[i] + 8 * v,
                      _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][v]), sv, _mm256_load_ps(accf[i] + 8 * v)));
  }
}

// The micro kernels' epilogue: row i of C (+)= accf[i] * sx[i], onto the
// bias (first k-block) or C's partial sums; columns past ncols untouched.
template <int MR>
inline void qymm_store(const float (*accf)[16], const float* sx, float* c, int64_t ldc, int64_t ncols, bool first,
                       const float* bias) {
  const __m256i m0 = qymm_col_mask(ncols), m1 = qymm_col_mask(ncols - 8);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m256 s = _mm256_set1_ps(sx[i]);
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const __m256i m = v ? m1 : m0;
      const __m256 base = first ? (bias ? _mm256_maskload_ps(bias + 8 * v, m) : _mm256_setzero_ps())
                                : _mm256_maskload_ps(row + 8 * v, m);
      _mm256_maskstore_ps(row + 8 * v, m, _mm256_fmadd_ps(_mm256_load_ps(accf[i] + 8 * v), s, base));
    }
  }
}

// The 16 scales of one group at p (QuantAddr::group_scales) as f32.
inline void qymm_load_scales16(const uint8_t* p, DType scale_dtype, float* out) {
  if (scale_dtype == DType::F16) {
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    _mm256_store_ps(out + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))));
  } else {
    memcpy(out, p, 16 * sizeof(float));
  }
}

// One task: the blocks [bb0, bb1) of the weight against the m-tiles [mt0,
// mt1), k-block by k-block; each block's k-block (Q4 unpacked to u8 lines)
// and scales are prepared once for all the m-tiles.
template <class Kernel>
void qymm_gemm_task(void* p, int64_t task, int) {
  const auto& c = *static_cast<const QYmmCtx*>(p);
  const int mr_tile = c.mr;
  const QMatmulArgs& a = *c.a;
  const QuantizedWeight& w = *a.w;
  const bool q4 = w.type == QuantType::Q4;
  const int64_t nt = task % c.n_ntasks, mc = task / c.n_ntasks;
  const int64_t bb0 = nt * c.blocks_per_task, bb1 = qymm_imin(c.n_blocks, bb0 + c.blocks_per_task);
  const int64_t mt0 = mc * c.mt_per_task, mt1 = qymm_imin(c.n_mt, mt0 + c.mt_per_task);
  if (bb0 >= bb1 || mt0 >= mt1) return;
  const int64_t K = a.K, K4 = K / 4, gs = w.group_size, G = K / gs;
  // Q4 unpacked: [kc / 4][64] bytes (4 kc floats; signed Q8 [kc / 4][128],
  // 8 kc floats); scales [kc / gs][16] f32.
  float* buf = scratch(kScratchPanel, (Kernel::kSignedQ8 ? 8 : 4) * c.kc + (c.kc / 32) * 16);
  auto* unpacked = reinterpret_cast<uint8_t*>(buf);
  float* sp = buf + (Kernel::kSignedQ8 ? 8 : 4) * c.kc;
  const __m256i low4 = _mm256_set1_epi8(15);
  const QuantAddr qa = quant_addr(w);
  for (int64_t kb = 0; kb < c.n_kb; ++kb) {
    const int64_t k0 = kb * c.kc, kcl = qymm_imin(c.kc, K - k0), ng = kcl / gs;
    const QYmmMicroFn full = Kernel::micro_for(mr_tile, gs);
    for (int64_t b = bb0; b < bb1; ++b) {
      for (int64_t g = 0; g < ng; ++g) qymm_load_scales16(qa.group_scales(b, k0 / gs + g), w.scale_dtype, sp + g * 16);
      const uint8_t* wp;
      if (!q4 && Kernel::kSignedQ8) {
        // Each VNNI line as q = u ^ 0x80 (s8) then |q|, once for all m-tiles.
        const __m256i flip = _mm256_set1_epi8(char(0x80));
        for (int64_t g = 0; g < ng; ++g) {
          const uint8_t* src = qa.group_data(b, k0 / gs + g);
          uint8_t* dst = unpacked + g * (gs / 4) * 128;
          for (int64_t j = 0; j < gs / 4; ++j)
            for (int h = 0; h < 2; ++h) {
              const __m256i q =
                  _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j * 64 + 32 * h)), flip);
              _mm256_store_si256(reinterpret_cast<__m256i*>(dst + j * 128 + 32 * h), q);
              _mm256_store_si256(reinterpret_cast<__m256i*>(dst + j * 128 + 64 + 32 * h), _mm256_abs_epi8(q));
            }
        }
        wp = unpacked;
      } else if (!q4 && !w.interleaved) {
        wp = qa.group_data(b, k0 / gs);  // the k-block's lines are contiguous: read in place
      } else if (!q4) {
        // Interleaved Q8: the k-block's groups gathered into one run of lines.
        for (int64_t g = 0; g < ng; ++g)
          memcpy(unpacked + g * (gs / 4) * 64, qa.group_data(b, k0 / gs + g), size_t(gs / 4) * 64);
        wp = unpacked;
      } else {
        // A packed line of 8 k holds two VNNI lines: the low nibbles (k
        // quad 2j) and the high ones (2j + 1).
        for (int64_t g = 0; g < ng; ++g) {
          const uint8_t* src = qa.group_data(b, k0 / gs + g);
          uint8_t* dst = unpacked + g * (gs / 4) * 64;
          for (int64_t j = 0; j < gs / 8; ++j)
            for (int h = 0; h < 2; ++h) {
              const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j * 64 + 32 * h));
              _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 2 * j * 64 + 32 * h), _mm256_and_si256(l, low4));
              _mm256_store_si256(reinterpret_cast<__m256i*>(dst + (2 * j + 1) * 64 + 32 * h),
                                 _mm256_and_si256(_mm256_srli_epi16(l, 4), low4));
            }
        }
        wp = unpacked;
      }
      const int64_t n0 = 16 * b, ncols = qymm_imin(16, w.N - n0);
      const float* bias = a.bias ? a.bias + n0 : nullptr;
      for (int64_t mt = mt0; mt < mt1; ++mt) {
        const int64_t m0 = mt * mr_tile, mr = qymm_imin(mr_tile, a.M - m0);
        const QYmmMicroFn fn = mr == mr_tile ? full : Kernel::micro_for(mr, gs);
        fn(c.xp + (mt * K4 + k0 / 4) * mr_tile, c.comp + (mt * G + k0 / gs) * mr_tile, wp, sp, ng, c.sx + m0,
           a.y + m0 * a.ldy + n0, a.ldy, ncols, kb == 0, bias);
      }
    }
  }
}

// The block x m-tile task grid of one matrix (c.a, c.n_mt set): about two
// tasks per thread, M split as well where the blocks alone leave a thread
// idle at the end (as the AVX-512 GEMM's qgemm_partition).
void qymm_partition(QYmmCtx& c, int64_t T) {
  c.n_blocks = (c.a->w->N + 15) / 16;
  const int64_t per_task = (c.n_blocks + 2 * T - 1) / (2 * T);
  c.blocks_per_task = qymm_imin(kQYmmNBlocks, qymm_imax(1, per_task));
  c.n_ntasks = (c.n_blocks + c.blocks_per_task - 1) / c.blocks_per_task;
  int64_t m_chunks = c.n_ntasks >= 2 * T ? 1 : qymm_imin(c.n_mt, (2 * T + c.n_ntasks - 1) / c.n_ntasks);
  if (T > 1 && (c.n_ntasks * m_chunks) % T != 0 && c.n_ntasks * m_chunks < 8 * T) m_chunks *= T;
  m_chunks = qymm_imin(m_chunks, c.n_mt);
  c.mt_per_task = (c.n_mt + m_chunks - 1) / m_chunks;
  c.n_tasks = c.n_ntasks * ((c.n_mt + c.mt_per_task - 1) / c.mt_per_task);
}

// Several matrices of one x: every matrix's tasks in one pool job.
template <class Kernel>
struct QYmmMulti {
  QYmmCtx ctx[kMatmulQMultiMax];
  int64_t first_task[kMatmulQMultiMax + 1] = {0};
  static void task(void* p, int64_t t, int thread) {
    auto& m = *static_cast<QYmmMulti*>(p);
    const int i = part_of(m.first_task, t);
    qymm_gemm_task<Kernel>(&m.ctx[i], t - m.first_task[i], thread);
  }
};

// as[0 .. n): one x (x, M, K, ldx of as[0]), weights of one type and group
// size: x packed once (a pool job over the m-tiles), then every matrix's
// block x m-tile tasks as one pool job. Kernel: a QYmmKernel.
template <class Kernel>
void qymm_gemm_multi(const QMatmulArgs* as, int n, const Runner& runner) {
  const QMatmulArgs& a0 = as[0];
  QYmmCtx c{};
  c.a = &a0;
  c.mr = Kernel::kMR;
  c.n_mt = (a0.M + c.mr - 1) / c.mr;
  c.kc = qymm_imin(kQYmmKC, a0.K);
  c.n_kb = (a0.K + c.kc - 1) / c.kc;
  const int64_t K4 = a0.K / 4, G = a0.K / a0.w->group_size;
  float* buf = scratch(kScratchShared, c.n_mt * c.mr * (K4 + G + 1));
  c.xp = reinterpret_cast<int32_t*>(buf);
  c.comp = c.xp + c.n_mt * K4 * c.mr;
  c.sx = reinterpret_cast<float*>(c.comp + c.n_mt * G * c.mr);
  const int64_t T = runner.n_threads;
  QYmmMulti<Kernel> job;
  for (int i = 0; i < n; ++i) {
    job.ctx[i] = c;
    job.ctx[i].a = &as[i];
    qymm_partition(job.ctx[i], T);
    job.first_task[i + 1] = job.first_task[i] + job.ctx[i].n_tasks;
  }
  if (T == 1) {
    for (int64_t mt = 0; mt < c.n_mt; ++mt) qymm_pack_x_task(&c, mt, 0);
    for (int64_t t = 0; t < job.first_task[n]; ++t) QYmmMulti<Kernel>::task(&job, t, 0);
    return;
  }
  runner.run(runner.pool, c.n_mt, &qymm_pack_x_task, &c);
  runner.run(runner.pool, job.first_task[n], &QYmmMulti<Kernel>::task, &job);
}

}  // namespace
}  // namespace rinfer::kernels::cpu::detail
