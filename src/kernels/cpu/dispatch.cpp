// Run-time choice of kernel implementation: every op goes to the AVX-512, AVX2
// or scalar reference version according to active_isa(). This file is built
// without SIMD flags; it only calls SIMD code after checking the CPU has it
// (force_isa cannot select more than best_isa()).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/impl.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_layout.h"

namespace rinfer::kernels::cpu {

namespace {
// The forced ISA: -1 none, -2 not read from RINFER_ISA yet.
std::atomic<int> g_forced{-2};

// AVX-VNNI at the AVX2 level: -1 as the CPU has it, 0 off, 1 on (where the
// CPU has it).
std::atomic<int> g_avx_vnni{-1};

// RINFER_ISA=scalar|avx2|avxvnni|avx512 pins the kernels (as force_isa),
// e.g. to run the AVX2 path on an AVX-512 machine; a level the CPU lacks is
// clamped to what it has. avx2 is plain AVX2 and avxvnni AVX2 with AVX-VNNI
// (avx_vnni_active). Any other value is an error.
int isa_from_env() {
  const char* e = std::getenv("RINFER_ISA");
  if (!e || !*e) return -1;
  const std::string v = e;
  Isa isa;
  if (v == "scalar")
    isa = Isa::Scalar;
  else if (v == "avx2" || v == "avxvnni")
    isa = Isa::Avx2;
  else if (v == "avx512")
    isa = Isa::Avx512;
  else
    fail("RINFER_ISA=\"", v, "\": expected scalar, avx2, avxvnni or avx512");
  if (isa == Isa::Avx2) g_avx_vnni.store(v == "avxvnni" ? 1 : 0, std::memory_order_relaxed);
  return std::min(int(isa), int(best_isa()));
}

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
  static_cast<ThreadPool*>(pool)->run(n_tasks, fn, ctx);
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
  if (forced == -2) {
    int expected = -2;
    g_forced.compare_exchange_strong(expected, isa_from_env(), std::memory_order_relaxed);
    forced = g_forced.load(std::memory_order_relaxed);
  }
  return forced >= 0 ? Isa(forced) : best_isa();
}

// Never more than the CPU supports: a forced ISA above best_isa() is clamped.
void force_isa(Isa isa) {
  Isa best = best_isa();
  g_forced.store(int(int(isa) > int(best) ? best : isa), std::memory_order_relaxed);
}

bool avx_vnni_active() {
  return active_isa() == Isa::Avx2 && cpu_features().avx_vnni && g_avx_vnni.load(std::memory_order_relaxed) != 0;
}

void force_avx_vnni(int on) { g_avx_vnni.store(on < 0 ? -1 : on > 0 ? 1 : 0, std::memory_order_relaxed); }

const char* active_level_name() { return avx_vnni_active() ? "avxvnni" : isa_name(active_isa()); }

namespace {
std::atomic<uint64_t> g_matmul_macs{0};
void count_macs(int64_t M, int64_t N, int64_t K) {
  g_matmul_macs.fetch_add(uint64_t(M) * uint64_t(N) * uint64_t(K), std::memory_order_relaxed);
}
}  // namespace

uint64_t matmul_macs() { return g_matmul_macs.load(std::memory_order_relaxed); }
void reset_matmul_macs() { g_matmul_macs.store(0, std::memory_order_relaxed); }

namespace {
std::atomic<int> g_bf16_gemm{int(Bf16Gemm::Auto)};
constexpr int64_t kGemvMaxRows = 8;  // avx2/avx512 matmul: GEMV up to this many rows (kGemvMaxM)

Bf16Gemm bf16_gemm_auto() {
  static const Bf16Gemm mode = [] {
    if (const char* e = std::getenv("RINFER_BF16_GEMM")) {
      if (std::strcmp(e, "dot") == 0) return Bf16Gemm::Bf16Dot;
      if (std::strcmp(e, "fma") == 0) return Bf16Gemm::F32Fma;
    }
    return cpu_features().is_amd() ? Bf16Gemm::Bf16Dot : Bf16Gemm::F32Fma;
  }();
  return mode;
}
}  // namespace

void set_bf16_gemm(Bf16Gemm mode) { g_bf16_gemm.store(int(mode), std::memory_order_relaxed); }

namespace {
std::atomic<int> g_bf16_attention{int(Bf16Attention::Auto)};
}  // namespace

void set_bf16_attention(Bf16Attention mode) { g_bf16_attention.store(int(mode), std::memory_order_relaxed); }

bool attention_uses_bf16_dot(DType kv_dtype, int head_dim) {
  if (kv_dtype != DType::BF16 || head_dim % 32 != 0 || head_dim > 256) return false;
  if (active_isa() != Isa::Avx512 || !cpu_features().has_avx512_bf16()) return false;
  Bf16Attention m = Bf16Attention(g_bf16_attention.load(std::memory_order_relaxed));
  if (m == Bf16Attention::Auto) {
    static const Bf16Attention env = [] {
      const char* e = std::getenv("RINFER_BF16_ATTN");
      if (!e || !*e) return Bf16Attention::Bf16Dot;
      if (std::strcmp(e, "dot") == 0) return Bf16Attention::Bf16Dot;
      if (std::strcmp(e, "f32") == 0) return Bf16Attention::F32;
      fail("RINFER_BF16_ATTN=\"", e, "\": expected dot or f32");
    }();
    m = env;
  }
  return m == Bf16Attention::Bf16Dot;
}

bool bf16_gemm_uses_dot() {
  if (active_isa() != Isa::Avx512 || !cpu_features().has_avx512_bf16()) return false;
  Bf16Gemm m = Bf16Gemm(g_bf16_gemm.load(std::memory_order_relaxed));
  if (m == Bf16Gemm::Auto) m = bf16_gemm_auto();
  return m == Bf16Gemm::Bf16Dot;
}

const char* matmul_path(int64_t M, DType wdt) {
  const Isa isa = active_isa();
  const bool bf = wdt == DType::BF16, f16 = wdt == DType::F16;
  if (isa == Isa::Scalar) return bf ? "bf16-scalar" : f16 ? "f16-scalar" : "f32-scalar";
  if (M <= kGemvMaxRows) return bf ? "bf16-gemv" : f16 ? "f16-gemv" : "f32-gemv";
  if (bf) return bf16_gemm_uses_dot() ? "bf16-dot-gemm" : "bf16-fma-gemm";
  return f16 ? "f16-fma-gemm" : "f32-fma-gemm";
}

const char* matmul_bf16_blocked_path(int64_t M) {
  if (active_isa() == Isa::Avx512 && M > kGemvMaxRows && M <= detail::kBlockedDotMaxM && bf16_gemm_uses_dot())
    return "bf16-dot-blocked";
  return M <= kGemvMaxRows && active_isa() != Isa::Scalar ? "bf16-gemv-blocked" : matmul_path(M, DType::BF16);
}

namespace {

// matmul, and whether BF16 weights may take x rounded to BF16 (the GEMM
// setting) or must keep it in f32.
void matmul_with(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
                 const float* bias, float* y, int64_t ldy, ThreadPool& pool, bool may_round_x) {
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
  const detail::MatmulArgs a{x, M, K, ldx, w, wdt, N, bias, y, ldy,
                            may_round_x && wdt == DType::BF16 && M > kGemvMaxRows && bf16_gemm_uses_dot()};
  const detail::Runner r = runner_for(pool);
  if (isa == Isa::Avx512)
    avx512::matmul(a, r);
  else
    avx2::matmul(a, r);
}

}  // namespace

void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy, ThreadPool& pool) {
  RINFER_CHECK(wdt == DType::F32 || wdt == DType::F16 || wdt == DType::BF16,
               "matmul: unsupported weight dtype ", dtype_name(wdt));
  if (M <= 0 || N <= 0) return;
  count_macs(M, N, K);
  matmul_with(x, M, K, ldx, w, wdt, N, bias, y, ldy, pool, true);
}

