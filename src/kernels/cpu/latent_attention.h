#pragma once
// Multi-head latent attention (DeepSeek-V2/V3 MLA) in its absorbed form:
// the cache holds one row per token, [c (latent_dim) | k_rope], shared by all
// heads; a query head is pre-multiplied into latent space, so attention
// never expands the cache into per-head K and V.
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu {

// For each of n_heads query heads of one token (q: n_heads rows of
// head_dim = latent_dim + rope_dim values): scores_j = scale * q . row_j,
// out[0:latent_dim] = sum_j softmax(scores)_j * row_j[0:latent_dim] (out:
// n_heads rows of latent_dim). Every head reads the same cache rows, so each
// row is converted once per pass for all of them.
// kv: n_kv_heads == 1, head_dim = latent_dim + rope_dim, rows in kv.k.
// scratch: at least latent_attention_scratch(n_heads, n_ctx, head_dim) floats.
void latent_attention_heads(const float* q, int n_heads, const PagedKV& kv, const int32_t* block_table,
                            int64_t n_ctx, int latent_dim, float scale, float* out, float* scratch);
inline int64_t latent_attention_scratch(int n_heads, int64_t n_ctx, int head_dim, int block_size) {
  return int64_t(n_heads) * n_ctx + int64_t(block_size) * head_dim;
}

// Write one token's cache row (head_dim floats) into slot `slot`.
void store_latent(const PagedKV& kv, int64_t slot, const float* row);

}  // namespace rinfer::kernels::cpu
