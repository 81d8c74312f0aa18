// Scalar reference kernels: straightforward loops, accumulation in double
// where it is cheap, so SIMD variants have an exact-enough yardstick.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_layout.h"

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

void rope_angles(int64_t pos, const float* inv_freq, int rot_dim, float mscale, float* cs) {
  const int half = rot_dim / 2;
  for (int i = 0; i < half; ++i) {
    float angle = float(pos) * inv_freq[i];
    cs[i] = std::cos(angle) * mscale;
    cs[half + i] = std::sin(angle) * mscale;
  }
}

void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale) {
  std::vector<float> cs(static_cast<size_t>(rot_dim));
  reference::rope_angles(pos, inv_freq, rot_dim, mscale, cs.data());
  reference::rope_with_angles(x, n_heads, head_dim, rot_dim, cs.data(), style);
}

void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  const int half = rot_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[i], s = cs[half + i];
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

void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, logits[i]);
  for (int64_t i = 0; i < n; ++i) probs[i] = (logits[i] - mx) / temperature;
  softmax(probs, n);
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
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
  // Head-major pools (PagedKV): position j is row kv_block_row(block, head) + j % block_size.
  auto slot_offset = [&](int64_t j) {
    return (kv_block_row(kv, block_table[j / kv.block_size], kv_head) + j % kv.block_size) * hd;
  };
  const bool i8 = kv.dtype == DType::I8;
  // I8: the scale of a row is at the row's index, off / hd.
  auto kv_scale = [&](const float* scales, int64_t off) { return i8 ? scales[off / hd] : 1.0f; };
  auto ld = [&](const void* p, int64_t i) {
    return i8 ? float(static_cast<const int8_t*>(p)[i]) : load(p, kv.dtype, i);
  };
  for (int64_t j = 0; j < n_ctx; ++j) {
    int64_t off = slot_offset(j);
    double dot = 0;
    for (int d = 0; d < hd; ++d) dot += double(q[d]) * ld(kv.k, off + d);
    dot *= kv_scale(kv.k_scale, off);
    scratch[j] = float(dot) * scale + alibi_slope * float(j - (n_ctx - 1));
  }
  softmax(scratch, n_ctx);
  for (int d = 0; d < hd; ++d) out[d] = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    int64_t off = slot_offset(j);
    const float sv = kv_scale(kv.v_scale, off);
    for (int d = 0; d < hd; ++d) out[d] += scratch[j] * (sv * ld(kv.v, off + d));
  }
}

void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v) {
  const int hd = kv.head_dim;
  for (int h = 0; h < kv.n_kv_heads; ++h) {
    const int64_t row = kv_slot_row(kv, slot, h);
    if (kv.dtype == DType::I8) {
      quantize_row_i8(k + int64_t(h) * hd, hd, static_cast<int8_t*>(kv.k) + row * hd, kv.k_scale + row);
      quantize_row_i8(v + int64_t(h) * hd, hd, static_cast<int8_t*>(kv.v) + row * hd, kv.v_scale + row);
    } else {
      const size_t esz = dtype_size(kv.dtype);
      convert_from_f32(kv.dtype, k + int64_t(h) * hd, static_cast<uint8_t*>(kv.k) + row * hd * esz, size_t(hd));
      convert_from_f32(kv.dtype, v + int64_t(h) * hd, static_cast<uint8_t*>(kv.v) + row * hd * esz, size_t(hd));
    }
  }
}

// ================================================================= quantization
void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));  // NaN ignored (max keeps amax)
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float t = x[i] * inv;
    t = t > -127.0f ? t : -127.0f;  // NaN -> -127, as the SIMD max(t, -127)
    t = t < 127.0f ? t : 127.0f;
    q[i] = int8_t(std::nearbyint(t));
  }
  *scale = amax / 127.0f;
}

namespace {
int64_t pad16(int64_t n) { return (n + 15) / 16 * 16; }

// The scale of W[n, k] (either layout: quant_layout.h).
float read_scale(const QuantizedWeight& w, int64_t n, int64_t k) {
  const uint8_t* p = quant_addr(w).group_scales(n / 16, k / w.group_size);
  if (w.scale_dtype == DType::F16) return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[n % 16]);
  return reinterpret_cast<const float*>(p)[n % 16];
}
// Unsigned stored value u (q = u - offset) of W[n, k].
int quant_u(const QuantizedWeight& w, int64_t n, int64_t k) {
  const uint8_t* d = quant_addr(w).group_data(n / 16, k / w.group_size);
  const int64_t kg = k % w.group_size;  // k inside its group
  if (w.type == QuantType::Q8) return d[(kg / 4) * 64 + (n % 16) * 4 + k % 4];
  const uint8_t b = d[(kg / 8) * 64 + (n % 16) * 4 + k % 4];
  return (k % 8) < 4 ? (b & 15) : (b >> 4);
}
}  // namespace