void detail::matmul_f32_x(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
                          float* y, int64_t ldy) {
  RINFER_ASSERT(wdt == DType::F32 || wdt == DType::F16 || wdt == DType::BF16);
  if (M <= 0 || N <= 0) return;
  thread_local ThreadPool alone(1);
  matmul_with(x, M, K, ldx, w, wdt, N, nullptr, y, ldy, alone, false);
}

bool bf16_blockable(int64_t N, int64_t K) { return N > 0 && K > 0 && N % 8 == 0 && K % 32 == 0; }

void block_bf16(const uint16_t* rows, int64_t N, int64_t K, uint16_t* blocked) {
  RINFER_CHECK(bf16_blockable(N, K), "block_bf16: ", N, " x ", K, " is not a multiple of 8 x 32");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; k += 32)
      std::memcpy(blocked + ((n / 8) * (K / 32) + k / 32) * 256 + (n % 8) * 32, rows + n * K + k, 64);
}

void unblock_bf16(const uint16_t* blocked, int64_t N, int64_t K, uint16_t* rows) {
  RINFER_CHECK(bf16_blockable(N, K), "unblock_bf16: ", N, " x ", K, " is not a multiple of 8 x 32");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; k += 32)
      std::memcpy(rows + n * K + k, blocked + ((n / 8) * (K / 32) + k / 32) * 256 + (n % 8) * 32, 64);
}

