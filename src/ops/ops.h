#pragma once
// The op interface: everything the model layers and the sampler compute,
// with no device in its names. Matrices and the KV cache are passed as plain
// descriptors (ops/matrix.h, core/paged_kv.h); ops that split work take the
// ExecContext (device, threads) and dispatch to the backend of its device
// (src/kernels/cpu today). Row ops work on one row of host memory on the
// calling thread: the layers call them inside their own row loops
// (for_rows), where they fuse several per token.
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/paged_kv.h"
#include "core/rope_style.h"
#include "ops/exec_context.h"
#include "ops/matrix.h"

namespace rinfer::ops {

// ------------------------------------------------------------------ matrices
// y[m, n] = sum_k x[m, k] W[n, k] + bias[n]; x: M rows of w.K floats (stride
// ldx), y: M rows of w.N floats (stride ldy), bias: w.N floats or null.
void matmul(const ExecContext& ctx, const float* x, int64_t M, int64_t ldx, const MatrixDesc& w, const float* bias,
            float* y, int64_t ldy);

struct MatmulOut {
  const MatrixDesc* w;
  const float* bias;  // [w->N] or null
  float* y;
  int64_t ldy;
};
// Several matrices of one input (a layer's q/k/v, gate/up): each out gets
// matmul's result; where the backend can, the input is prepared once and the
// matrices run as one job.
void matmul_multi(const ExecContext& ctx, const float* x, int64_t M, int64_t ldx, std::span<const MatmulOut> outs);
// Independent small matmuls (one per attention head, say), each
// y_i = x_i W_i^T over the same M rows, run side by side in one parallel
// region, each on one thread: a matrix too small to split pays more for
// the hand-off to the threads than for its bytes.
struct MatmulJob {
  const float* x;
  int64_t ldx;
  MatrixDesc w;
  float* y;
  int64_t ldy;
};
void matmul_batch(const ExecContext& ctx, int64_t M, std::span<const MatmulJob> jobs);
// The gated MLP's first half: gate.y = silu(x Wg^T + bg) * (x Wu^T + bu);
// up.y is scratch of the same size as gate.y. Where the backend fuses the
// activation into the product (gate_up_silu_fused), up's product never goes
// through memory; elsewhere it is matmul_multi then silu_mul, row by row.
bool gate_up_silu_fused(const MatrixDesc& gate, const MatrixDesc& up);
void gate_up_silu(const ExecContext& ctx, const float* x, int64_t M, int64_t ldx, const MatmulOut& gate,
                  const MatmulOut& up);
// Bytes one pass over w reads (data and scales).
uint64_t matrix_bytes(const MatrixDesc& w);
// Whether a row-major BF16 matrix of this shape can be stored blocked.
bool bf16_blockable(int64_t N, int64_t K);
// Multiply-adds the matrix ops did since the last reset (all threads).
uint64_t matmul_macs();
void reset_matmul_macs();

// ------------------------------------------------------------------ row ops
// y = x / sqrt(mean(x^2) + eps) * weight, one row of n values (y may alias x).
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y);
// The cos and sin RoPE applies at pos: cs[i] = cos(pos * inv_freq[i]) *
// mscale, cs[rot_dim / 2 + i] = sin(...) * mscale, i < rot_dim / 2.
void rope_angles(int64_t pos, const float* inv_freq, int rot_dim, float mscale, float* cs);
// Rotate the first rot_dim values of n_heads heads (stride head_dim) by cs.
void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);  // out may alias gate or up
void add_inplace(float* y, const float* x, int64_t n);                      // y += x
void softmax(float* x, int64_t n);                                          // in place
// probs = softmax((logits - max) / temperature), temperature > 0.
void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs);
// The index of the first largest x[i] (NaNs never win); n >= 1.
int64_t argmax(const float* x, int64_t n);
// Write one token's K and V (n_kv_heads * head_dim floats each) into slot
// `slot` of the cache, converting to its dtype.
void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v);
// Write one token's latent cache row (head_dim floats: MLA) into slot `slot`.
void store_latent(const PagedKV& kv, int64_t slot, const float* row);

// ------------------------------------------------------------------ attention
// The tokens of one forward pass, as attention needs them.
struct TokenBatch {
  int64_t n_tokens = 0;
  const int64_t* pos = nullptr;              // position of each token (its context is [0, pos])
  const int64_t* seq = nullptr;              // sequence index of each token
  const int32_t* const* block_tables = nullptr;  // per sequence: its KV block table
  int64_t max_ctx = 0;                       // longest context in the batch
};

// Causal attention of every token's n_heads query heads over the cache
// (after its own K/V were stored): q, out [n_tokens][n_heads][kv.head_dim];
// query head h reads K/V head h / (n_heads / kv.n_kv_heads);
// alibi: n_heads slopes or null.
void paged_attention(const ExecContext& ctx, const TokenBatch& tokens, const float* q, int64_t n_heads,
                     const PagedKV& kv, float scale, const float* alibi, float* out);

// Multi-head latent attention (absorbed MLA) over a cache of one row per
// token, [latent (latent_dim) | rope]: q [n_tokens][n_heads][kv.head_dim]
// (query mapped into latent space), out [n_tokens][n_heads][latent_dim].
void latent_attention(const ExecContext& ctx, const TokenBatch& tokens, const float* q, int64_t n_heads,
                      const PagedKV& kv, int latent_dim, float scale, float* out);

}  // namespace rinfer::ops
