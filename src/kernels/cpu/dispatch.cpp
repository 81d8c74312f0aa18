// Run-time choice of kernel implementation. Until SIMD variants exist for an
// op, it runs its scalar reference; matmul is threaded over output rows.
#include <atomic>

#include "core/cpu_features.h"
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu {

namespace {
std::atomic<int> g_forced{-1};
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa best_isa() {
  const auto& f = cpu_features();
  if (f.has_avx512_core()) return Isa::Avx512;
  if (f.has_avx2_fma()) return Isa::Avx2;
  return Isa::Scalar;
}

Isa active_isa() {
  int forced = g_forced.load();
  return forced >= 0 ? Isa(forced) : best_isa();
}

void force_isa(Isa isa) { g_forced.store(int(isa)); }

void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy, ThreadPool& pool) {
  const size_t esz = dtype_size(wdt);
  pool.parallel_for(N, 16, [&](int64_t n0, int64_t n1, int) {
    reference::matmul(x, M, K, ldx, static_cast<const uint8_t*>(w) + n0 * K * esz, wdt, n1 - n0,
                      bias ? bias + n0 : nullptr, y + n0, ldy);
  });
}

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  reference::rmsnorm(x, weight, n, eps, y);
}
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale) {
  reference::rope(x, n_heads, head_dim, rot_dim, pos, inv_freq, style, mscale);
}
void silu_mul(const float* gate, const float* up, float* out, int64_t n) { reference::silu_mul(gate, up, out, n); }
void add_inplace(float* y, const float* x, int64_t n) { reference::add_inplace(y, x, n); }
void softmax(float* x, int64_t n) { reference::softmax(x, n); }
void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch) {
  reference::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
}

void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v) {
  const int64_t n = int64_t(kv.n_kv_heads) * kv.head_dim;
  const size_t esz = dtype_size(kv.dtype);
  convert_from_f32(kv.dtype, k, static_cast<uint8_t*>(kv.k) + slot * n * esz, size_t(n));
  convert_from_f32(kv.dtype, v, static_cast<uint8_t*>(kv.v) + slot * n * esz, size_t(n));
}

}  // namespace rinfer::kernels::cpu