void matmul_bf16_blocked(const float* x, int64_t M, int64_t K, int64_t ldx, const uint16_t* w, int64_t N,
                         const float* bias, float* y, int64_t ldy, ThreadPool& pool) {
  RINFER_CHECK(bf16_blockable(N, K), "matmul_bf16_blocked: ", N, " x ", K, " is not a multiple of 8 x 32");
  if (M <= 0) return;
  count_macs(M, N, K);
  const Isa isa = active_isa();
  if (isa == Isa::Avx512) {
    detail::MatmulArgs a{x, M, K, ldx, w, DType::BF16, N, bias, y, ldy, M > kGemvMaxRows && bf16_gemm_uses_dot()};
    a.bf16_blocked = true;
    avx512::matmul(a, runner_for(pool));
    return;
  }
  if (isa == Isa::Avx2 && M <= kGemvMaxRows) {
    detail::MatmulArgs a{x, M, K, ldx, w, DType::BF16, N, bias, y, ldy};
    a.bf16_blocked = true;
    avx2::matmul_bf16_blocked_gemv(a, runner_for(pool));
    return;
  }
  // AVX2 GEMM and scalar: whole 8-row blocks are contiguous in both layouts, so
  // each thread turns its chunk of blocks back into rows (thread scratch) and
  // runs the row-major kernel on it.
  // (GEMM regime: bigger chunks, since each chunk packs x again.)
  const int64_t kChunkRows = M > kGemvMaxRows ? 256 : 64;
  const int64_t n_chunks = (N + kChunkRows - 1) / kChunkRows;
  pool.run(n_chunks, [&](int64_t c, int) {
    const int64_t n0 = c * kChunkRows, rows = std::min(kChunkRows, N - n0);
    auto* tmp = reinterpret_cast<uint16_t*>(detail::scratch(detail::kScratchTmp, (rows * K + 1) / 2));
    unblock_bf16(w + n0 * K, rows, K, tmp);
    const float* b = bias ? bias + n0 : nullptr;
    if (isa == Isa::Avx2) {
      const detail::MatmulArgs a{x, M, K, ldx, tmp, DType::BF16, rows, b, y + n0, ldy};
      detail::Runner serial;  // n_threads 1: the kernel runs every task inline
      avx2::matmul(a, serial);
    } else {
      reference::matmul(x, M, K, ldx, tmp, DType::BF16, rows, b, y + n0, ldy);
    }
  });
}

void matmul_bf16_blocked_multi(const float* x, int64_t M, int64_t K, int64_t ldx, const Bf16BlockedOut* outs, int n,
                               ThreadPool& pool) {
  RINFER_CHECK(n >= 0 && n <= kMatmulQMultiMax, "matmul_bf16_blocked_multi: ", n, " matrices, at most ",
               kMatmulQMultiMax);
  const Isa isa = active_isa();
  // One job: AVX-512 (GEMV and GEMM) and the AVX2 GEMV; else one call each.
  if (!(isa == Isa::Avx512 || (isa == Isa::Avx2 && M <= kGemvMaxRows)) || M <= 0 || n == 0) {
    for (int i = 0; i < n; ++i)
      matmul_bf16_blocked(x, M, K, ldx, outs[i].w, outs[i].N, outs[i].bias, outs[i].y, outs[i].ldy, pool);
    return;
  }
  const bool dot = M > kGemvMaxRows && bf16_gemm_uses_dot();
  detail::MatmulArgs as[kMatmulQMultiMax];
  for (int i = 0; i < n; ++i) {
    const Bf16BlockedOut& o = outs[i];
    RINFER_CHECK(bf16_blockable(o.N, K), "matmul_bf16_blocked_multi: ", o.N, " x ", K,
                 " is not a multiple of 8 x 32");
    count_macs(M, o.N, K);
    as[i] = detail::MatmulArgs{x, M, K, ldx, o.w, DType::BF16, o.N, o.bias, o.y, o.ldy, dot};
    as[i].bf16_blocked = true;
  }
  if (isa == Isa::Avx2)
    avx2::matmul_bf16_blocked_gemv_multi(as, n, runner_for(pool));
  else
    avx512::matmul_bf16_blocked_multi(as, n, runner_for(pool));
}

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::rmsnorm(x, weight, n, eps, y);
    case Isa::Avx2: return avx2::rmsnorm(x, weight, n, eps, y);
    default: return reference::rmsnorm(x, weight, n, eps, y);
  }
}

