// Run-time choice of kernel implementation: every op goes to the AVX-512, AVX2
// or scalar reference version according to active_isa(). This file is built
// without SIMD flags; it only calls SIMD code after checking the CPU has it
// (force_isa cannot select more than best_isa()).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/cpu/impl.h"
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu {

namespace {
std::atomic<int> g_forced{-1};

// Per-thread grow-only scratch buffers (see detail::scratch).
struct ScratchBuffers {
  float* ptr[detail::kScratchCount] = {};
  int64_t cap[detail::kScratchCount] = {};
  ~ScratchBuffers() {
    for (auto* p : ptr) std::free(p);
  }
};
thread_local ScratchBuffers t_scratch;

void run_on_pool(void* pool, int64_t n_tasks, detail::TaskFn fn, void* ctx) {
  static_cast<ThreadPool*>(pool)->run(n_tasks, [fn, ctx](int64_t task, int thread) { fn(ctx, task, thread); });
}

detail::Runner runner_for(ThreadPool& pool) {
  detail::Runner r;
  r.pool = &pool;
  r.n_threads = pool.size();
  r.run = &run_on_pool;
  return r;
}
}  // namespace

namespace detail {
float* scratch(int slot, int64_t n) {
  auto& s = t_scratch;
  if (n > s.cap[slot]) {
    int64_t cap = n < 4096 ? 4096 : n + n / 4;  // a little headroom for slowly growing sizes
    size_t bytes = (size_t(cap) * sizeof(float) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) fail("out of memory: kernel scratch of ", bytes, " bytes");
    std::free(s.ptr[slot]);
    s.ptr[slot] = static_cast<float*>(p);
    s.cap[slot] = cap;
  }
  return s.ptr[slot];
}
}  // namespace detail

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa best_isa() {
  static const Isa best = [] {
    const auto& f = cpu_features();
    if (f.has_avx512_core()) return Isa::Avx512;
    if (f.has_avx2_fma()) return Isa::Avx2;
    return Isa::Scalar;
  }();
  return best;
}

Isa active_isa() {
  int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? Isa(forced) : best_isa();
}

// Never more than the CPU supports: a forced ISA above best_isa() is clamped.
void force_isa(Isa isa) {
  Isa best = best_isa();
  g_forced.store(int(int(isa) > int(best) ? best : isa), std::memory_order_relaxed);
}

void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy, ThreadPool& pool) {
  RINFER_CHECK(wdt == DType::F32 || wdt == DType::F16 || wdt == DType::BF16,
               "matmul: unsupported weight dtype ", dtype_name(wdt));
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * ldy + n] = bias ? bias[n] : 0.0f;
    return;
  }
  const Isa isa = active_isa();
  if (isa == Isa::Scalar) {
    const size_t esz = dtype_size(wdt);
    pool.parallel_for(N, 16, [&](int64_t n0, int64_t n1, int) {
      reference::matmul(x, M, K, ldx, static_cast<const uint8_t*>(w) + n0 * K * esz, wdt, n1 - n0,
                        bias ? bias + n0 : nullptr, y + n0, ldy);
    });
    return;
  }
  const detail::MatmulArgs a{x, M, K, ldx, w, wdt, N, bias, y, ldy};
  const detail::Runner r = runner_for(pool);
  if (isa == Isa::Avx512)
    avx512::matmul(a, r);
  else
    avx2::matmul(a, r);
}

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::rmsnorm(x, weight, n, eps, y);
    case Isa::Avx2: return avx2::rmsnorm(x, weight, n, eps, y);
    default: return reference::rmsnorm(x, weight, n, eps, y);
  }
}

void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::rope(x, n_heads, head_dim, rot_dim, pos, inv_freq, style, mscale);
    case Isa::Avx2: return avx2::rope(x, n_heads, head_dim, rot_dim, pos, inv_freq, style, mscale);
    default: return reference::rope(x, n_heads, head_dim, rot_dim, pos, inv_freq, style, mscale);
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::silu_mul(gate, up, out, n);
    case Isa::Avx2: return avx2::silu_mul(gate, up, out, n);
    default: return reference::silu_mul(gate, up, out, n);
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::add_inplace(y, x, n);
    case Isa::Avx2: return avx2::add_inplace(y, x, n);
    default: return reference::add_inplace(y, x, n);
  }
}

void softmax(float* x, int64_t n) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::softmax(x, n);
    case Isa::Avx2: return avx2::softmax(x, n);
    default: return reference::softmax(x, n);
  }
}

void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch) {
  RINFER_CHECK(kv.dtype == DType::F32 || kv.dtype == DType::F16 || kv.dtype == DType::BF16,
               "attention: unsupported KV dtype ", dtype_name(kv.dtype));
  switch (active_isa()) {
    case Isa::Avx512:
      return avx512::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    case Isa::Avx2:
      return avx2::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    default:
      return reference::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
  }
}

void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v) {
  RINFER_CHECK(kv.dtype == DType::F32 || kv.dtype == DType::F16 || kv.dtype == DType::BF16,
               "store_kv: unsupported KV dtype ", dtype_name(kv.dtype));
  const int64_t n = int64_t(kv.n_kv_heads) * kv.head_dim;
  const size_t esz = dtype_size(kv.dtype);
  void* kd = static_cast<uint8_t*>(kv.k) + slot * n * esz;
  void* vd = static_cast<uint8_t*>(kv.v) + slot * n * esz;
  switch (active_isa()) {
    case Isa::Avx512:
      avx512::convert_from_f32(kv.dtype, k, kd, n);
      avx512::convert_from_f32(kv.dtype, v, vd, n);
      return;
    case Isa::Avx2:
      avx2::convert_from_f32(kv.dtype, k, kd, n);
      avx2::convert_from_f32(kv.dtype, v, vd, n);
      return;
    default:
      rinfer::convert_from_f32(kv.dtype, k, kd, size_t(n));
      rinfer::convert_from_f32(kv.dtype, v, vd, size_t(n));
      return;
  }
}

}  // namespace rinfer::kernels::cpu
