#include "model/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <numeric>

#include "core/buffer.h"
#include "core/error.h"
#include "model/stage_profile.h"

namespace rinfer {

Range shard_range(int64_t n, const Shard& shard, int64_t align) {
  RINFER_CHECK(shard.world >= 1 && shard.rank >= 0 && shard.rank < shard.world, "rank ", shard.rank,
               " is not in a world of ", shard.world);
  const int64_t units = (n + align - 1) / align;
  RINFER_CHECK(units >= shard.world, "cannot split ", n, " into ", shard.world, " parts of whole ", align, "s");
  const int64_t per = units / shard.world, extra = units % shard.world;
  // The first `extra` ranks take one unit more.
  const int64_t u0 = shard.rank * per + std::min<int64_t>(shard.rank, extra);
  const int64_t u1 = u0 + per + (shard.rank < extra ? 1 : 0);
  return {std::min(n, u0 * align), std::min(n, u1 * align)};
}

const char* parallel_mode_name(ParallelMode m) {
  switch (m) {
    case ParallelMode::Replicated:
      return "replicated";
    case ParallelMode::Column:
      return "column";
    case ParallelMode::Row:
      return "row";
  }
  return "?";
}

namespace {

// The whole matrix prefix.weight [out, in] as the loader stored it.
MatrixDesc whole_matrix(const WeightStore& w, const std::string& name, int64_t in, int64_t out) {
  MatrixDesc m;
  m.N = out;
  m.K = in;
  const auto it = w.tensors().find(name);
  if (const QuantizedWeight* q = w.quantized(name)) {
    RINFER_CHECK(q->N == out && q->K == in, "quantized tensor ", name, " is ", q->N, " x ", q->K, ", expected ", out,
                 " x ", in, " in ", w.source);
    m.format = MatrixFormat::Quantized;
    m.dtype = DType::U8;
    m.q = *q;
    m.data = q->data;
  } else if (it != w.tensors().end() && it->second.dtype == DType::BF16 && it->second.shape.size() == 4) {
    // Blocked BF16 (the converter's default for projection matrices).
    const TensorView d = it->second;
    RINFER_CHECK(ops::bf16_blockable(out, in) && d.shape == Shape({out / 8, in / 32, 8, 32}), "tensor ", name,
                 " (blocked BF16) has shape ", shape_str(d.shape), ", expected [", out / 8, ", ", in / 32,
                 ", 8, 32] for a [", out, ", ", in, "] matrix in ", w.source);
    m.format = MatrixFormat::BlockedBf16;
    m.dtype = DType::BF16;
    m.data = d.data;
  } else {
    const TensorView d = w.get(name, {out, in});
    RINFER_CHECK(d.dtype != DType::U8, "tensor ", name, " is packed U8 data without a quantization scheme in ",
                 w.source);
    m.format = MatrixFormat::Dense;
    m.dtype = d.dtype;
    m.data = d.data;
  }
  return m;
}

int64_t lcm(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

}  // namespace

Linear Linear::load(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias,
                    ParallelMode mode, const Shard& shard, int64_t unit) {
  if (shard.whole() || mode == ParallelMode::Replicated) {
    Linear l;
    l.w_ = whole_matrix(w, prefix + ".weight", in, out);
    l.rows_ = {0, out};
    l.cols_ = {0, in};
    l.mode_ = shard.whole() ? mode : ParallelMode::Replicated;
    l.world_ = shard.world;
    if (bias) l.bias_ = w.get_f32(prefix + ".bias", {out});
    return l;
  }
  const MatrixDesc m = whole_matrix(w, prefix + ".weight", in, out);
  if (mode == ParallelMode::Column)
    return load_rows(w, prefix, in, out, bias, shard_range(out, shard, lcm(unit, ops::matrix_row_unit(m))));
  return load_columns(w, prefix, in, out, bias, shard_range(in, shard, lcm(unit, ops::matrix_column_unit(m))), shard);
}

Linear Linear::load_rows(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias,
                         Range rows) {
  Linear l;
  l.w_ = ops::matrix_rows(whole_matrix(w, prefix + ".weight", in, out), rows.begin, rows.end);
  l.mode_ = rows.size() == out ? ParallelMode::Replicated : ParallelMode::Column;
  l.rows_ = rows;
  l.cols_ = {0, in};
  if (bias) l.bias_ = w.get_f32(prefix + ".bias", {out}) + rows.begin;
  if (l.mode_ == ParallelMode::Column) l.own_copy(w, prefix + ".weight");
  return l;
}

void Linear::own_copy(const WeightStore& w, const std::string& name) {
  if (w_.empty()) return;
  auto copy = std::make_shared<Buffer>(ops::matrix_copy_bytes(w_));
  if (w_.format == MatrixFormat::Quantized) {
    w_ = ops::matrix_copy(w_, copy->data());
    w.release_pages(name);
  } else {
    // Rows of a dense or blocked matrix are one run of bytes: copied a
    // chunk at a time, each chunk's pages let go after it.
    const TensorView t = w.tensors().at(name);
    const auto* src = static_cast<const uint8_t*>(w_.data);
    const size_t offset = size_t(src - static_cast<const uint8_t*>(t.data));
    const size_t bytes = ops::matrix_copy_bytes(w_);
    constexpr size_t kChunk = size_t(16) << 20;
    auto* dst = copy->as<uint8_t>();
    for (size_t at = 0; at < bytes; at += kChunk) {
      const size_t n = std::min(kChunk, bytes - at);
      std::memcpy(dst + at, src + at, n);
      w.release_pages(name, offset + at, n);
    }
    w_.data = dst;
  }
  owned_ = copy;
}

Linear Linear::load_columns(const WeightStore& w, const std::string& prefix, int64_t in, int64_t out, bool bias,
                            Range cols, const Shard& shard) {
  const MatrixDesc m = whole_matrix(w, prefix + ".weight", in, out);
  Linear l;
  auto copy = std::make_shared<Buffer>(ops::matrix_columns_bytes(m, cols.begin, cols.end));
  l.w_ = ops::matrix_columns(m, cols.begin, cols.end, copy->data());
  l.owned_ = copy;
  w.release_pages(prefix + ".weight");
  l.mode_ = ParallelMode::Row;
  l.world_ = shard.world;
  l.rank_ = shard.rank;
  l.rows_ = {0, out};
  l.cols_ = cols;
  if (bias) l.bias_ = w.get_f32(prefix + ".bias", {out});
  return l;
}

Linear Linear::over(const MatrixDesc& m, ParallelMode mode, Range rows) {
  Linear l;
  l.w_ = m;
  l.mode_ = mode;
  l.rows_ = rows.size() > 0 ? rows : Range{0, m.N};
  l.cols_ = {0, m.K};
  return l;
}

void Linear::forward(const ForwardContext& ctx, const float* x, int64_t rows, float* y) const {
  if (!reduces()) {
    ops::matmul(ctx.exec, x, rows, w_.K, w_, bias_, y, w_.N);
    return;
  }
  // A partial sum on each rank; the bias joins once, after the reduction.
  ops::matmul(ctx.exec, x, rows, w_.K, w_, nullptr, y, w_.N);
  {
    profile::CommScope comm(uint64_t(rows * w_.N) * sizeof(float));
    ctx.comm->all_reduce_sum(y, rows * w_.N);
  }
  if (bias_)
    for (int64_t r = 0; r < rows; ++r) ops::add_inplace(y + r * w_.N, bias_, w_.N);
}

void Linear::forward_partial(const ForwardContext& ctx, const float* x, int64_t rows, float* y) const {
  if (!reduces()) {
    forward(ctx, x, rows, y);
    return;
  }
  ops::matmul(ctx.exec, x, rows, w_.K, w_, rank_ == 0 ? bias_ : nullptr, y, w_.N);
}

void forward_linears(const ForwardContext& ctx, const float* x, int64_t rows,
                     std::initializer_list<std::pair<const Linear*, float*>> linears) {
  ops::MatmulOut outs[8];
  size_t n = 0;
  bool reduces = false;
  for (const auto& [l, y] : linears) {
    reduces = reduces || l->reduces();
    if (n < 8) outs[n++] = {&l->matrix(), l->bias(), y, l->out()};
  }
  if (!reduces && n == linears.size()) {
    ops::matmul_multi(ctx.exec, x, rows, linears.begin()->first->in(), {outs, n});
    return;
  }
  for (const auto& [l, y] : linears) l->forward(ctx, x, rows, y);
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

RotaryEmbedding::RotaryEmbedding(const ModelConfig& cfg, int64_t rot_dim, RopeStyle style)
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
  ops::rope_with_angles(x, int(n_heads), int(head_dim), int(rot_dim_), cs, style_);
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
    ops::rope_angles(pos, inv.data(), int(rot_dim_), 1.0f, cs);
    return;
  }
  ops::rope_angles(pos, inv_freq_.data(), int(rot_dim_), mscale_, cs);
}

}  // namespace rinfer