// The reference's angles at every level (libm, no SIMD to vary them).
void rope_angles(int64_t pos, const float* inv_freq, int rot_dim, float mscale, float* cs) {
  reference::rope_angles(pos, inv_freq, rot_dim, mscale, cs);
}

void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::rope_with_angles(x, n_heads, head_dim, rot_dim, cs, style);
    case Isa::Avx2: return avx2::rope_with_angles(x, n_heads, head_dim, rot_dim, cs, style);
    default: return reference::rope_with_angles(x, n_heads, head_dim, rot_dim, cs, style);
  }
}

void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale) {
  thread_local std::vector<float> cs;
  if (cs.size() < size_t(rot_dim)) cs.resize(size_t(rot_dim));
  rope_angles(pos, inv_freq, rot_dim, mscale, cs.data());
  rope_with_angles(x, n_heads, head_dim, rot_dim, cs.data(), style);
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

void axpy(float* y, float a, const float* x, int64_t n) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::axpy(y, a, x, n);
    case Isa::Avx2: return avx2::axpy(y, a, x, n);
    default: return reference::axpy(y, a, x, n);
  }
}

int64_t argmax(const float* x, int64_t n) {
  RINFER_CHECK(n >= 1 && n <= INT32_MAX, "argmax: n = ", n, " is not in [1, 2^31)");
  switch (active_isa()) {
    case Isa::Avx512: return avx512::argmax(x, n);
    case Isa::Avx2: return avx2::argmax(x, n);
    default: return reference::argmax(x, n);
  }
}

void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::softmax_tempered(logits, n, temperature, probs);
    case Isa::Avx2: return avx2::softmax_tempered(logits, n, temperature, probs);
    default: return reference::softmax_tempered(logits, n, temperature, probs);
  }
}

void softmax(float* x, int64_t n) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::softmax(x, n);
    case Isa::Avx2: return avx2::softmax(x, n);
    default: return reference::softmax(x, n);
  }
}

namespace {
// What every reader and writer of a PagedKV needs (its dtype, the I8 scales,
// the pool size that places each head's rows).
void check_paged_kv(const PagedKV& kv, const char* what) {
  RINFER_CHECK(kv.dtype == DType::F32 || kv.dtype == DType::F16 || kv.dtype == DType::BF16 || kv.dtype == DType::I8,
               what, ": unsupported KV dtype ", dtype_name(kv.dtype));
  RINFER_CHECK(kv.dtype != DType::I8 || (kv.k_scale && kv.v_scale), what, ": I8 KV cache without scales");
  RINFER_CHECK(kv.n_blocks > 0 && kv.block_size > 0, what, ": KV cache without blocks");
}
}  // namespace

void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch) {
  check_paged_kv(kv, "attention");
  switch (active_isa()) {
    case Isa::Avx512:
      return avx512::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    case Isa::Avx2:
      return avx2::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
    default:
      return reference::attention_head(q, kv, kv_head, block_table, n_ctx, scale, alibi_slope, out, scratch);
  }
}

void attention_rows(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    float scale) {
  check_paged_kv(kv, "attention");
  switch (active_isa()) {
    case Isa::Avx512: return avx512::attention_rows(rows, n_rows, kv, kv_head, block_table, scale);
    case Isa::Avx2: return avx2::attention_rows(rows, n_rows, kv, kv_head, block_table, scale);
    default: {  // scalar: one row at a time
      int64_t n_max = 0;
      for (int r = 0; r < n_rows; ++r) n_max = std::max(n_max, rows[r].n_ctx);
      float* scores = detail::scratch(detail::kScratchAttnScores, n_max);
      for (int r = 0; r < n_rows; ++r)
        reference::attention_head(rows[r].q, kv, kv_head, block_table, rows[r].n_ctx, scale, rows[r].alibi_slope,
                                  rows[r].out, scores);
    }
  }
}

