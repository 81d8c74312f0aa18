#pragma once
// Internal to kernels/cpu: the per-ISA entry points dispatch.cpp chooses
// between. The *_avx2.cpp / *_avx512.cpp files are compiled with their own -m
// flags, so only plain functions and POD structs cross this boundary: no
// inline function, template or std:: type whose code could be emitted by a
// SIMD-flagged file and then picked by the linker for scalar callers (ODR).
// SIMD files therefore keep all their helpers in anonymous namespaces and use
// only intrinsics and C library calls.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu::detail {

// Run tasks on the caller's ThreadPool without going through std::function in
// a SIMD file: run(pool, n, fn, ctx) calls fn(ctx, task, thread) for every task
// in [0, n) and returns when all are done (implemented in dispatch.cpp).
using TaskFn = void (*)(void* ctx, int64_t task, int thread);
// Blocked BF16 weights: up to this many x rows (batched decode) take the
// small-M dot kernel on the layout as stored (avx512), above it the packed GEMM.
constexpr int64_t kBlockedDotMaxM = 64;

struct Runner {
  void* pool = nullptr;
  int n_threads = 1;
  void (*run)(void* pool, int64_t n_tasks, TaskFn fn, void* ctx) = nullptr;
};

// matmul (ops.h) on the calling thread alone, with x kept in f32 whatever
// the BF16 GEMM setting, and not counted in matmul_macs: attention scores
// against cache rows (the rows as the matrix), which are not a weight pass.
void matmul_f32_x(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N, float* y,
                  int64_t ldy);

// Grow-only, 64-byte aligned scratch owned by the calling thread, at least n
// floats; slot selects one of a few independent buffers. Never freed until the
// thread exits, so hot paths allocate only the first time a size is seen.
float* scratch(int slot, int64_t n);
enum ScratchSlot : int {
  kScratchShared = 0,
  kScratchPanel = 1,
  kScratchTmp = 2,
  kScratchAttnScores = 3,  // attention_rows: [row][n_ctx] scores
  kScratchAttnBlock = 4,   // attention_rows: one K or V cache block widened to f32
  kScratchAttnLanes = 5,   // attention_rows, rows in lanes: Q^T, O^T and statistics per tile
  kScratchCount = 6
};

struct MatmulArgs {
  const float* x;
  int64_t M, K, ldx;
  const void* w;
  DType wdt;  // F32, F16 or BF16
  int64_t N;
  const float* bias;
  float* y;
  int64_t ldy;
  bool bf16_dot = false;      // BF16 weights, GEMM regime: x rounded to BF16, vdpbf16ps (see Bf16Gemm in ops.h)
  bool bf16_blocked = false;  // BF16 weights in the blocked layout (matmul_bf16_blocked in ops.h)
};

// Quantized matmul (see matmul_q in ops.h): w->N rows, packed layout.
struct QMatmulArgs {
  const float* x;
  int64_t M, K, ldx;
  const QuantizedWeight* w;
  const float* bias;
  float* y;
  int64_t ldy;
};

}  // namespace rinfer::kernels::cpu::detail
namespace rinfer::kernels::cpu::reference {
void dequantize_rows(const QuantizedWeight& w, float* out);
}  // namespace rinfer::kernels::cpu::reference

// The same set of entry points for each SIMD level.
#define RINFER_DECLARE_ISA_KERNELS(ns)                                                              \
  namespace rinfer::kernels::cpu::ns {                                                              \
  void matmul(const detail::MatmulArgs& a, const detail::Runner& runner);                           \
  void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y);                \
  void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs,           \
                        RopeStyle style);                                                           \
  void silu_mul(const float* gate, const float* up, float* out, int64_t n);                         \
  void add_inplace(float* y, const float* x, int64_t n);                                            \
  void axpy(float* y, float a, const float* x, int64_t n);                                          \
  void softmax(float* x, int64_t n);                                                                \
  int64_t argmax(const float* x, int64_t n);                                                        \
  void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs);         \
  void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,   \
                      int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch);   \
  void attention_rows(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head,              \
                      const int32_t* block_table, float scale);                                     \
  void convert_from_f32(DType to, const float* src, void* dst, int64_t n);                          \
  void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale);                         \
  void matmul_q_gemv(const detail::QMatmulArgs& a, const detail::Runner& runner);                   \
  void matmul_q_gemm(const detail::QMatmulArgs& a, const detail::Runner& runner);                   \
  }

