#pragma once
// A forward pass's attention on the CPU: the (token, head) rows of a batch cut
// into pool tasks that share K/V reads (ops::paged_attention,
// ops::latent_attention).
#include <cstdint>

#include "core/paged_kv.h"
#include "core/thread_pool.h"
#include "ops/ops.h"

namespace rinfer::kernels::cpu {

void batch_attention(ThreadPool& pool, const ops::TokenBatch& tokens, const float* q, int64_t n_heads,
                     const PagedKV& kv, float scale, const float* alibi, float* out);

void batch_latent_attention(ThreadPool& pool, const ops::TokenBatch& tokens, const float* q, int64_t n_heads,
                            const PagedKV& kv, int latent_dim, float scale, float* out);

}  // namespace rinfer::kernels::cpu