void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v) {
  check_paged_kv(kv, "store_kv");
  if (kv.dtype == DType::I8) {  // each head's row by the active level's quantize_row_i8
    const int hd = kv.head_dim;
    for (int h = 0; h < kv.n_kv_heads; ++h) {
      const int64_t row = kv_slot_row(kv, slot, h);
      quantize_row_i8(k + int64_t(h) * hd, hd, static_cast<int8_t*>(kv.k) + row * hd, kv.k_scale + row);
      quantize_row_i8(v + int64_t(h) * hd, hd, static_cast<int8_t*>(kv.v) + row * hd, kv.v_scale + row);
    }
    return;
  }
  const int64_t hd = kv.head_dim;
  const size_t esz = dtype_size(kv.dtype);
  const Isa isa = active_isa();
  for (int h = 0; h < kv.n_kv_heads; ++h) {  // head-major pools (PagedKV)
    const int64_t row = kv_slot_row(kv, slot, h);
    void* kd = static_cast<uint8_t*>(kv.k) + row * hd * int64_t(esz);
    void* vd = static_cast<uint8_t*>(kv.v) + row * hd * int64_t(esz);
    const float* ks = k + h * hd;
    const float* vs = v + h * hd;
    switch (isa) {
      case Isa::Avx512:
        avx512::convert_from_f32(kv.dtype, ks, kd, hd);
        avx512::convert_from_f32(kv.dtype, vs, vd, hd);
        break;
      case Isa::Avx2:
        avx2::convert_from_f32(kv.dtype, ks, kd, hd);
        avx2::convert_from_f32(kv.dtype, vs, vd, hd);
        break;
      default:
        rinfer::convert_from_f32(kv.dtype, ks, kd, size_t(hd));
        rinfer::convert_from_f32(kv.dtype, vs, vd, size_t(hd));
    }
  }
}

// ================================================================= quantized weights
namespace {
constexpr int64_t kQGemvMaxM = 4;  // matmul_q: weight-only GEMV up to this many rows

bool has_vnni() { return cpu_features().avx512_vnni; }

// The rows [16 * b0, 16 * b1) of w as a QuantizedWeight of their own (both
// layouts are contiguous per 16-row block).
QuantizedWeight row_blocks(const QuantizedWeight& w, int64_t b0, int64_t b1) {
  QuantizedWeight v = w;
  const QuantAddr qa = quant_addr(w);
  v.N = std::min(w.N, 16 * b1) - 16 * b0;
  v.data = static_cast<const uint8_t*>(w.data) + b0 * qa.d_block;
  if (!w.interleaved) v.scales = qa.scales + b0 * qa.s_block;
  return v;
}
}  // namespace

const char* quant_type_name(QuantType t) { return t == QuantType::Q8 ? "q8" : "q4"; }

bool quant_group_size_supported(int64_t g) { return g == 32 || g == 64 || g == 128; }

int64_t quant_padded_rows(int64_t N) { return (N + 15) / 16 * 16; }

size_t quant_data_bytes(QuantType type, int64_t N, int64_t K) {
  const size_t bytes = size_t(quant_padded_rows(N)) * size_t(K);
  return type == QuantType::Q8 ? bytes : bytes / 2;
}

size_t quant_scale_bytes(int64_t N, int64_t K, int64_t group_size, DType scale_dtype) {
  return size_t(quant_padded_rows(N)) * size_t(K / group_size) * dtype_size(scale_dtype);
}

size_t quant_interleaved_bytes(QuantType type, int64_t N, int64_t K, int64_t group_size, DType scale_dtype) {
  check_quant_shape(type, N, K, group_size, scale_dtype);
  QuantizedWeight v;  // only the shape: quant_addr's block stride is the layout's one definition
  v.type = type;
  v.N = N;
  v.K = K;
  v.group_size = group_size;
  v.scale_dtype = scale_dtype;
  v.interleaved = true;
  return size_t(quant_padded_rows(N) / 16 * quant_addr(v).d_block);
}