RINFER_DECLARE_ISA_KERNELS(avx2)
RINFER_DECLARE_ISA_KERNELS(avx512)

namespace rinfer::kernels::cpu::avx512 {
// Decode GEMV with x quantized per (row, group), VNNI (M <= 4).
void matmul_q_gemv_a8(const detail::QMatmulArgs& a, const detail::Runner& runner);
// as[0 .. n): one x (x, M, K, ldx of as[0]), weights of one type and group size.
void matmul_q_gemv_a8_multi(const detail::QMatmulArgs* as, int n, const detail::Runner& runner);
// Blocked BF16 matrices of one x (x, M, K, ldx of as[0]; all bf16_blocked,
// one bf16_dot): the decode GEMV or the prefill GEMM of all of them as one
// job (matmul_bf16_blocked_multi in ops.h).
void matmul_bf16_blocked_multi(const detail::MatmulArgs* as, int n, const detail::Runner& runner);
// Prefill W8A8/W4A8 GEMM (VNNI), as[0 .. n) as for matmul_q_gemv_a8_multi:
// x packed once, every weight's tasks in one pool job.
void matmul_q_gemm_multi(const detail::QMatmulArgs* as, int n, const detail::Runner& runner);
// The gated GEMM (matmul_q_gate_up_silu): gate.y = silu(x Wg^T + bg) * (x Wu^T
// + bu); x, M, K of gate; up.y unused. False (nothing done) where K is longer
// than one k-block.
bool matmul_q_gemm_gated(const detail::QMatmulArgs& gate, const detail::QMatmulArgs& up, const detail::Runner& runner);
}  // namespace rinfer::kernels::cpu::avx512

namespace rinfer::kernels::cpu::avx2 {
// Decode GEMV with x quantized per (row, group) as avx512::matmul_q_gemv_a8,
// int8 dot products by vpmaddubsw / vpmaddwd (M <= 4).
void matmul_q_gemv_a8(const detail::QMatmulArgs& a, const detail::Runner& runner);
// as[0 .. n): one x, weights of one type and group size, as one pool job
// (as avx512::matmul_q_gemv_a8_multi).
void matmul_q_gemv_a8_multi(const detail::QMatmulArgs* as, int n, const detail::Runner& runner);
// Prefill W8A8 / W4A8 GEMM with vpmaddubsw (qgemm_avx2.cpp), as[0 .. n) as
// for avx512::matmul_q_gemm_multi, and the same bits.
void matmul_q_gemm_multi(const detail::QMatmulArgs* as, int n, const detail::Runner& runner);
}  // namespace rinfer::kernels::cpu::avx2

namespace rinfer::kernels::cpu::avxvnni {
// Prefill W8A8/W4A8 GEMM with AVX-VNNI (vpdpbusd on ymm) at the AVX2 level,
// as[0 .. n) as for avx512::matmul_q_gemm_multi, and the same bits.
void matmul_q_gemm_multi(const detail::QMatmulArgs* as, int n, const detail::Runner& runner);
}  // namespace rinfer::kernels::cpu::avxvnni

namespace rinfer::kernels::cpu::avx2 {
// Decode GEMV on BF16 weights stored blocked (M <= 8; see matmul_bf16_blocked in ops.h).
void matmul_bf16_blocked_gemv(const detail::MatmulArgs& a, const detail::Runner& runner);
// The same for as[0 .. n) of one x (all M <= 8) as one pool job (as
// avx512::matmul_bf16_blocked_multi's decode case).
void matmul_bf16_blocked_gemv_multi(const detail::MatmulArgs* as, int n, const detail::Runner& runner);
}  // namespace rinfer::kernels::cpu::avx2
