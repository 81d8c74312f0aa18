#pragma once
// CPU math kernels: the only place in rinfer that does SIMD. Each op has a
// plain scalar reference (reference.cpp) and faster AVX2 / AVX-512 versions
// chosen at run time from the CPU's features. Kernels know shapes and dtypes,
// never which model calls them.
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace rinfer::kernels::cpu {

enum class Isa { Scalar, Avx2, Avx512 };
const char* isa_name(Isa isa);
Isa best_isa();             // what this CPU supports
Isa active_isa();           // what the ops below use (best_isa() unless forced)
void force_isa(Isa isa);    // tests and benchmarks: pin an implementation

// y[m, n] = sum_k x[m, k] * W[n, k] + bias[n]
//   x: f32, M rows of K values, row stride ldx (elements)
//   W: N rows of K values of dtype wdt (F32, F16 or BF16), contiguous
//   bias: N floats or nullptr
//   y: f32, M rows, row stride ldy (elements)
// Work is split over the pool's threads.
void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy, ThreadPool& pool);

// y = x / sqrt(mean(x^2) + eps) * weight, one row of n values (y may alias x).
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y);

enum class RopeStyle {
  RotateHalf,   // pairs (i, i + rot_dim/2): HF LLaMA, Qwen, Mistral, Baichuan-7B
  Interleaved,  // pairs (2i, 2i + 1): GLM, DeepSeek MLA rope part, llama2.c/Meta layout
};
// Rotate, in place, the first rot_dim values of each of n_heads heads of
// head_dim values (stride head_dim) by angle pos * inv_freq[i], i < rot_dim/2;
// cos and sin are multiplied by mscale (1 except for YaRN).
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale);

// out[i] = silu(gate[i]) * up[i]   (out may alias gate or up)
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// x = softmax(x), numerically stable, in place.
void softmax(float* x, int64_t n);

// The paged KV cache of one layer, as attention reads it: a pool of blocks,
// each [block_size][n_kv_heads][head_dim] of `dtype` (F32, F16 or BF16), for
// K and for V. A sequence owns the blocks listed in its block table, in order.
struct PagedKV {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::F32;
  int block_size = 16;
  int n_kv_heads = 0;
  int head_dim = 0;
};

// One query head attending over the first n_ctx cached positions of a sequence:
//   out = softmax(scale * q . K[0..n_ctx) + alibi_slope * (j - (n_ctx - 1))) V
// q and out are head_dim floats; kv_head selects the K/V head (GQA mapping is
// the caller's); scratch holds at least n_ctx floats. alibi_slope = 0 for none.
void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch);

// Write one token's K and V (n_kv_heads * head_dim floats each) into slot
// `slot` (block * block_size + offset) of the cache, converting to its dtype.
void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v);

namespace reference {
// The scalar implementations: the definition every SIMD variant is tested against.
void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy);
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y);
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void softmax(float* x, int64_t n);
void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch);
}  // namespace reference

}  // namespace rinfer::kernels::cpu
