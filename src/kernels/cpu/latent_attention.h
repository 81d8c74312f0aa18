#pragma once
// Multi-head latent attention (DeepSeek-V2/V3 MLA) in its absorbed form:
// the cache holds one row per token, [c (latent_dim) | k_rope], shared by all
// heads; a query head is pre-multiplied into latent space, so attention
// never expands the cache into per-head K and V.
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu {

// scores_j = scale * q . row_j (q has head_dim = latent_dim + rope_dim values),
// out[0:latent_dim] = sum_j softmax(scores)_j * row_j[0:latent_dim].
// kv: n_kv_heads == 1, head_dim = latent_dim + rope_dim, rows in kv.k.
// scratch: at least n_ctx floats.
void latent_attention_head(const float* q, const PagedKV& kv, const int32_t* block_table, int64_t n_ctx,
                           int latent_dim, float scale, float* out, float* scratch);

// Write one token's cache row (head_dim floats) into slot `slot`.
void store_latent(const PagedKV& kv, int64_t slot, const float* row);

}  // namespace rinfer::kernels::cpu
