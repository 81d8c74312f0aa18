#include "model/layers.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rinfer {

void forward_linears(const float* x, int64_t rows, std::initializer_list<std::pair<const Linear*, float*>> linears,
                     ThreadPool& pool) {
  kernels::cpu::QMatmulOut outs[kernels::cpu::kMatmulQMultiMax];
  int n = 0;
  bool all_quantized = linears.size() <= size_t(kernels::cpu::kMatmulQMultiMax);
  const int64_t in = linears.begin()->first->in;
  for (const auto& [l, y] : linears) {
    all_quantized = all_quantized && l->quantized && l->in == in;
    if (all_quantized) outs[n++] = {&l->qweight, l->bias, y, l->out};
  }
  if (all_quantized) {
    kernels::cpu::matmul_q_multi(x, rows, in, in, outs, n, pool);
    return;
  }
  // All blocked BF16 (the converter's bf16 output): one job as well.
  kernels::cpu::Bf16BlockedOut bouts[kernels::cpu::kMatmulQMultiMax];
  bool all_blocked = linears.size() <= size_t(kernels::cpu::kMatmulQMultiMax);
  n = 0;
  for (const auto& [l, y] : linears) {
    all_blocked = all_blocked && l->blocked && !l->quantized && l->in == in;
    if (all_blocked) bouts[n++] = {static_cast<const uint16_t*>(l->weight.data), l->out, l->bias, y, l->out};
  }
  if (all_blocked) {
    kernels::cpu::matmul_bf16_blocked_multi(x, rows, in, in, bouts, n, pool);
    return;
  }
  for (const auto& [l, y] : linears) l->forward(x, rows, y, pool);
}

Linear Linear::load(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias) {
  Linear l;
  l.in = in;
  l.out = out;
  const std::string name = prefix + ".weight";
  const auto it = w.tensors().find(name);
  if (const kernels::cpu::QuantizedWeight* q = w.quantized(name)) {
    RINFER_CHECK(q->N == out && q->K == in, "quantized tensor ", name, " is ", q->N, " x ", q->K, ", expected ", out,
                 " x ", in, " in ", w.source);
    l.weight = it->second;
    l.qweight = *q;
    l.quantized = true;
  } else if (it != w.tensors().end() && it->second.dtype == DType::BF16 && it->second.shape.size() == 4) {
    // Blocked BF16 (the converter's default for projection matrices).
    const TensorView d = it->second;
    RINFER_CHECK(kernels::cpu::bf16_blockable(out, in) && d.shape == Shape({out / 8, in / 32, 8, 32}), "tensor ", name,
                 " (blocked BF16) has shape ", shape_str(d.shape), ", expected [", out / 8, ", ", in / 32,
                 ", 8, 32] for a [", out, ", ", in, "] matrix in ", w.source);
    l.weight = d;
    l.blocked = true;
  } else {
    l.weight = w.get(name, {out, in});
    RINFER_CHECK(l.weight.dtype != DType::U8, "tensor ", name, " is packed U8 data without a quantization scheme in ",
                 w.source);
  }
  if (bias) l.bias = w.get_f32(prefix + ".bias", {out});
  return l;
}

RMSNorm RMSNorm::load(const WeightStore& w, const std::string& name, int64_t dim, double eps) {
  RMSNorm n;
  n.weight = w.get_f32(name, {dim});
  n.dim = dim;
  n.eps = float(eps);
  return n;
}