void quantize_weights(const float* w, int64_t N, int64_t K, int64_t ldw, QuantType type, int64_t group_size,
                      DType scale_dtype, void* data, void* scales) {
  check_quant_shape(type, N, K, group_size, scale_dtype);
  const int qmax = type == QuantType::Q8 ? 127 : 7, off = type == QuantType::Q8 ? 128 : 8;
  const int64_t Np = pad16(N), G = K / group_size;
  auto* d = static_cast<uint8_t*>(data);
  std::memset(d, 0, quant_data_bytes(type, N, K));
  std::vector<int> q(static_cast<size_t>(group_size));
  for (int64_t n = 0; n < Np; ++n)
    for (int64_t g = 0; g < G; ++g) {
      float s = 0.0f;  // padding rows: scale 0, q 0
      std::fill(q.begin(), q.end(), 0);
      if (n < N) {
        const float* src = w + n * ldw + g * group_size;
        float amax = 0.0f;
        for (int64_t i = 0; i < group_size; ++i) {
          RINFER_CHECK(std::isfinite(src[i]), "quantize_weights: non-finite weight at row ", n, " column ",
                       g * group_size + i);
          amax = std::max(amax, std::fabs(src[i]));
        }
        s = amax / float(qmax);
        if (scale_dtype == DType::F16) {
          uint16_t h = f32_to_f16(s);
          // never round the scale down past amax / qmax: no value may clip
          if (double(f16_to_f32(h)) * qmax < double(amax)) ++h;
          RINFER_CHECK(std::isfinite(f16_to_f32(h)), "quantize_weights: scale ", s, " of row ", n,
                       " overflows f16; use F32 scales");
          s = f16_to_f32(h);
        }
        if (s > 0.0f)
          for (int64_t i = 0; i < group_size; ++i) {
            const double t = std::nearbyint(double(src[i]) / double(s));
            q[size_t(i)] = int(std::clamp(t, double(-qmax), double(qmax)));
          }
      }
      const int64_t sidx = ((n / 16) * G + g) * 16 + n % 16;
      if (scale_dtype == DType::F16)
        static_cast<uint16_t*>(scales)[sidx] = f32_to_f16(s);
      else
        static_cast<float*>(scales)[sidx] = s;
      for (int64_t i = 0; i < group_size; ++i) {
        const int64_t k = g * group_size + i;
        const int u = q[size_t(i)] + off;
        if (type == QuantType::Q8)
          d[(n / 16) * 16 * K + (k / 4) * 64 + (n % 16) * 4 + k % 4] = uint8_t(u);
        else
          d[(n / 16) * 8 * K + (k / 8) * 64 + (n % 16) * 4 + k % 4] |= uint8_t((k % 8) < 4 ? u : u << 4);
      }
    }
}

void matmul_q(const float* x, int64_t M, int64_t K, int64_t ldx, const QuantizedWeight& w, const float* bias, float* y,
              int64_t ldy, ActQuant act) {
  const int off = w.type == QuantType::Q8 ? 128 : 8;
  const int64_t gs = w.group_size;
  std::vector<int8_t> qx(static_cast<size_t>(K));
  std::vector<double> xr(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    double sx = 1.0;
    if (act == ActQuant::PerRow) {
      float s;
      quantize_row_i8(x + m * ldx, K, qx.data(), &s);
      sx = s;
      for (int64_t k = 0; k < K; ++k) xr[size_t(k)] = qx[size_t(k)];
    } else if (act == ActQuant::PerGroup) {
      for (int64_t g = 0; g < K / gs; ++g) {
        float s;
        quantize_row_i8(x + m * ldx + g * gs, gs, qx.data() + g * gs, &s);
        for (int64_t k = g * gs; k < (g + 1) * gs; ++k) xr[size_t(k)] = double(qx[size_t(k)]) * s;
      }
    } else {
      for (int64_t k = 0; k < K; ++k) xr[size_t(k)] = x[m * ldx + k];
    }
    for (int64_t n = 0; n < w.N; ++n) {
      double acc = 0;
      for (int64_t g = 0; g < K / gs; ++g) {
        double part = 0;
        for (int64_t k = g * gs; k < (g + 1) * gs; ++k) part += xr[size_t(k)] * double(quant_u(w, n, k) - off);
        acc += part * read_scale(w, n, g * gs);
      }
      y[m * ldy + n] = float(acc * sx + (bias ? bias[n] : 0.0));
    }
  }
}

// Exposed for dequantize_weights (ops.h) below.
void dequantize_rows(const QuantizedWeight& w, float* out) {
  const int off = w.type == QuantType::Q8 ? 128 : 8;
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t k = 0; k < w.K; ++k)
      out[n * w.K + k] = read_scale(w, n, k) * float(quant_u(w, n, k) - off);
}

}  // namespace rinfer::kernels::cpu::reference