size_t quant_weight_bytes(const QuantizedWeight& w) {
  if (w.interleaved) return quant_interleaved_bytes(w.type, w.N, w.K, w.group_size, w.scale_dtype);
  return quant_data_bytes(w.type, w.N, w.K) + quant_scale_bytes(w.N, w.K, w.group_size, w.scale_dtype);
}

QuantizedWeight interleave_quant_scales(const QuantizedWeight& w, void* out) {
  RINFER_CHECK(!w.interleaved && w.data && w.scales, "interleave_quant_scales: needs a weight with separate scales");
  QuantizedWeight v = w;
  v.data = out;
  v.scales = nullptr;
  v.interleaved = true;
  const QuantAddr src = quant_addr(w), dst = quant_addr(v);
  const int64_t G = w.K / w.group_size, D = quant_group_data_bytes(w), S = quant_group_scale_bytes(w);
  for (int64_t b = 0; b < quant_padded_rows(w.N) / 16; ++b) {
    for (int64_t g = 0; g < G; ++g) {
      std::memcpy(const_cast<uint8_t*>(dst.group_data(b, g)), src.group_data(b, g), size_t(D));
      std::memcpy(const_cast<uint8_t*>(dst.group_scales(b, g)), src.group_scales(b, g), size_t(S));
    }
    // An odd group count's last line of F16 scales: its second half is padding.
    if (dst.shift == 1 && G % 2 == 1) std::memset(const_cast<uint8_t*>(dst.group_scales(b, G - 1)) + S, 0, size_t(S));
  }
  return v;
}

void check_quant_shape(QuantType type, int64_t N, int64_t K, int64_t group_size, DType scale_dtype) {
  RINFER_CHECK(type == QuantType::Q8 || type == QuantType::Q4, "quantized weight: unknown type");
  RINFER_CHECK(N > 0 && K > 0, "quantized weight: empty shape ", N, " x ", K);
  RINFER_CHECK(quant_group_size_supported(group_size), "quantized weight: unsupported group size ", group_size,
               " (32, 64 or 128)");
  RINFER_CHECK(K % group_size == 0, "quantized weight: K = ", K, " is not a multiple of the group size ", group_size);
  RINFER_CHECK(scale_dtype == DType::F16 || scale_dtype == DType::F32, "quantized weight: scale dtype ",
               dtype_name(scale_dtype), " (F16 or F32)");
}

void quantize_weights(const float* w, int64_t N, int64_t K, int64_t ldw, QuantType type, int64_t group_size,
                      DType scale_dtype, void* data, void* scales, ThreadPool& pool) {
  check_quant_shape(type, N, K, group_size, scale_dtype);
  const int64_t n_blocks = quant_padded_rows(N) / 16, G = K / group_size;
  const size_t block_data = quant_data_bytes(type, 16, K), block_scales = size_t(16 * G) * dtype_size(scale_dtype);
  // per-block pieces of the reference: bit-identical whatever the split
  pool.parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1, int) {
    const int64_t n0 = 16 * b0, n1 = std::min(N, 16 * b1);
    reference::quantize_weights(w + n0 * ldw, n1 - n0, K, ldw, type, group_size, scale_dtype,
                                static_cast<uint8_t*>(data) + b0 * block_data,
                                static_cast<uint8_t*>(scales) + b0 * block_scales);
  });
}

void dequantize_weights(const QuantizedWeight& w, float* out) {
  check_quant_shape(w.type, w.N, w.K, w.group_size, w.scale_dtype);
  reference::dequantize_rows(w, out);
}

int64_t quant_gemv_max_m() { return kQGemvMaxM; }

namespace {
std::atomic<int> g_quant_decode{int(QuantDecode::Auto)};

// Decode with int8 activations? AVX-512 with VNNI, and AVX2 (vpmaddubsw);
// not AVX-512 without VNNI (its weight-only GEMV).
bool decode_a8(const QuantizedWeight&) {
  const Isa isa = active_isa();
  if (!(isa == Isa::Avx2 || (isa == Isa::Avx512 && has_vnni()))) return false;
  switch (QuantDecode(g_quant_decode.load(std::memory_order_relaxed))) {
    case QuantDecode::WeightOnly: return false;
    case QuantDecode::Int8Activations: return true;
    default: return true;  // Auto: see ops.h
  }
}
}  // namespace