std::vector<float> rope_inv_freq(double theta, int64_t rot_dim, const RopeScaling& s) {
  std::vector<float> inv(size_t(rot_dim / 2));
  for (int64_t i = 0; i < rot_dim / 2; ++i) {
    // As HF: exponent computed in float32, then base ** exponent.
    float expo = float(2 * i) / float(rot_dim);
    inv[i] = float(1.0 / std::pow(theta, double(expo)));
  }
  if (s.type == "yarn") {
    // DeepSeek's YaRN: blend interpolated (f / factor) and original
    // frequencies with a linear ramp between the dims that rotate beta_fast
    // and beta_slow times over the original context.
    auto correction_dim = [&](double rotations) {
      return (double(rot_dim) * std::log(double(s.original_max_position) / (rotations * 2 * M_PI))) /
             (2 * std::log(theta));
    };
    double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(s.beta_slow)), double(rot_dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < rot_dim / 2; ++i) {
      float ramp = std::clamp(float((float(i) - float(low)) / float(high - low)), 0.0f, 1.0f);
      float extrapolation = 1.0f - ramp;  // share of the original frequency
      float f = inv[size_t(i)];
      inv[size_t(i)] = float(f / s.factor) * (1.0f - extrapolation) + f * extrapolation;
    }
  } else if (s.type == "linear") {
    for (auto& f : inv) f = float(f / s.factor);
  } else if (s.type == "llama3") {
    const double old_ctx = double(s.original_max_position);
    const double low_wavelen = old_ctx / s.low_freq_factor;
    const double high_wavelen = old_ctx / s.high_freq_factor;
    for (auto& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f = float(f / s.factor);
      } else {
        double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = float((1.0 - smooth) * f / s.factor + smooth * f);
      }
    }
  }
  return inv;
}

RotaryEmbedding::RotaryEmbedding(const ModelConfig& cfg, int64_t rot_dim, kernels::cpu::RopeStyle style)
    : rot_dim_(rot_dim), style_(style), theta_(cfg.rope_theta), scaling_(cfg.rope_scaling),
      max_pos_(cfg.rope_scaling.original_max_position > 0 ? cfg.rope_scaling.original_max_position
                                                           : cfg.max_position_embeddings) {
  inv_freq_ = rope_inv_freq(theta_, rot_dim_, scaling_);
  if (scaling_.type == "yarn")
    mscale_ = float(yarn_get_mscale(scaling_.factor, scaling_.mscale) /
                    yarn_get_mscale(scaling_.factor, scaling_.mscale_all_dim));
}

void RotaryEmbedding::apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, int64_t seq_len) const {
  thread_local std::vector<float> cs;
  if (cs.size() < size_t(rot_dim_)) cs.resize(size_t(rot_dim_));
  angles(pos, seq_len, cs.data());
  apply_angles(x, n_heads, head_dim, cs.data());
}

void RotaryEmbedding::apply_angles(float* x, int64_t n_heads, int64_t head_dim, const float* cs) const {
  kernels::cpu::rope_with_angles(x, int(n_heads), int(head_dim), int(rot_dim_), cs, style_);
}

void RotaryEmbedding::angles(int64_t pos, int64_t seq_len, float* cs) const {
  if (scaling_.type == "dynamic" && seq_len > max_pos_) {
    // Dynamic NTK: grow the base once the sequence passes the trained length
    // (HF recomputes inv_freq from the current length the same way).
    // The frequencies depend only on seq_len: computed once per length and
    // thread, not for every token, head and layer.
    thread_local const RotaryEmbedding* cached_for = nullptr;
    thread_local int64_t cached_len = -1;
    thread_local std::vector<float> inv;
    if (cached_for != this || cached_len != seq_len) {
      double base = theta_ * std::pow(scaling_.factor * double(seq_len) / double(max_pos_) - (scaling_.factor - 1.0),
                                      double(rot_dim_) / double(rot_dim_ - 2));
      inv = rope_inv_freq(base, rot_dim_, RopeScaling{});
      cached_for = this;
      cached_len = seq_len;
    }
    kernels::cpu::rope_angles(pos, inv.data(), int(rot_dim_), 1.0f, cs);
    return;
  }
  kernels::cpu::rope_angles(pos, inv_freq_.data(), int(rot_dim_), mscale_, cs);
}

}  // namespace rinfer
