// The op interface's dispatch: each op goes to the backend of the context's
// device (the CPU kernels are the only backend so far).
#include "ops/ops.h"

#include "core/error.h"
#include "kernels/cpu/batch_attention.h"
#include "kernels/cpu/latent_attention.h"
#include "kernels/cpu/ops.h"

namespace rinfer::ops {

namespace kc = kernels::cpu;

namespace {

// The CPU backend's thread pool: the context's, or one of the calling
// thread alone.
ThreadPool& cpu_pool(const ExecContext& ctx) {
  RINFER_CHECK(ctx.device == Device::Cpu, "no backend for device ", device_name(ctx.device));
  if (ctx.pool) return *ctx.pool;
  thread_local ThreadPool alone(1);
  return alone;
}

void check_host(const MatrixDesc& w) {
  RINFER_CHECK(w.device == Device::Cpu, "a ", device_name(w.device), " matrix passed to the CPU backend");
}

}  // namespace

void matmul(const ExecContext& ctx, const float* x, int64_t M, int64_t ldx, const MatrixDesc& w, const float* bias,
            float* y, int64_t ldy) {
  ThreadPool& pool = cpu_pool(ctx);
  check_host(w);
  switch (w.format) {
    case MatrixFormat::Quantized:
      kc::matmul_q(x, M, w.K, ldx, w.q, bias, y, ldy, pool);
      return;
    case MatrixFormat::BlockedBf16:
      kc::matmul_bf16_blocked(x, M, w.K, ldx, static_cast<const uint16_t*>(w.data), w.N, bias, y, ldy, pool);
      return;
    case MatrixFormat::Dense:
      kc::matmul(x, M, w.K, ldx, w.data, w.dtype, w.N, bias, y, ldy, pool);
      return;
  }
}

void matmul_multi(const ExecContext& ctx, const float* x, int64_t M, int64_t ldx, std::span<const MatmulOut> outs) {
  ThreadPool& pool = cpu_pool(ctx);
  if (outs.empty()) return;
  const int64_t K = outs[0].w->K;
  bool same_k = true, all_quantized = true, all_blocked = true;
  for (const auto& o : outs) {
    check_host(*o.w);
    same_k = same_k && o.w->K == K;
    all_quantized = all_quantized && o.w->format == MatrixFormat::Quantized;
    all_blocked = all_blocked && o.w->format == MatrixFormat::BlockedBf16;
  }
  const bool one_job = same_k && outs.size() <= size_t(kc::kMatmulQMultiMax);
  if (one_job && all_quantized) {
    kc::QMatmulOut q[kc::kMatmulQMultiMax];
    for (size_t i = 0; i < outs.size(); ++i) q[i] = {&outs[i].w->q, outs[i].bias, outs[i].y, outs[i].ldy};
    kc::matmul_q_multi(x, M, K, ldx, q, int(outs.size()), pool);
    return;
  }
  if (one_job && all_blocked) {
    kc::Bf16BlockedOut b[kc::kMatmulQMultiMax];
    for (size_t i = 0; i < outs.size(); ++i)
      b[i] = {static_cast<const uint16_t*>(outs[i].w->data), outs[i].w->N, outs[i].bias, outs[i].y, outs[i].ldy};
    kc::matmul_bf16_blocked_multi(x, M, K, ldx, b, int(outs.size()), pool);
    return;
  }
  for (const auto& o : outs) matmul(ctx, x, M, ldx, *o.w, o.bias, o.y, o.ldy);
}

bool gate_up_silu_fused(const MatrixDesc& gate, const MatrixDesc& up) {
  return gate.format == MatrixFormat::Quantized && up.format == MatrixFormat::Quantized && gate.K == up.K;
}

void gate_up_silu(const ExecContext& ctx, const float* x, int64_t M, int64_t ldx, const MatmulOut& gate,
                  const MatmulOut& up) {
  ThreadPool& pool = cpu_pool(ctx);
  if (gate_up_silu_fused(*gate.w, *up.w)) {
    kc::matmul_q_gate_up_silu(x, M, gate.w->K, ldx, {&gate.w->q, gate.bias, gate.y, gate.ldy},
                              {&up.w->q, up.bias, up.y, up.ldy}, pool);
    return;
  }
  const MatmulOut both[] = {gate, up};
  matmul_multi(ctx, x, M, ldx, both);
  const int64_t I = gate.w->N;
  for_rows(ctx, M, [&](int64_t r0, int64_t r1) {
    if (gate.ldy == I && up.ldy == I)
      kc::silu_mul(gate.y + r0 * I, up.y + r0 * I, gate.y + r0 * I, (r1 - r0) * I);
    else
      for (int64_t r = r0; r < r1; ++r) kc::silu_mul(gate.y + r * gate.ldy, up.y + r * up.ldy, gate.y + r * gate.ldy, I);
  });
}

uint64_t matrix_bytes(const MatrixDesc& w) {
  if (w.empty()) return 0;
  if (w.format == MatrixFormat::Quantized) return kc::quant_weight_bytes(w.q);
  return uint64_t(w.N) * uint64_t(w.K) * dtype_size(w.dtype);
}

bool bf16_blockable(int64_t N, int64_t K) { return kc::bf16_blockable(N, K); }
uint64_t matmul_macs() { return kc::matmul_macs(); }
void reset_matmul_macs() { kc::reset_matmul_macs(); }

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) { kc::rmsnorm(x, weight, n, eps, y); }
void rope_angles(int64_t pos, const float* inv_freq, int rot_dim, float mscale, float* cs) {
  kc::rope_angles(pos, inv_freq, rot_dim, mscale, cs);
}
void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  kc::rope_with_angles(x, n_heads, head_dim, rot_dim, cs, style);
}
void silu_mul(const float* gate, const float* up, float* out, int64_t n) { kc::silu_mul(gate, up, out, n); }
void add_inplace(float* y, const float* x, int64_t n) { kc::add_inplace(y, x, n); }
void softmax(float* x, int64_t n) { kc::softmax(x, n); }
void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs) {
  kc::softmax_tempered(logits, n, temperature, probs);
}
int64_t argmax(const float* x, int64_t n) { return kc::argmax(x, n); }
void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v) { kc::store_kv(kv, slot, k, v); }
void store_latent(const PagedKV& kv, int64_t slot, const float* row) { kc::store_latent(kv, slot, row); }

void paged_attention(const ExecContext& ctx, const TokenBatch& tokens, const float* q, int64_t n_heads,
                     const PagedKV& kv, float scale, const float* alibi, float* out) {
  kc::batch_attention(cpu_pool(ctx), tokens, q, n_heads, kv, scale, alibi, out);
}

void matmul_batch(const ExecContext& ctx, int64_t M, std::span<const MatmulJob> jobs) {
  ThreadPool& pool = cpu_pool(ctx);
  pool.run(int64_t(jobs.size()), [&](int64_t i, int) {
    const MatmulJob& j = jobs[size_t(i)];
    ExecContext one = ctx;
    one.pool = nullptr;  // this thread alone
    matmul(one, j.x, M, j.ldx, j.w, nullptr, j.y, j.ldy);
  });
}

void latent_attention(const ExecContext& ctx, const TokenBatch& tokens, const float* q, int64_t n_heads,
                      const PagedKV& kv, int latent_dim, float scale, float* out) {
  kc::batch_latent_attention(cpu_pool(ctx), tokens, q, n_heads, kv, latent_dim, scale, out);
}

}  // namespace rinfer::ops