void set_quant_decode(QuantDecode mode) { g_quant_decode.store(int(mode), std::memory_order_relaxed); }
QuantDecode quant_decode() { return QuantDecode(g_quant_decode.load(std::memory_order_relaxed)); }

const char* matmul_q_path(int64_t M, const QuantizedWeight& w) {
  const bool q8 = w.type == QuantType::Q8;
  const Isa isa = active_isa();
  if (isa == Isa::Scalar) return q8 ? "w8a16-scalar" : "w4a16-scalar";
  if (M <= kQGemvMaxM) {
    if (decode_a8(w)) {
      if (isa == Isa::Avx2) return q8 ? "w8a8-avx2-gemv" : "w4a8-avx2-gemv";
      return q8 ? "w8a8-vnni-gemv" : "w4a8-vnni-gemv";
    }
    return q8 ? "w8a16-gemv" : "w4a16-gemv";
  }
  if (isa == Isa::Avx512 && has_vnni()) return q8 ? "w8a8-vnni-gemm" : "w4a8-vnni-gemm";
  if (avx_vnni_active()) return q8 ? "w8a8-avxvnni-gemm" : "w4a8-avxvnni-gemm";
  if (isa == Isa::Avx2) return q8 ? "w8a8-avx2-gemm" : "w4a8-avx2-gemm";
  return q8 ? "w8a16-dequant-gemm" : "w4a16-dequant-gemm";
}

ActQuant matmul_q_activation_quant(int64_t M, const QuantizedWeight& w) {
  const char* p = matmul_q_path(M, w);
  if (std::strstr(p, "a8-vnni-gemv") || std::strstr(p, "a8-avx2-gemv")) return ActQuant::PerGroup;
  if (std::strstr(p, "a8-vnni-gemm") || std::strstr(p, "a8-avxvnni-gemm") || std::strstr(p, "a8-avx2-gemm"))
    return ActQuant::PerRow;
  return ActQuant::None;
}

void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512::quantize_row_i8(x, n, q, scale);
    case Isa::Avx2: return avx2::quantize_row_i8(x, n, q, scale);
    default: return reference::quantize_row_i8(x, n, q, scale);
  }
}

namespace {
// What every matmul_q entry point checks of a weight before x (K wide) meets it.
void check_q_operand(const QuantizedWeight& w, int64_t K) {
  check_quant_shape(w.type, w.N, w.K, w.group_size, w.scale_dtype);
  RINFER_CHECK(K == w.K, "matmul_q: x has K = ", K, " but the weight has K = ", w.K);
  RINFER_CHECK(w.zeros == nullptr, "matmul_q: asymmetric (zero point) weights are not supported yet");
  RINFER_CHECK(w.data && (w.scales || w.interleaved), "matmul_q: weight without data or scales");
}
}  // namespace

void matmul_q(const float* x, int64_t M, int64_t K, int64_t ldx, const QuantizedWeight& w, const float* bias, float* y,
              int64_t ldy, ThreadPool& pool) {
  check_q_operand(w, K);
  if (M <= 0) return;
  count_macs(M, w.N, K);
  const Isa isa = active_isa();
  if (isa == Isa::Scalar) {
    const int64_t n_blocks = quant_padded_rows(w.N) / 16;
    pool.parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1, int) {
      const QuantizedWeight v = row_blocks(w, b0, b1);
      reference::matmul_q(x, M, K, ldx, v, bias ? bias + 16 * b0 : nullptr, y + 16 * b0, ldy, ActQuant::None);
    });
    return;
  }
  const detail::QMatmulArgs a{x, M, K, ldx, &w, bias, y, ldy};
  const detail::Runner r = runner_for(pool);
  if (M <= kQGemvMaxM) {
    const bool a8 = decode_a8(w);
    if (a8 && isa == Isa::Avx512)
      avx512::matmul_q_gemv_a8(a, r);
    else if (a8)
      avx2::matmul_q_gemv_a8(a, r);
    else if (isa == Isa::Avx512)
      avx512::matmul_q_gemv(a, r);
    else
      avx2::matmul_q_gemv(a, r);
  } else if (isa == Isa::Avx512 && has_vnni()) {
    avx512::matmul_q_gemm(a, r);
  } else if (avx_vnni_active()) {
    avxvnni::matmul_q_gemm_multi(&a, 1, r);
  } else if (isa == Isa::Avx2) {
    avx2::matmul_q_gemm_multi(&a, 1, r);
  } else {
    avx2::matmul_q_gemm(a, r);
  }
}

