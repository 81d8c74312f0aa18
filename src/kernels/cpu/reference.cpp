// Scalar reference kernels: straightforward loops, accumulation in double
// where it is cheap, so SIMD variants have an exact-enough yardstick.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace rinfer::kernels::cpu::reference {

namespace {
inline float load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: fail("kernel: unsupported dtype ", dtype_name(t));
  }
}
}  // namespace

void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(x[m * ldx + k]) * load(w, wdt, n * K + k);
      y[m * ldy + n] = float(acc);
    }
}

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * weight[i];
}

void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale) {
  const int half = rot_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      float angle = float(pos) * inv_freq[i];
      float c = std::cos(angle) * mscale, s = std::sin(angle) * mscale;
      int a = style == RopeStyle::RotateHalf ? i : 2 * i;
      int b = style == RopeStyle::RotateHalf ? i + half : 2 * i + 1;
      float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch) {
  const int hd = kv.head_dim;
  const int64_t token_stride = int64_t(kv.n_kv_heads) * hd;
  const int64_t block_stride = token_stride * kv.block_size;
  auto slot_offset = [&](int64_t j) {
    return int64_t(block_table[j / kv.block_size]) * block_stride + (j % kv.block_size) * token_stride +
           int64_t(kv_head) * hd;
  };
  for (int64_t j = 0; j < n_ctx; ++j) {
    int64_t off = slot_offset(j);
    double dot = 0;
    for (int d = 0; d < hd; ++d) dot += double(q[d]) * load(kv.k, kv.dtype, off + d);
    scratch[j] = float(dot) * scale + alibi_slope * float(j - (n_ctx - 1));
  }
  softmax(scratch, n_ctx);
  for (int d = 0; d < hd; ++d) out[d] = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    int64_t off = slot_offset(j);
    for (int d = 0; d < hd; ++d) out[d] += scratch[j] * load(kv.v, kv.dtype, off + d);
  }
}

}  // namespace rinfer::kernels::cpu::reference