void matmul_q_gate_up_silu(const float* x, int64_t M, int64_t K, int64_t ldx, const QMatmulOut& gate,
                           const QMatmulOut& up, ThreadPool& pool) {
  const QuantizedWeight& wg = *gate.w;
  const QuantizedWeight& wu = *up.w;
  RINFER_CHECK(wg.N == wu.N && wg.K == wu.K, "matmul_q_gate_up_silu: gate is ", wg.N, " x ", wg.K, " but up is ", wu.N,
               " x ", wu.K);
  if (M > kQGemvMaxM && active_isa() == Isa::Avx512 && has_vnni() && wg.type == wu.type &&
      wg.group_size == wu.group_size) {
    check_q_operand(wg, K);
    check_q_operand(wu, K);
    const detail::QMatmulArgs ag{x, M, K, ldx, &wg, gate.bias, gate.y, gate.ldy};
    const detail::QMatmulArgs au{x, M, K, ldx, &wu, up.bias, up.y, up.ldy};
    if (avx512::matmul_q_gemm_gated(ag, au, runner_for(pool))) {
      count_macs(M, wg.N, K);
      count_macs(M, wu.N, K);
      return;
    }
  }
  const QMatmulOut outs[2] = {gate, up};
  matmul_q_multi(x, M, K, ldx, outs, 2, pool);
  const int64_t N = wg.N;
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) silu_mul(gate.y + r * gate.ldy, up.y + r * up.ldy, gate.y + r * gate.ldy, N);
  };
  if (M < 16 || pool.size() == 1)
    rows(0, M);
  else
    pool.parallel_for(M, 1, [&](int64_t r0, int64_t r1, int) { rows(r0, r1); });
}

void matmul_q_multi(const float* x, int64_t M, int64_t K, int64_t ldx, const QMatmulOut* outs, int n,
                    ThreadPool& pool) {
  // Fused: the int8-activation decode GEMV (AVX-512 and AVX2), and the int8
  // prefill GEMMs (AVX-512 VNNI, AVX-VNNI, plain AVX2).
  const bool gemv = M <= kQGemvMaxM;
  const Isa isa = active_isa();
  const bool avx_vnni = isa == Isa::Avx2 && avx_vnni_active();
  bool fuse = n >= 2 && n <= kMatmulQMultiMax && M > 0 && ((isa == Isa::Avx512 && (gemv || has_vnni())) || isa == Isa::Avx2);
  for (int i = 0; fuse && i < n; ++i) {
    const QuantizedWeight& w = *outs[i].w;
    fuse = (!gemv || decode_a8(w)) && w.type == outs[0].w->type && w.group_size == outs[0].w->group_size &&
           w.K == K && w.zeros == nullptr && w.data && (w.scales || w.interleaved);
  }
  if (!fuse) {
    for (int i = 0; i < n; ++i) matmul_q(x, M, K, ldx, *outs[i].w, outs[i].bias, outs[i].y, outs[i].ldy, pool);
    return;
  }
  detail::QMatmulArgs as[kMatmulQMultiMax];
  for (int i = 0; i < n; ++i) {
    check_quant_shape(outs[i].w->type, outs[i].w->N, outs[i].w->K, outs[i].w->group_size, outs[i].w->scale_dtype);
    count_macs(M, outs[i].w->N, K);
    as[i] = detail::QMatmulArgs{x, M, K, ldx, outs[i].w, outs[i].bias, outs[i].y, outs[i].ldy};
  }
  if (gemv && isa == Isa::Avx2)
    avx2::matmul_q_gemv_a8_multi(as, n, runner_for(pool));
  else if (avx_vnni)
    avxvnni::matmul_q_gemm_multi(as, n, runner_for(pool));
  else if (isa == Isa::Avx2)
    avx2::matmul_q_gemm_multi(as, n, runner_for(pool));
  else if (gemv)
    avx512::matmul_q_gemv_a8_multi(as, n, runner_for(pool));
  else
    avx512::matmul_q_gemm_multi(as, n, runner_for(pool));
}

}  // namespace rinfer::kernels::cpu
